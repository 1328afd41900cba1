#!/usr/bin/python3
"""Hierarchical allreduce and allgather through chorusrun --gloo, real processes on this
machine, with the hosts chorusrun numbers: localhost, 127.0.0.1 and this machine's hostname are
three names of one machine, so -H localhost:2,127.0.0.1:2 is two hosts of two ranks as far as
the local and cross numbers go (the traffic between real hosts is test/cluster's).

Each layout runs test/support/hierarchical_job.py with --hierarchical-allreduce
--hierarchical-allgather, and checks its results against the exact ones (hierarchical_job.check:
integers, min, max and allgathers bit for bit, floating-point sums, averages and products within
the summation-order bound); on the 2x2 layout a small job without the flags must say nothing of
a hierarchy:

  2x2        -np 4 -H localhost:2,127.0.0.1:2             rank 0 says "hierarchical over 2 hosts
  3x2        -np 6 -H localhost:2,127.0.0.1:2,HOSTNAME:2   x 2 ranks" (3 x 2), once
  fallback   -np 3 -H localhost:2,127.0.0.1:1             one warning, on rank 0, naming the
                                                           variables and the hosts' rank counts

CHORUS_PIPELINE_CHUNK_BYTES=65536 makes the larger tensors run in many pieces.
Usage: hierarchical_e2e.py --chorusrun PATH [CASE...]. One line per check; exit 0 when all pass.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'support'))
import hierarchical_job  # noqa: E402

JOB = os.path.join(HERE, '..', 'support', 'hierarchical_job.py')
CASES = {
    '2x2': (4, 'localhost:2,127.0.0.1:2'),
    '3x2': (6, 'localhost:2,127.0.0.1:2,{hostname}:2'),
    'fallback': (3, 'localhost:2,127.0.0.1:1'),
}
failures = []


def check(what, ok, detail=''):
    print(('PASS ' if ok else 'FAIL ') + what, flush=True)
    if not ok:
        failures.append(what)
        print(detail, flush=True)


def run_job(chorusrun, np, hosts, out_dir, hierarchical):
    flags = ['--hierarchical-allreduce', '--hierarchical-allgather'] if hierarchical else []
    env = dict(os.environ, CHORUS_PIPELINE_CHUNK_BYTES='65536')
    p = subprocess.run([chorusrun, '-np', str(np), '-H', hosts, '--gloo'] + flags +
                       ['--log-level', 'info', '/usr/bin/python3', JOB, 'run', out_dir],
                       capture_output=True, text=True, timeout=400, env=env,
                       stdin=subprocess.DEVNULL)
    return p


def run_flat(chorusrun, np, hosts):
    """A job on `hosts` without the hierarchical flags: init, one allreduce, checked."""
    job = ('import numpy, chorus.numpy as hvd; hvd.init(); '
           'assert hvd.allreduce(numpy.ones(3), op=hvd.Sum).tolist() == [hvd.size()] * 3; '
           'hvd.shutdown()')
    return subprocess.run([chorusrun, '-np', str(np), '-H', hosts, '--gloo', '--log-level', 'info',
                           '/usr/bin/python3', '-c', job], capture_output=True, text=True,
                          timeout=400, stdin=subprocess.DEVNULL)


def describe(p):
    return f'status {p.returncode}\n--- stdout\n{p.stdout[-4000:]}--- stderr\n{p.stderr[-4000:]}'


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chorusrun', required=True)
    parser.add_argument('cases', nargs='*', default=list(CASES))
    args = parser.parse_args()
    hostname = socket.gethostname()
    for case in args.cases:
        np, hosts = CASES[case]
        hosts = hosts.format(hostname=hostname)
        if case == '2x2':
            # The same layout without the flags (a small job: init and one allreduce) says
            # nothing of a hierarchy.
            flat = run_flat(args.chorusrun, np, hosts)
            check(f'{case}: the flat job runs', flat.returncode == 0, describe(flat))
            check(f'{case}: no warning or rank line in the flat job',
                  flat.returncode == 0 and 'hierarchical' not in flat.stderr, describe(flat))
        with tempfile.TemporaryDirectory() as hier_dir:
            hier = run_job(args.chorusrun, np, hosts, hier_dir, True)
            check(f'{case}: the hierarchical job runs', hier.returncode == 0, describe(hier))
            if hier.returncode != 0:
                continue
            said = [l for l in hier.stderr.splitlines() if 'hierarchical over' in l]
            warned = [l for l in hier.stderr.splitlines() if 'cannot run hierarchically' in l]
            if case == 'fallback':
                check(f'{case}: one warning, on rank 0, naming the variables and the layout',
                      not said and len(warned) == 1 and '[chorus 0/0 WARNING' in warned[0] and
                      'CHORUS_HIERARCHICAL_ALLREDUCE and CHORUS_HIERARCHICAL_ALLGATHER are set, '
                      'but process set 0 cannot run hierarchically: its 2 hosts run 2, 1 of its '
                      '3 ranks; that needs the same number of ranks on every host. Its '
                      'collectives run flat' in warned[0], describe(hier))
            else:
                shape = f'{len(hosts.split(","))} hosts x 2 ranks'
                check(f'{case}: rank 0 says it runs hierarchically over {shape}, once',
                      not warned and len(said) == 1 and '[chorus 0/0 INFO' in said[0] and
                      f'hierarchical over {shape}' in said[0], describe(hier))
            problems = hierarchical_job.check(hier_dir, np)
            check(f'{case}: the hierarchical results are the exact ones (integers, min, max, '
                  'allgathers bit for bit; floats within the summation-order bound)',
                  not problems, '\n'.join(problems[:20]))
    print(f'{len(failures)} failed' if failures else 'all passed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
