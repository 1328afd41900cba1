#!/usr/bin/python3
"""An elastic worker for autotune_e2e.py: chorus's elastic loop (chorus.elastic.run_fn with an
ObjectState) around steps of three named allreduces, so that autotune sees whole steps (a step
begins where a name repeats).

Each step allreduces ones of three sizes under "grad.0".."grad.2" and checks that every element
is the world size; every COMMIT_EVERY steps it commits (where host changes are acted on). Each
time its world is formed it appends one JSON line to $ELASTIC_TEST_DIR/events (generation,
rank, size, pid). It trains until $ELASTIC_TEST_DIR/release exists, then exits 0; it gives up
after 200 s (exit 9), so none outlives a broken test for long.
"""
import json
import os
import sys
import time

import numpy as np

import chorus.numpy as hvd
from chorus.elastic import ObjectState, run_fn
from chorus.elastic.reset import reset

COMMIT_EVERY = 5
SIZES = (1, 4096, 65536)
d = os.environ['ELASTIC_TEST_DIR']
give_up = time.monotonic() + 200


def record():
    event = {'gen': int(os.environ['CHORUS_ELASTIC_GENERATION']), 'rank': hvd.rank(),
             'size': hvd.size(), 'pid': os.getpid()}
    fd = os.open(os.path.join(d, 'events'), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (json.dumps(event, sort_keys=True) + '\n').encode())
    os.close(fd)


def train_steps(state):
    record()
    while not os.path.exists(os.path.join(d, 'release')):
        if time.monotonic() > give_up:
            sys.exit(9)
        for i, n in enumerate(SIZES):
            out = hvd.allreduce(np.ones(n, dtype=np.float32), name='grad.%d' % i, op=hvd.Sum)
            if out[0] != hvd.size() or out[-1] != hvd.size():
                print('autotune_worker: rank %d: grad.%d is %g, not %d'
                      % (hvd.rank(), i, out[0], hvd.size()), flush=True)
                sys.exit(8)
        state.step += 1
        if state.step % COMMIT_EVERY == 0:
            state.commit()
        time.sleep(0.005)


train = run_fn(train_steps, reset)
hvd.init()
train(ObjectState(hvd.broadcast_object, hvd.rank, step=0))
