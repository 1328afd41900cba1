#!/usr/bin/python3
"""How fast an elastic job reacts, measured on real chorusrun jobs of N ranks on this machine.

For each N (hosts `localhost` with N slots, then `127.0.0.1:1` added, then its worker killed):
  (c) host added -> rank 0 sees it: from the moment the hosts file changes to rank 0's
      HostsUpdatedInterrupt (it commits after every step). Includes up to one discovery interval.
  (a) kill -> pending op fails: from SIGKILL of the added worker to the last survivor's
      HorovodInternalError (each survivor is waiting in an allreduce with it).
  (b) abort -> first collective: from that failure (the last survivor's) to the first completed
      allreduce of the next generation on every survivor; (a)+(b) is the whole outage.
  baseline: a fresh start of the same job (chorusrun start -> first completed allreduce on every
      rank), i.e. what restarting the workers at each reset would cost, measured in the same run.
Every time is from one clock (time.time() in each process on this machine).

Usage: scripts/elastic_reset_bench.py [--ranks 2 4 8] [--interval 1] [--chorusrun PATH]
  (PYTHONPATH must reach the chorus package, e.g. build/python.)
Prints one line per N and a table; exit status 1 if a job fails or times out (bounded, 120 s).
The worker mode (--worker) is what chorusrun runs.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JOB_TIMEOUT = 120  # seconds, per job


def log(d, **event):
    event['time'] = time.time()
    fd = os.open(os.path.join(d, 'events'), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (json.dumps(event) + '\n').encode())
    os.close(fd)


def worker():
    import numpy as np

    import chorus.numpy as hvd
    from chorus.elastic import ObjectState, run_fn
    from chorus.elastic.reset import reset
    from chorus.exceptions import HorovodInternalError, HostsUpdatedInterrupt

    d = os.environ['BENCH_DIR']

    def train(state):
        gen = int(os.environ['CHORUS_ELASTIC_GENERATION'])
        log(d, kind='formed', gen=gen, rank=hvd.rank(), size=hvd.size(), pid=os.getpid(),
            host=os.environ['CHORUS_HOSTNAME'])
        first = True
        while not os.path.exists(os.path.join(d, 'release')):
            try:
                hvd.allreduce(np.ones(16, dtype=np.float32), name='step')
                if first:
                    log(d, kind='first_op', gen=gen, rank=hvd.rank())
                    first = False
                state.step += 1
                state.commit()
            except HorovodInternalError:
                log(d, kind='failed', gen=gen, rank=hvd.rank())
                raise
            except HostsUpdatedInterrupt:
                log(d, kind='interrupt', gen=gen, rank=hvd.rank())
                raise
            time.sleep(0.005)

    hvd.init()
    run_fn(train, reset)(ObjectState(hvd.broadcast_object, hvd.rank, step=0))


class Job:
    def __init__(self, chorusrun, n, interval):
        self.dir = tempfile.mkdtemp(prefix='elastic_bench_')
        self.write_hosts(f'localhost:{n}\n')
        script = os.path.join(self.dir, 'discover.sh')
        with open(script, 'w') as f:
            f.write(f'#!/bin/sh\ncat {self.dir}/hosts\n')
        os.chmod(script, 0o755)
        env = dict(os.environ, BENCH_DIR=self.dir,
                   CHORUS_ELASTIC_DISCOVERY_INTERVAL=str(interval))
        self.err = open(os.path.join(self.dir, 'stderr'), 'w')
        self.started = time.time()
        self.proc = subprocess.Popen(
            [chorusrun, '-np', str(n), '--min-np', '1', '--host-discovery-script', script,
             sys.executable, os.path.abspath(__file__), '--worker'],
            stdout=subprocess.DEVNULL, stderr=self.err, stdin=subprocess.DEVNULL, env=env)
        self.deadline = time.monotonic() + JOB_TIMEOUT

    def write_hosts(self, text):
        tmp = os.path.join(self.dir, 'hosts.tmp')
        with open(tmp, 'w') as f:
            f.write(text)
        os.replace(tmp, os.path.join(self.dir, 'hosts'))

    def events(self, **match):
        try:
            with open(os.path.join(self.dir, 'events')) as f:
                evs = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []
        return [e for e in evs if all(e.get(k) == v for k, v in match.items())]

    def wait(self, what, predicate):
        while not predicate():
            if time.monotonic() > self.deadline or self.proc.poll() is not None:
                with open(os.path.join(self.dir, 'stderr')) as f:
                    raise RuntimeError(f'job ended or timed out waiting for {what}:\n{f.read()}')
            time.sleep(0.01)

    def close(self):
        open(os.path.join(self.dir, 'release'), 'w').close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def measure(chorusrun, n, interval):
    job = Job(chorusrun, n, interval)
    try:
        job.wait('generation 0', lambda: len(job.events(kind='first_op', gen=0)) == n)
        baseline = max(e['time'] for e in job.events(kind='first_op', gen=0)) - job.started

        added = time.time()
        job.write_hosts(f'localhost:{n}\n127.0.0.1:1\n')
        job.wait('the interrupt on rank 0', lambda: job.events(kind='interrupt', rank=0))
        seen = job.events(kind='interrupt', rank=0)[0]['time'] - added
        job.wait('generation 1', lambda: len(job.events(kind='first_op', gen=1)) == n + 1)

        victim = [e for e in job.events(kind='formed', gen=1) if e['host'] == '127.0.0.1'][0]
        killed = time.time()
        os.kill(victim['pid'], signal.SIGKILL)
        job.wait('the survivors to fail', lambda: len(job.events(kind='failed', gen=1)) == n)
        failed = max(e['time'] for e in job.events(kind='failed', gen=1))
        job.wait('generation 2', lambda: len(job.events(kind='first_op', gen=2)) == n)
        recovered = max(e['time'] for e in job.events(kind='first_op', gen=2))
        return {'ranks': n, 'add_seen_s': seen, 'kill_to_fail_s': failed - killed,
                'abort_to_first_op_s': recovered - failed, 'outage_s': recovered - killed,
                'fresh_start_s': baseline}
    finally:
        job.close()


def main():
    if '--worker' in sys.argv:
        return worker()
    parser = argparse.ArgumentParser()
    parser.add_argument('--ranks', type=int, nargs='+', default=[2, 4, 8])
    parser.add_argument('--interval', type=float, default=1.0,
                        help='CHORUS_ELASTIC_DISCOVERY_INTERVAL, seconds')
    parser.add_argument('--chorusrun',
                        default=os.path.join(HERE, '..', 'build', 'launcher', 'chorusrun'))
    args = parser.parse_args()
    rows = []
    for n in args.ranks:
        row = measure(args.chorusrun, n, args.interval)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(f'\ndiscovery interval {args.interval} s; times in seconds')
    print('ranks  (c) add seen  (a) kill->fail  (b) abort->1st op  outage  fresh start  '
          'outage/fresh')
    for r in rows:
        print(f"{r['ranks']:5d}  {r['add_seen_s']:12.3f}  {r['kill_to_fail_s']:14.3f}  "
              f"{r['abort_to_first_op_s']:17.3f}  {r['outage_s']:6.3f}  "
              f"{r['fresh_start_s']:11.3f}  {r['outage_s'] / r['fresh_start_s']:12.2f}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
