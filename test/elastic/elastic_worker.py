#!/usr/bin/python3
"""A small elastic worker for driver_e2e.py: chorus's elastic loop (chorus.elastic.run_fn with
an ObjectState) around a counter instead of a model.

Each step allreduces a one (so the sum is the world size) into `total` and counts `step`; every
COMMIT_EVERY steps it commits. Whenever the world is formed (the first time and after every
reset) it appends one JSON line to $ELASTIC_TEST_DIR/events and prints it on stdout: rank, size,
local rank, host, generation, scope, the elastic flag, its pid (survivors of a reset keep theirs),
the resets this process went through, and the state it resumes from (step, total, commits).

Then it acts on the schedule file $ELASTIC_TEST_DIR/schedule.json:
{"g<gen>r<rank>": ACTION, "*": ACTION}, where ACTION is, 0.2 s after the world was formed,
  "exit:N"   exit with code N
  "term"     send itself SIGTERM (a spot notice from outside)
  "stop"     send itself SIGSTOP (a hung worker: only its heartbeat tells)
  "sleep"    stop training and sleep without calling chorus (busy elsewhere: its heartbeat goes
             on, but it reaches no commit)
  "wait"     (the default) train until $ELASTIC_TEST_DIR/release exists, then exit 0
and in its next reset, after chorus shut down and before it joins the new world,
  "term_in_reset"     send itself SIGTERM (a worker lost while the others re-form)
  "term_after_adopt"  adopt chorusrun's next generation, then send itself SIGTERM 1 s later
                      (a worker lost while the others form the world it was placed in)
The key "join_delay": N makes a joining worker (CHORUS_ELASTIC_GENERATION=-1) wait N seconds
before its chorus init (a slow start: importing a framework, loading data).
Every worker gives up after 30 s (exit 9), so none outlives a broken test for long.
"""
import json
import os
import signal
import sys
import time

import numpy as np

import chorus.numpy as hvd
from chorus.elastic import ObjectState, run_fn
from chorus.elastic.reset import adopt_next_generation, reset

COMMIT_EVERY = 5
d = os.environ['ELASTIC_TEST_DIR']
give_up = time.monotonic() + 30
resets = 0


# The step's allreduce is unnamed: after a reset the survivors and the workers that join them
# number unnamed ops from zero alike (were they to differ, the job would stall until every
# worker gives up, and the test fails).


def record(state):
    e = os.environ
    event = {
        'rank': hvd.rank(), 'size': hvd.size(), 'local_rank': hvd.local_rank(),
        'host': e['CHORUS_HOSTNAME'], 'gen': int(e['CHORUS_ELASTIC_GENERATION']),
        'scope': e['CHORUS_RENDEZVOUS_SCOPE'], 'elastic': e.get('CHORUS_ELASTIC'),
        'horovod_rank': int(e['HOROVOD_RANK']), 'pid': os.getpid(), 'resets': resets,
        'step': state.step, 'total': state.total, 'commits': state.commits,
        'rendezvous': e['CHORUS_RENDEZVOUS_ADDR'], 'secret': e['CHORUS_RENDEZVOUS_SECRET'],
    }
    line = json.dumps(event, sort_keys=True)
    print(line, flush=True)
    fd = os.open(os.path.join(d, 'events'), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (line + '\n').encode())
    os.close(fd)
    return event


def counting_reset():
    global resets
    resets += 1
    if in_reset_action == 'term_in_reset':
        hvd.shutdown()
        os.kill(os.getpid(), signal.SIGTERM)
    if in_reset_action == 'term_after_adopt':
        hvd.shutdown()
        adopt_next_generation()
        time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)
    reset()


with open(os.path.join(d, 'schedule.json')) as f:
    schedule = json.load(f)


in_reset_action = None


def train_steps(state):
    global in_reset_action
    event = record(state)
    action = schedule.get(f"g{event['gen']}r{event['rank']}", schedule.get('*', 'wait'))
    if action in ('term_in_reset', 'term_after_adopt'):
        in_reset_action, action = action, 'wait'

    act_at = time.monotonic() + 0.2
    while True:
        if time.monotonic() > give_up:
            sys.exit(9)
        if action != 'wait' and time.monotonic() >= act_at:
            if action.startswith('exit:'):
                sys.exit(int(action[5:]))
            if action == 'sleep':
                time.sleep(max(0.0, give_up - time.monotonic()))
                sys.exit(9)
            os.kill(os.getpid(), signal.SIGTERM if action == 'term' else signal.SIGSTOP)
            action = 'wait'
        if os.path.exists(os.path.join(d, 'release')):
            return
        state.total += int(hvd.allreduce(np.ones(1, dtype=np.int64), op=hvd.Sum)[0])
        state.step += 1
        if state.step % COMMIT_EVERY == 0:
            state.commits += 1
            state.commit()
        time.sleep(0.01)


train = run_fn(train_steps, counting_reset)
if os.environ.get('CHORUS_ELASTIC_GENERATION') == '-1':
    time.sleep(schedule.get('join_delay', 0))
hvd.init()
train(ObjectState(hvd.broadcast_object, hvd.rank, step=0, total=0, commits=0))
