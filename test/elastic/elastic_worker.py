#!/usr/bin/python3
"""A stand-in worker for driver_e2e.py: no training, only the elastic contract.

It appends one JSON line (rank, size, local rank, host, generation, scope, elastic flag) to
$ELASTIC_TEST_DIR/events and prints it on stdout, then acts on the schedule file
$ELASTIC_TEST_DIR/schedule.json: {"g<gen>r<rank>": ACTION, "*": ACTION}, where ACTION is
  "exit:N"   exit with code N after 0.2 s
  "term"     send itself SIGTERM after 0.2 s (a spot notice from outside)
  "wait"     (the default) exit 0 once $ELASTIC_TEST_DIR/release exists
Every worker gives up after 30 s (exit 9), so none outlives a broken test for long.
"""
import json
import os
import signal
import sys
import time

d = os.environ['ELASTIC_TEST_DIR']
record = {
    'rank': int(os.environ['CHORUS_RANK']),
    'size': int(os.environ['CHORUS_SIZE']),
    'local_rank': int(os.environ['CHORUS_LOCAL_RANK']),
    'host': os.environ['CHORUS_HOSTNAME'],
    'gen': int(os.environ['CHORUS_ELASTIC_GENERATION']),
    'scope': os.environ['CHORUS_RENDEZVOUS_SCOPE'],
    'elastic': os.environ.get('CHORUS_ELASTIC'),
    'horovod_rank': int(os.environ['HOROVOD_RANK']),
}
line = json.dumps(record, sort_keys=True)
print(line, flush=True)
fd = os.open(os.path.join(d, 'events'), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, (line + '\n').encode())
os.close(fd)

with open(os.path.join(d, 'schedule.json')) as f:
    schedule = json.load(f)
action = schedule.get(f"g{record['gen']}r{record['rank']}", schedule.get('*', 'wait'))
if action.startswith('exit:'):
    time.sleep(0.2)
    sys.exit(int(action[5:]))
if action == 'term':
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    if os.path.exists(os.path.join(d, 'release')):
        sys.exit(0)
    time.sleep(0.05)
sys.exit(9)
