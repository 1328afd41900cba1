#!/usr/bin/python3
"""An elastic chorus worker for the multi-host tests (multihost_e2e.py): trains batches
0..N-1 under chorus's elastic loop, one allreduce of a one per batch (its sum is the world
size), committing every COMMIT_EVERY batches. The committed state is the history of
[batch, world size] pairs, so a batch lost to a rollback and trained again appears once,
and a batch trained twice (or skipped) shows.

Prints `CLUSTER_ELASTIC_STEP <rank> <size> <batch> <host>` per batch and, on rank 0 at the end,
`CLUSTER_ELASTIC_DONE <history as JSON>`.

Usage: elastic_history_worker.py --batches N [--interval SECONDS]
"""
import argparse
import json
import os
import time

import numpy as np

import chorus.numpy as hvd
from chorus.elastic import ObjectState, run_fn
from chorus.elastic.reset import reset

COMMIT_EVERY = 5

parser = argparse.ArgumentParser()
parser.add_argument('--batches', type=int, required=True)
parser.add_argument('--interval', type=float, default=0.05)
args = parser.parse_args()
host = os.environ.get('CHORUS_HOSTNAME', '?')


def train(state):
    while state.batch < args.batches:
        size = int(hvd.allreduce(np.ones(1, dtype=np.int64), op=hvd.Sum)[0])
        # A new list each time: ObjectState keeps references, not copies, at commit.
        state.history = state.history + [[state.batch, size]]
        state.batch += 1
        print(f'CLUSTER_ELASTIC_STEP {hvd.rank()} {size} {state.batch - 1} {host}', flush=True)
        if state.batch % COMMIT_EVERY == 0:
            state.commit()
        time.sleep(args.interval)
    state.commit()


hvd.init()
state = ObjectState(hvd.broadcast_object, hvd.rank, batch=0, history=[])
run_fn(train, reset)(state)
if hvd.rank() == 0:
    print('CLUSTER_ELASTIC_DONE ' + json.dumps(state.history), flush=True)
hvd.shutdown()
