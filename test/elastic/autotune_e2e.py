#!/usr/bin/python3
"""An elastic job with --autotune that grows and shrinks, end to end with real processes.

Workers are autotune_worker.py (chorus's elastic loop around steps of named allreduces). Hosts
are 127.0.0.1 and localhost, both this machine, named by a discovery script that cats a hosts
file the test rewrites:

  generation 0  127.0.0.1:1, localhost:1    2 workers; rank 0 on 127.0.0.1 searches
  generation 1  127.0.0.1:1, localhost:2    3 workers (a new one joins); the same rank 0
  generation 2  localhost:2                 2 workers: 127.0.0.1's worker is gone, a survivor
                                            that never searched becomes rank 0

Each change is made once the current generation's search has ended (its choice is in the log).
Checks: the autotune log holds one whole search per generation (test/support/autotune_log.py),
generation 0's from chorus's defaults and each later one from the previous one's choice (so the
survivor that became rank 0 had it); in each generation every rank switched in the same cycles
to the same parameters, ending with the log's choice; the job ends with status 0.

Usage: autotune_e2e.py --chorusrun PATH. Prints PASS and exits 0 when every check passed;
otherwise prints what failed with the job's output and exits 1. Bounded by its own timeout.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'support'))
import autotune_log  # noqa: E402
from discovery_file import DiscoveryFile  # noqa: E402

WORKER = os.path.join(HERE, 'autotune_worker.py')
TIMEOUT = 180  # seconds, the whole job
WARMUP, SAMPLES, STEPS = 1, 4, 2
DEFAULTS = (134217728, 4194304, 262144, 1.0, '')


class Job:
    def __init__(self, chorusrun):
        self.dir = tempfile.mkdtemp(prefix='elastic_autotune_')
        self.log = self.path('autotune.csv')
        self.discovery = DiscoveryFile(self.dir, '127.0.0.1:1\nlocalhost:1\n')
        script = self.discovery.script
        env = dict(os.environ, ELASTIC_TEST_DIR=self.dir, CHORUS_ELASTIC_DISCOVERY_INTERVAL='0.05')
        self.out = open(self.path('stdout'), 'w')
        self.err = open(self.path('stderr'), 'w')
        self.proc = subprocess.Popen(
            [chorusrun, '-np', '2', '--host-discovery-script', script, '--autotune',
             '--autotune-log-file', self.log, '--autotune-warmup-samples', str(WARMUP),
             '--autotune-steps-per-sample', str(STEPS), '--autotune-bayes-opt-max-samples',
             str(SAMPLES), '--log-level', 'info', sys.executable, WORKER],
            stdout=self.out, stderr=self.err, env=env, stdin=subprocess.DEVNULL)
        self.deadline = time.monotonic() + TIMEOUT

    def path(self, name):
        return os.path.join(self.dir, name)

    def read(self, name):
        try:
            with open(self.path(name)) as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def events(self):
        return [json.loads(l) for l in self.read('events').splitlines() if l.strip()]

    def chose(self, generation):
        """Whether the log holds generation `generation`'s choice."""
        return any(l.startswith(f'{generation},') and ',best,' in l
                   for l in self.read('autotune.csv').splitlines())

    def wait_for(self, what, predicate):
        while not predicate():
            if time.monotonic() > self.deadline:
                raise AssertionError(f'timed out after {TIMEOUT} s waiting for {what}')
            if self.proc.poll() is not None and not predicate():
                raise AssertionError(f'chorusrun ended (status {self.proc.returncode}) before {what}')
            time.sleep(0.05)

    def finish(self):
        try:
            return self.proc.wait(timeout=max(0.1, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise AssertionError(f'chorusrun did not end within {TIMEOUT} s')

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.out.close()
        self.err.close()

    def describe(self):
        return (f'status {self.proc.returncode}\n--- stdout\n{self.read("stdout")}--- stderr\n'
                f'{self.read("stderr")}--- events\n{self.read("events")}--- autotune log\n'
                f'{self.read("autotune.csv")}')


def run(chorusrun):
    job = Job(chorusrun)
    try:
        job.wait_for("generation 0's choice", lambda: job.chose(0))
        job.discovery.write('127.0.0.1:1\nlocalhost:2\n')
        job.wait_for("generation 1's choice", lambda: job.chose(1))
        job.discovery.write('localhost:2\n')
        job.wait_for("generation 2's choice", lambda: job.chose(2))
        open(job.path('release'), 'w').close()
        status = job.finish()
        assert status == 0, f'status {status}'

        worlds = {}
        for e in job.events():
            worlds.setdefault(e['gen'], {})[e['rank']] = e
        assert sorted(worlds) == [0, 1, 2], f'generations formed: {sorted(worlds)}'
        assert [len(worlds[g]) for g in (0, 1, 2)] == [2, 3, 2], worlds
        # Generation 2's rank 0 is a survivor that was not rank 0 before.
        assert worlds[2][0]['pid'] != worlds[1][0]['pid'], worlds
        assert worlds[2][0]['pid'] in [e['pid'] for e in worlds[1].values()], worlds

        records = autotune_log.read_log(job.log)
        assert sorted({r['generation'] for r in records}) == [0, 1, 2], records
        assert [r['generation'] for r in records] == sorted(r['generation'] for r in records), \
            'the log is not in generation order'
        start = DEFAULTS
        chosen = {}
        for g in (0, 1, 2):
            best = autotune_log.check_search(records, g, WARMUP, SAMPLES, start=start)
            chosen[g] = autotune_log.parameters(best)
            start = chosen[g]  # the next generation starts from this choice

        seen = autotune_log.switches(job.read('stderr'))
        for g in (0, 1, 2):
            per_rank = {rank: [s for s in lines if s[0] == g] for rank, lines in seen.items()}
            per_rank = {rank: lines for rank, lines in per_rank.items() if lines}
            assert sorted(per_rank) == list(range(len(worlds[g]))), \
                f'generation {g}: switch lines of ranks {sorted(per_rank)}'
            first = per_rank[0]
            assert len(first) == SAMPLES and first[-1][2], f'generation {g}: {first}'
            for rank, lines in per_rank.items():
                assert lines == first, f'generation {g}: rank {rank} switched {lines}, rank 0 {first}'
            assert first[-1][3] == chosen[g], f'generation {g}: kept {first[-1][3]}, chose {chosen[g]}'
        print(job.read('autotune.csv'), end='')
        print('PASS')
        return 0
    except AssertionError as e:
        print(f'FAIL: {e}\n{job.describe()}')
        return 1
    finally:
        job.close()
        shutil.rmtree(job.dir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chorusrun', required=True)
    return run(parser.parse_args().chorusrun)


if __name__ == '__main__':
    sys.exit(main())
