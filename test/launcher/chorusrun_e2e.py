#!/usr/bin/python3
"""End-to-end tests of chorusrun: real MPI jobs (1 to 3 ranks on this host) and bad input.

Usage: chorusrun_e2e.py --chorusrun PATH [--bench PATH_TO_chorus_bench]
Exits 0 when every case passes; prints one line per case.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile

from e2e_environment import BIG, DUMP_ENV, FORWARDED, NOT_FORWARDED, read_env_dump
from e2e_report import check, describe, summary



def run(chorusrun, args, **kwargs):
    return subprocess.run([chorusrun] + args, capture_output=True, text=True, **kwargs)




def ranks_echo(c, np, extra=()):
    p = run(c, ['-np', str(np)] + list(extra) +
            ['/bin/sh', '-c', 'echo rank=$OMPI_COMM_WORLD_RANK size=$OMPI_COMM_WORLD_SIZE'])
    expected = {f'[{r}]<stdout>:rank={r} size={np}' for r in range(np)}
    return p, expected


def test_jobs(c):
    for np in (1, 2, 3):
        p, expected = ranks_echo(c, np)
        lines = set(p.stdout.splitlines())
        check(f'{np}-rank job prints [rank]<stdout>: lines',
              p.returncode == 0 and lines == expected,
              describe(p))

    p = run(c, ['-np', '2', '/bin/sh', '-c', 'echo to-err-$OMPI_COMM_WORLD_RANK >&2'])
    check('worker stderr comes back tagged on stderr',
          p.returncode == 0 and p.stdout == '' and
          set(p.stderr.splitlines()) == {'[0]<stderr>:to-err-0', '[1]<stderr>:to-err-1'},
          describe(p))

    p, expected = ranks_echo(c, 3, ['-H', 'localhost:2,127.0.0.1:1'])
    check('-H localhost:2,127.0.0.1:1 runs 3 ranks',
          p.returncode == 0 and set(p.stdout.splitlines()) == expected, describe(p))

    with tempfile.NamedTemporaryFile('w', suffix='.hosts', delete=False) as f:
        f.write('# two local names\nlocalhost slots=2\n\n127.0.0.1 slots=1  # loopback\n')
        hostfile = f.name
    p, expected = ranks_echo(c, 3, ['--hostfile', hostfile])
    check('--hostfile runs 3 ranks', p.returncode == 0 and set(p.stdout.splitlines()) == expected,
          describe(p))
    p = run(c, ['-np', '4', '--hostfile', hostfile, 'true'])
    check('-np above the hostfile slots is exit 2',
          p.returncode == 2 and '-np 4 is more than the 3 slots of --hostfile' in p.stderr,
          describe(p))
    os.unlink(hostfile)

    p = run(c, ['-np', '2', '--fusion-threshold-mb', '64', '--cycle-time-ms', '2.5',
                '--cache-capacity', '0', '--no-stall-check', '--stall-check-warning-time-seconds',
                '7', '--log-level', 'INFO', '/bin/sh', '-c',
                'echo $CHORUS_FUSION_THRESHOLD $CHORUS_CYCLE_TIME_MS $CHORUS_CACHE_CAPACITY '
                '$CHORUS_STALL_CHECK_DISABLE $CHORUS_STALL_CHECK_TIME_SECONDS $CHORUS_LOG_LEVEL'])
    want = {f'[{r}]<stdout>:67108864 2.5 0 1 7 info' for r in range(2)}
    check('tuning flags reach every worker as CHORUS_* variables',
          p.returncode == 0 and set(p.stdout.splitlines()) == want, describe(p))

    with tempfile.NamedTemporaryFile('w', suffix='.yaml', delete=False) as f:
        f.write('params:\n  fusion_threshold_mb: 16\n  cache_capacity: 64\n'
                'stall_check:\n  enabled: false\n')
        config = f.name
    p = run(c, ['-np', '2', '--config-file', config, '--cache-capacity', '8', '/bin/sh', '-c',
                'echo $CHORUS_FUSION_THRESHOLD $CHORUS_CACHE_CAPACITY $CHORUS_STALL_CHECK_DISABLE'])
    os.unlink(config)
    want = {f'[{r}]<stdout>:16777216 8 1' for r in range(2)}
    check('--config-file values reach the workers; flags win over them',
          p.returncode == 0 and set(p.stdout.splitlines()) == want, describe(p))

    p = run(c, ['-np', '2', '--verbose', 'true'])
    first = p.stdout.splitlines()[0] if p.stdout else ''
    root = ['--allow-run-as-root'] if os.geteuid() == 0 else []
    words = first.split(' ')
    check('--verbose prints the mpirun command',
          p.returncode == 0 and words[:1] == ['mpirun'] and
          words[1:8 + len(root)] == root + ['--tag-output', '-np', '2', '-H', 'localhost:2',
                                            '-bind-to', 'none'] and
          '-x PATH' in first and words[-1] == 'true', describe(p))

    p = run(c, ['-np', '1', '--prefix-output-with-timestamp', '/bin/echo', 'hi'])
    line = p.stdout.strip()
    check('--prefix-output-with-timestamp keeps the tag after the timestamp',
          p.returncode == 0 and line.endswith('[0]<stdout>:hi') and not line.startswith('['),
          describe(p))

    with tempfile.TemporaryDirectory() as out_dir:
        p = run(c, ['-np', '2', '--output-filename', out_dir, '/bin/sh', '-c',
                    'echo file-$OMPI_COMM_WORLD_RANK'])
        found = []
        for root, _, files in os.walk(out_dir):
            for name in files:
                with open(os.path.join(root, name)) as f:
                    found.append(f.read())
        text = ''.join(found)
        check('--output-filename writes each rank\'s output under the directory',
              p.returncode == 0 and 'file-0' in text and 'file-1' in text, describe(p) + text)


def test_failures(c):
    # Open MPI 4.1 prints the report naming the failed rank only when it wins a race with the
    # other ranks' ends, so either summary is right; both are checked exactly.
    prefix = 'chorusrun: job failed (mpirun exit status 1): '
    summaries = {prefix + 'rank 1 exited with code 1',
                 prefix + '1 process returned a non-zero exit code (mpirun did not name the rank)'}
    for np, rest in ((2, 'exec sleep 600'), (3, 'exit 0')):
        p = run(c, ['-np', str(np), '/bin/sh', '-c',
                    '[ $OMPI_COMM_WORLD_RANK = 1 ] && exit 1; ' + rest])
        last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''
        check(f'{np}-rank job: a worker exiting 1 fails the job with a one-line summary',
              p.returncode == 1 and last in summaries, describe(p))
        print(f'     (summary: {last[len(prefix):]})')

    p = run(c, ['-np', '2', '/bin/sh', '-c',
                '[ $OMPI_COMM_WORLD_RANK = 1 ] && kill -9 $$; exec sleep 600'])
    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''
    prefix = 'chorusrun: job failed (mpirun exit status 137): '
    summaries = {prefix + 'rank 1 with PID 0 on node ' + os.uname().nodename +
                 ' exited on signal 9 (Killed)',
                 prefix + '1 process returned a non-zero exit code (mpirun did not name the rank)'}
    check('a worker killed by a signal fails the job with a one-line summary',
          p.returncode == 137 and last in summaries, describe(p))
    print(f'     (summary: {last[len(prefix):]})')

    # A signal to chorusrun reaches mpirun, which ends the job; no sleeping: wait for both ranks.
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen([c, '-np', '2', '/bin/sh', '-c', 'echo ready; exec sleep 600'],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = 0
        while ready < 2:
            line = proc.stdout.readline()
            if not line:
                break
            ready += line.strip().endswith('<stdout>:ready')
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        last = err.strip().splitlines()[-1] if err.strip() else ''
        check(f'{sig.name} is forwarded to mpirun and the job stops with 128 + {int(sig)}, '
              'as in --gloo mode',
              ready == 2 and proc.returncode == 128 + sig and
              last == f'chorusrun: job stopped: chorusrun received signal {int(sig)} '
                      f'({signal.strsignal(sig)})',
              f'rc={proc.returncode} ready={ready}\n{err}')
        print(f'     ({sig.name}: chorusrun exit status {proc.returncode})')


# A stand-in for the ssh mpirun starts its daemon (orted) with on another host: it runs the
# command here, in a login environment of its own, as sshd would, so that the rank it starts sees
# only what mpirun sent it.
FAKE_RSH = r'''#!/usr/bin/python3
import os, pwd, sys
args = sys.argv[1:]
with open(os.environ['FAKE_RSH_LOG'], 'a') as f:
    f.write(repr(args) + '\n')
i = 0
while i < len(args) and args[i].startswith('-'):
    i += 2 if args[i] in ('-o', '-p', '-i', '-l') else 1
user = pwd.getpwuid(os.getuid())
login = {'PATH': '/usr/local/bin:/usr/bin:/bin', 'HOME': user.pw_dir, 'USER': user.pw_name,
         'LOGNAME': user.pw_name, 'SHELL': '/bin/sh',
         'SSH_CONNECTION': '127.0.0.1 40000 127.0.0.1 22', 'SSH_CLIENT': '127.0.0.1 40000 22'}
os.execve('/bin/sh', ['/bin/sh', '-c', ' '.join(args[i + 1:])], login)
'''


def test_remote_environment(c):
    """MPI mode: chorusrun's environment reaches a rank on another host (mpirun's -x), intact,
    minus the documented exclusions; no value is on a command line."""
    with tempfile.TemporaryDirectory() as tmp:
        rsh = os.path.join(tmp, 'ssh')
        with open(rsh, 'w') as f:
            f.write(FAKE_RSH)
        os.chmod(rsh, 0o755)
        log = os.path.join(tmp, 'rsh.log')
        forwarded = dict(FORWARDED, **{'my.var': NOT_FORWARDED['my.var']})
        not_forwarded = {k: v for k, v in NOT_FORWARDED.items() if k != 'my.var'}
        env = dict(os.environ, **forwarded, **not_forwarded, ENV_DUMP_DIR=tmp,
                   OMPI_MCA_plm_rsh_agent=rsh, FAKE_RSH_LOG=log)
        p = run(c, ['-np', '2', '-H', 'localhost:1,fakehost:1', '--verbose', '/usr/bin/python3',
                    '-c', DUMP_ENV], env=env)
        local, remote = (read_env_dump(os.path.join(tmp, f'env.{r}')) for r in (0, 1))
        rsh_calls = ''
        if os.path.exists(log):
            with open(log) as f:
                rsh_calls = f.read()
        mpirun_line = p.stdout.splitlines()[0] if p.stdout else ''
        wrong = {k: remote.get(k) for k, v in forwarded.items() if remote.get(k) != v}
        check(f'MPI mode: {len(forwarded)} variables (quotes, newlines, =, non-ASCII, 0xff, a name '
              'no shell can export) reach a rank on another host intact',
              p.returncode == 0 and 'OMPI_COMM_WORLD_RANK' in remote and not wrong,
              describe(p)[:3000] + f'\nwrong: {repr(wrong)[:2000]}')
        leaked = {k: remote.get(k) for k, v in not_forwarded.items() if remote.get(k) == v}
        check('MPI mode: the excluded variables do not travel (the remote keeps its own '
              'SSH_CONNECTION); the local rank inherits everything',
              p.returncode == 0 and not leaked and
              remote.get('SSH_CONNECTION') == '127.0.0.1 40000 127.0.0.1 22' and
              all(local.get(k) == v for k, v in dict(forwarded, **not_forwarded).items()
                  if k not in ('_', 'PWD')),
              repr(leaked) + repr(remote.get('SSH_CONNECTION')))
        check('MPI mode: the values are on no command line (mpirun\'s, its daemon\'s ssh)',
              p.returncode == 0 and '-x MYVAR' in mpirun_line and '-x SSH_AUTH_SOCK' not in
              mpirun_line and 'orted' in rsh_calls and
              not any(x in mpirun_line + rsh_calls for x in ('second line', 'dotted', BIG['BIG_007'])),
              mpirun_line[:2000] + '\n' + rsh_calls[:2000])


BAD_INPUT = [
    (['-np', '2'], 'no command given'),
    (['/bin/true'], '-np/--num-proc is required'),
    (['-np', '0', 'true'], '-np=0 is out of range'),
    (['-np', 'two', 'true'], 'num-proc'),
    (['-np', '2', '--bogus-flag', 'true'], "unrecognized argument '--bogus-flag'"),
    (['-np', '2', '-H', 'localhost', 'true'], "malformed host 'localhost'"),
    (['-np', '2', '-H', 'localhost:0', 'true'], "malformed host 'localhost:0'"),
    (['-np', '2', '-H', 'a:1,,b:1', 'true'], 'malformed host'),
    (['-np', '3', '-H', 'localhost:2', 'true'], '-np 3 is more than the 2 slots of -H localhost:2'),
    (['-np', '2', '--hostfile', '/nonexistent/hosts', 'true'],
     "cannot read hostfile '/nonexistent/hosts'"),
    (['-np', '2', 'no_such_command_xyz'], "command 'no_such_command_xyz' not found in PATH"),
    (['-np', '2', '/nonexistent/prog'], "command '/nonexistent/prog' does not exist"),
    (['-np', '2', '--fusion-threshold-mb', '-1', 'true'],
     '--fusion-threshold-mb=-1 is out of range'),
    (['-np', '2', '--cycle-time-ms', '0', 'true'], '--cycle-time-ms=0 is out of range'),
    (['-np', '2', '--cache-capacity', '-3', 'true'], '--cache-capacity=-3 is out of range'),
    (['-np', '2', '--ssh-port', '0', 'true'], '--ssh-port=0 is out of range'),
    (['-np', '2', '--log-level', 'chatty', 'true'], '--log-level=chatty is not one of'),
    (['-np', '2', '--mpi-args', "-mca 'x", 'true'], '--mpi-args: unterminated'),
    (['-np', '2', '--config-file', '/nonexistent.yaml', 'true'],
     "cannot read --config-file '/nonexistent.yaml'"),
    (['-np', '2', '--gloo', '--binding-args', '-bind-to core', 'true'],
     '--binding-args is for mpirun and has no effect with --gloo'),
    (['-np', '2', '--min-np', '3', 'true'], '--min-np=3 is larger than -np=2'),
    (['-np', '2', '--mpi', '--host-discovery-script', '/bin/true', 'true'],
     'Open MPI 4.1 cannot resize a world'),
    (['-np', '2', '--blacklist-cooldown-range', '5', '1', 'true'], 'MIN is larger than MAX'),
]


def test_bad_input(c):
    for args, expected in BAD_INPUT:
        p = run(c, args)
        lines = p.stderr.splitlines()
        ok = (p.returncode == 2 and p.stdout == '' and len(lines) == 1 and
              lines[0].startswith('chorusrun: error: ') and expected in lines[0])
        check('bad input exits 2: ' + ' '.join(args), ok, describe(p))


def test_slurm_hosts(c):
    # Inside a Slurm allocation with no -H, the hosts (and their slots) come from Slurm.
    env = dict(os.environ, SLURM_JOB_NODELIST='localhost', SLURM_TASKS_PER_NODE='1',
               SLURM_NTASKS='1')
    p = run(c, ['-np', '2', '/bin/true'], env=env)
    check('MPI mode takes its hosts from a Slurm allocation',
          p.returncode == 2 and 'Slurm' in p.stderr and '1 slots' in p.stderr, describe(p))
    p = run(c, ['--verbose', '-np', '1', '/bin/true'], env=env)
    check('MPI mode passes the Slurm hosts to mpirun',
          p.returncode == 0 and '-H localhost:1' in p.stdout, describe(p))


def test_info(c, pytorch_built, cuda_built):
    p = run(c, ['-cb'])
    pytorch_line = '    [X] PyTorch' if pytorch_built else '    [ ] PyTorch'
    cuda_line = '    [X] CUDA' if cuda_built else '    [ ] CUDA'
    check('-cb prints the build in horovodrun\'s layout',
          p.returncode == 0 and
          'Available Controllers:\n    [X] MPI\n    [X] UCX\n    [X] Gloo' in p.stdout
          and pytorch_line in p.stdout and cuda_line.replace('CUDA', 'NCCL') in p.stdout and
          'Available Devices:\n' + cuda_line in p.stdout, describe(p))
    p = run(c, ['-v'])
    check('-v prints the version', p.returncode == 0 and p.stdout.strip() != '', describe(p))
    p = run(c, ['--help'])
    check('--help lists the flags', p.returncode == 0 and '--fusion-threshold-mb' in p.stdout,
          describe(p))


def test_bench(c, bench):
    for np in (2, 3):
        p = run(c, ['-np', str(np), bench, 'steps', '--tensor-set', 'tiny1000', '--steps', '3',
                    '--warmup', '1'])
        check(f'chorus_bench steps on {np} ranks',
              p.returncode == 0 and
              '[0]<stdout>:# verified: every configuration computed the expected result' in p.stdout
              and f'{np} ranks' in p.stdout, describe(p))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chorusrun', required=True)
    parser.add_argument('--bench')
    parser.add_argument('--pytorch-built', type=int, default=0,
                        help='1 when this build includes the chorus.torch package')
    parser.add_argument('--cuda-built', type=int, default=0,
                        help='1 when this build has the GPU data plane (CUDA, NCCL)')
    args = parser.parse_args()
    c = os.path.abspath(args.chorusrun)
    test_info(c, args.pytorch_built == 1, args.cuda_built == 1)
    test_bad_input(c)
    test_slurm_hosts(c)
    test_jobs(c)
    test_failures(c)
    test_remote_environment(c)
    if args.bench:
        test_bench(c, os.path.abspath(args.bench))
    return summary()


if __name__ == '__main__':
    sys.exit(main())
