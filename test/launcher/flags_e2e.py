#!/usr/bin/python3
"""chorusrun's library flags end to end, with real chorus workers in both modes: each flag
chorusrun accepts does what it says, and the ones chorus cannot honour are refused.

  --thread-affinity 1,0     each local rank's background thread ("chorus-loop") is pinned to
                            its core, read back from /proc
  --log-with-timestamp      chorus's log lines start with the local time
  HOROVOD_/CHORUS_ variables chorus does not read: one warning at init, on rank 0 only
  --autotune --autotune-log-file F: accepted; rank 0 starts F (its header) at init (the search
                            itself: test/python/check_autotune.py)
  --hierarchical-allreduce/-allgather  reach every worker (both modes); on two (faked) hosts of
                            2 ranks each (--gloo -H localhost:2,127.0.0.1:2) rank 0 says it runs
                            them hierarchically
  --mpi-threads-disable: exit 2, one line with the reason

Usage: flags_e2e.py --chorusrun PATH. Prints one line per check; exit 0 when all pass.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# Each rank prints the cores its background thread may run on.
REPORT = r'''
import os, time, numpy, chorus.numpy as hvd
hvd.init()

def loop_thread_cores():
    names = []
    for tid in os.listdir('/proc/self/task'):
        try:  # a thread may end between the listing and the reading
            with open(f'/proc/self/task/{tid}/comm') as f:
                name = f.read().strip()
            names.append(name)
            if name != 'chorus-loop':
                continue
            with open(f'/proc/self/task/{tid}/status') as f:
                return next(l.split(':')[1].strip() for l in f
                            if l.startswith('Cpus_allowed_list:')), names
        except (FileNotFoundError, ProcessLookupError):
            continue
    return None, names

# The loop thread is named and pinned before init returns. Every rank scans before any rank
# shuts down (a shutdown on one rank ends the loop on all: a rank that scanned late once found
# its loop thread gone); a scan that misses it is repeated for a while, and the names seen are
# printed if it never shows.
deadline = time.monotonic() + 10
cores, names = loop_thread_cores()
while cores is None and time.monotonic() < deadline:
    time.sleep(0.1)
    cores, names = loop_thread_cores()
print(f'AFFINITY {hvd.rank()} {cores}', flush=True)
if cores is None:
    print(f'THREADS {hvd.rank()} {names}', flush=True)
hvd.allreduce(numpy.zeros(1), name='scanned')
hvd.shutdown()
'''
INIT = 'import chorus.numpy as hvd; hvd.init(); hvd.shutdown()'
TIMESTAMPED = re.compile(r'^(\[\d+\]<stderr>:)?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[chorus ',
                         re.M)

failures = []


def check(what, ok, detail=''):
    print(('PASS ' if ok else 'FAIL ') + what)
    if not ok:
        failures.append(what)
        print(detail)


def run(chorusrun, args, env=None):
    # The caller's CHORUS_*/HOROVOD_* variables (CHORUS_SKIP_SANITIZERS from scripts/test.sh, say)
    # stay out: the jobs see only what each check sets.
    e = {k: v for k, v in os.environ.items() if not k.startswith(('CHORUS_', 'HOROVOD_'))}
    e.update(OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
    e.update(env or {})
    return subprocess.run([chorusrun] + args, capture_output=True, text=True, timeout=240, env=e,
                          stdin=subprocess.DEVNULL)


def describe(p):
    return f'status {p.returncode}\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}'


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chorusrun', required=True)
    c = parser.parse_args().chorusrun

    for mode in ([], ['--gloo']):
        name = 'MPI-less' if mode else 'MPI'
        # CHORUS_PRINT_CONFIG: rank 0 logs its configuration at init (log level info).
        p = run(c, ['-np', '2'] + mode + ['--thread-affinity', '1,0', '--log-with-timestamp',
                                          '--log-level', 'info', '/usr/bin/python3', '-c', REPORT],
                env={'CHORUS_PRINT_CONFIG': '1'})
        cores = dict(re.findall(r'AFFINITY (\d) (\S+)', p.stdout))
        check(f'{name}: --thread-affinity 1,0 pins rank 0\'s background thread to core 1 and '
              'rank 1\'s to core 0', p.returncode == 0 and cores == {'0': '1', '1': '0'},
              describe(p))
        check(f'{name}: --log-with-timestamp puts the local time before chorus\'s log lines',
              TIMESTAMPED.search(p.stderr) is not None, describe(p))
        p = run(c, ['-np', '2'] + mode + ['--log-level', 'info', '/usr/bin/python3', '-c', REPORT],
                env={'CHORUS_PRINT_CONFIG': '1'})
        check(f'{name}: without it, no time', p.returncode == 0 and '[chorus ' in p.stderr and
              TIMESTAMPED.search(p.stderr) is None, describe(p))

        p = run(c, ['-np', '2'] + mode + ['/usr/bin/python3', '-c', REPORT],
                env={'HOROVOD_BATCH_D2D_MEMCOPIES': '1', 'CHORUS_FUSION_TRESHOLD': '64'})
        warnings = [l for l in p.stderr.splitlines() if 'chorus does not support, and ignores' in l]
        check(f'{name}: variables chorus does not read: one warning, on rank 0, naming them',
              p.returncode == 0 and len(warnings) == 1 and
              'CHORUS_FUSION_TRESHOLD, HOROVOD_BATCH_D2D_MEMCOPIES' in warnings[0] and
              re.search(r'\[chorus 0/0 WARNING', warnings[0]) is not None, describe(p))

        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, 'at.csv')
            p = run(c, ['-np', '2'] + mode + ['--autotune', '--autotune-log-file', log,
                                              '--autotune-warmup-samples', '1',
                                              '/usr/bin/python3', '-c', INIT])
            header = open(log).read() if os.path.exists(log) else None
            check(f'{name}: --autotune --autotune-log-file: accepted, rank 0 starts the log',
                  p.returncode == 0 and header is not None and header.startswith(
                      'generation,sample,phase,fusion_threshold_bytes,') and
                  header.count('\n') == 1, describe(p) + f'--- {log}\n{header}')

        p = run(c, ['-np', '2'] + mode + ['--hierarchical-allreduce', '--hierarchical-allgather',
                                          '--log-level', 'info', '/usr/bin/python3', '-c', REPORT],
                env={'CHORUS_PRINT_CONFIG': '1'})
        check(f'{name}: --hierarchical-allreduce and --hierarchical-allgather reach the workers',
              p.returncode == 0 and 'config CHORUS_HIERARCHICAL_ALLREDUCE=true' in p.stderr and
              'config CHORUS_HIERARCHICAL_ALLGATHER=true' in p.stderr, describe(p))

    # Two hosts as chorusrun numbers them (localhost and 127.0.0.1 are both this machine).
    p = run(c, ['-np', '4', '-H', 'localhost:2,127.0.0.1:2', '--gloo', '--hierarchical-allreduce',
                '--log-level', 'info', '/usr/bin/python3', '-c', REPORT])
    said = [l for l in p.stderr.splitlines() if 'hierarchical over 2 hosts x 2 ranks' in l]
    check('--gloo on 2 hosts x 2 ranks: rank 0 says the allreduce runs hierarchically, once',
          p.returncode == 0 and len(said) == 1 and '[chorus 0/0 INFO' in said[0], describe(p))

    for flag, reason in (('--mpi-threads-disable', 'needs MPI_THREAD_MULTIPLE'),):
        p = run(c, ['-np', '2', flag, 'true'])
        lines = p.stderr.splitlines()
        check(f'{flag} is refused: exit 2, one line with the reason',
              p.returncode == 2 and len(lines) == 1 and lines[0].startswith('chorusrun: error: ')
              and flag in lines[0] and reason in lines[0] and p.stdout == '', describe(p))

    print(f'{len(failures)} failed' if failures else 'all passed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
