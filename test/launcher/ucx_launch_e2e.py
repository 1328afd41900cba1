#!/usr/bin/python3
"""End-to-end tests of chorusrun --gloo (the MPI-less UCX launch; the flag is horovodrun's name,
no Gloo is involved): real worker processes on this host.

The workers are small shell commands (no chorus runtime): they print what chorusrun put in their
environment, fail, get killed, or sleep until stopped. Hosts other than this machine are reached
through a stand-in `ssh` (written to a temporary directory put first in PATH) that runs the
remote command here in a session of its own and in a login environment of its own, as sshd
would; the unreachable-host case uses the real ssh.

Usage: ucx_launch_e2e.py --chorusrun PATH
Exits 0 when every case passes; prints one line per case.
"""
import argparse
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

from e2e_environment import BIG, DUMP_ENV, FORWARDED, NOT_FORWARDED, read_env_dump
from e2e_report import check, describe, summary

SLEEP = 'exec sleep 600'  # a worker that only ends when it is stopped

FAKE_SSH = r'''#!/usr/bin/python3
import os, pwd, sys
args = sys.argv[1:]
with open(os.environ['FAKE_SSH_LOG'], 'a') as f:
    f.write(repr(args) + '\n')
i = 0
while i < len(args) and args[i].startswith('-'):
    i += 2 if args[i] in ('-o', '-p', '-i') else 1
host, command = args[i], ' '.join(args[i + 1:])
if host.startswith('hang'):
    signal_pipe = os.pipe()
    os.read(signal_pipe[0], 1)  # never answers
if command == 'true':
    sys.exit(0)
pid = os.fork()
if pid == 0:
    os.setsid()  # a remote session: out of chorusrun's process group
    shell = os.environ.get('FAKE_SSH_SHELL', '/bin/sh')
    # As sshd: the login shell gets the remote host's own environment, not ssh's.
    user = pwd.getpwuid(os.getuid())
    login = {'PATH': '/usr/local/bin:/usr/bin:/bin', 'HOME': user.pw_dir, 'USER': user.pw_name,
             'LOGNAME': user.pw_name, 'SHELL': shell,
             'SSH_CONNECTION': '127.0.0.1 40000 127.0.0.1 22', 'SSH_CLIENT': '127.0.0.1 40000 22'}
    os.execve(shell, [shell, '-c', command], login)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 255)
'''




def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ''


def gone(pid):
    """True when process `pid` no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] == 'Z'
    except (FileNotFoundError, ProcessLookupError):
        return True


def wait_gone(pid, bound_s=60):
    """Waits for a process that is not our child to end (the remote side of the fake ssh ends
    asynchronously, as on a real remote host); the bound only keeps a failure from hanging."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        select.select([fd], [], [], bound_s)
    finally:
        os.close(fd)
    return gone(pid)


class Env:
    def __init__(self, chorusrun, tmp):
        self.c = chorusrun
        self.tmp = tmp
        self.fake_bin = os.path.join(tmp, 'bin')
        os.mkdir(self.fake_bin)
        ssh = os.path.join(self.fake_bin, 'ssh')
        with open(ssh, 'w') as f:
            f.write(FAKE_SSH)
        os.chmod(ssh, 0o755)
        self.ssh_log = os.path.join(tmp, 'ssh.log')

    def environment(self, fake_ssh=False, env=None):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(('SLURM_', 'CHORUS_', 'HOROVOD_'))}
        if fake_ssh:
            e['PATH'] = self.fake_bin + ':' + e['PATH']
            e['FAKE_SSH_LOG'] = self.ssh_log
        e.update(env or {})
        return e

    @staticmethod
    def flags(fake_ssh):
        # The stand-in ssh runs its "remote" hosts on this machine; their names do not resolve,
        # so chorusrun is told which interface they reach it through.
        return ['--gloo'] + (['--network-interface', 'lo'] if fake_ssh else [])

    def run(self, args, fake_ssh=False, env=None, **kwargs):
        return subprocess.run([self.c] + self.flags(fake_ssh) + args, capture_output=True,
                              text=True, env=self.environment(fake_ssh, env), **kwargs)

    def staged(self, args, ready, fifo, fake_ssh=False, env=None):
        """Runs chorusrun until `ready` workers printed "ready", then writes a line to `fifo`
        (which the worker meant to fail reads first: no race with the others' start). Returns
        (returncode, stdout, stderr)."""
        if not os.path.exists(fifo):
            os.mkfifo(fifo)
        e = self.environment(fake_ssh, env)
        proc = subprocess.Popen([self.c] + self.flags(fake_ssh) + args, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=e)
        out = []
        seen = 0
        while seen < ready:
            line = proc.stdout.readline()
            if not line:
                break
            out.append(line)
            seen += line.strip().endswith('<stdout>:ready')
        if seen == ready:
            with open(fifo, 'w') as f:
                f.write('go\n')
        rest, err = proc.communicate(timeout=120)
        return subprocess.CompletedProcess(args, proc.returncode, ''.join(out) + rest, err)

    def ssh_calls(self):
        if not os.path.exists(self.ssh_log):
            return []
        with open(self.ssh_log) as f:
            calls = [eval(line) for line in f]  # our own repr() lines
        os.unlink(self.ssh_log)
        return calls

    def pid_file(self, name):
        return os.path.join(self.tmp, name)


REPORT = ('echo rank=$CHORUS_RANK size=$CHORUS_SIZE local=$CHORUS_LOCAL_RANK/$CHORUS_LOCAL_SIZE '
          'cross=$CHORUS_CROSS_RANK/$CHORUS_CROSS_SIZE host=$CHORUS_HOSTNAME '
          'hvd=$HOROVOD_RANK/$HOROVOD_SIZE/$HOROVOD_LOCAL_RANK/$HOROVOD_LOCAL_SIZE/'
          '$HOROVOD_CROSS_RANK/$HOROVOD_CROSS_SIZE/$HOROVOD_HOSTNAME')
REPORT_RE = re.compile(r'^\[(\d+)\]<stdout>:rank=(\d+) size=(\d+) local=(\d+)/(\d+) '
                       r'cross=(\d+)/(\d+) host=(\S+) hvd=(\S+)$')


def placements(p):
    """{rank: (size, local_rank, local_size, cross_rank, cross_size, host)} from REPORT lines,
    or None when a line does not parse or a tag disagrees with CHORUS_RANK / HOROVOD_*."""
    out = {}
    for line in p.stdout.splitlines():
        m = REPORT_RE.match(line)
        if not m or m.group(1) != m.group(2):
            return None
        rank, size, lr, ls, cr, cs = (int(m.group(i)) for i in range(2, 8))
        host = m.group(8)
        if m.group(9) != f'{rank}/{size}/{lr}/{ls}/{cr}/{cs}/{host}':
            return None
        out[rank] = (size, lr, ls, cr, cs, host)
    return out


def test_layouts(t):
    for np in (2, 3):
        p = t.run(['-np', str(np), '/bin/sh', '-c', REPORT])
        want = {r: (np, r, np, 0, 1, 'localhost') for r in range(np)}
        check(f'{np} ranks on localhost: rank, size, local and cross numbers',
              p.returncode == 0 and placements(p) == want and p.stderr == '', describe(p))

    two_hosts = {0: (3, 0, 2, 0, 2, 'localhost'), 1: (3, 1, 2, 0, 1, 'localhost'),
                 2: (3, 0, 1, 1, 2, '127.0.0.1')}
    p = t.run(['-np', '3', '-H', 'localhost:2,127.0.0.1:1', '/usr/bin/python3', '-c',
               'import os; print(os.popen(%r).read().strip())' % REPORT])
    check('-H localhost:2,127.0.0.1:1 is two hosts (cross_rank/cross_size)',
          p.returncode == 0 and placements(p) == two_hosts, describe(p))

    hostfile = os.path.join(t.tmp, 'hosts')
    with open(hostfile, 'w') as f:
        f.write('localhost slots=2\n127.0.0.1 slots=1\n')
    p = t.run(['-np', '3', '--hostfile', hostfile, '/bin/sh', '-c', REPORT])
    check('--hostfile gives the same layout', p.returncode == 0 and placements(p) == two_hosts,
          describe(p))

    slurm = {'SLURM_JOB_NODELIST': 'localhost,127.0.0.1', 'SLURM_TASKS_PER_NODE': '2,1'}
    p = t.run(['-np', '3', '/bin/sh', '-c', REPORT], env=slurm)
    check('a Slurm allocation gives the hosts when -H is absent',
          p.returncode == 0 and placements(p) == two_hosts, describe(p))
    p = t.run(['-np', '4', 'true'], env=slurm)
    check('-np above the Slurm allocation is exit 2 naming it',
          p.returncode == 2 and p.stderr.strip() ==
          'chorusrun: error: -np 4 is more than the 3 slots of the Slurm allocation '
          '(SLURM_JOB_NODELIST=localhost,127.0.0.1)', describe(p))


def test_rendezvous_env(t):
    show = ('echo "$CHORUS_RENDEZVOUS_ADDR $CHORUS_RENDEZVOUS_SECRET $CHORUS_RENDEZVOUS_SCOPE '
            '$CHORUS_START_TIMEOUT_SECONDS"')
    p = t.run(['-np', '3', '/bin/sh', '-c', show])
    values = {tuple(line.split(':', 1)[1].split(' ')) for line in p.stdout.splitlines()}
    ok = p.returncode == 0 and len(p.stdout.splitlines()) == 3 and len(values) == 1
    if ok:
        addr, secret, scope, timeout = next(iter(values))
        host, _, port = addr.rpartition(':')
        ok = (host == '127.0.0.1' and port.isdigit() and 0 < int(port) < 65536 and
              re.fullmatch(r'[0-9a-f]{64}', secret) is not None and scope == 'world/0' and
              timeout == '30')
    check('rendezvous variables: 127.0.0.1:port, a 64-hex-digit secret, world/0, timeout 30',
          ok, describe(p))

    p2 = t.run(['-np', '1', '/bin/sh', '-c', show])
    check('every job gets its own secret',
          p2.returncode == 0 and p.stdout.split()[1] != p2.stdout.split()[1], describe(p2))

    p = t.run(['-np', '1', '--start-timeout', '7', '/bin/sh', '-c', show])
    check('--start-timeout reaches CHORUS_START_TIMEOUT_SECONDS',
          p.returncode == 0 and p.stdout.strip().endswith(' world/0 7'), describe(p))
    p = t.run(['-np', '1', '/bin/sh', '-c', show], env={'HOROVOD_START_TIMEOUT': '12'})
    check('HOROVOD_START_TIMEOUT is the default of --start-timeout',
          p.returncode == 0 and p.stdout.strip().endswith(' world/0 12'), describe(p))

    p = t.run(['-np', '2', '--verbose', '/bin/sh', '-c', 'echo "$CHORUS_RENDEZVOUS_SECRET"'])
    lines = p.stdout.splitlines()
    secret = lines[-1].split(':', 1)[1] if lines else ''
    header = [line for line in lines if line.startswith('chorusrun: ')]
    check('--verbose prints the rendezvous address and each command, never the secret',
          p.returncode == 0 and len(header) == 3 and
          re.fullmatch(r'chorusrun: rendezvous server listening on 127\.0\.0\.1:\d+',
                       header[0]) is not None and
          header[1] == "chorusrun: rank 0 on localhost: /bin/sh -c 'echo \"$CHORUS_RENDEZVOUS_SECRET\"'"
          and len(secret) == 64 and secret not in '\n'.join(header), describe(p))

    p = t.run(['-np', '2', '--fusion-threshold-mb', '16', '--cache-capacity', '9', '/bin/sh', '-c',
               'echo $CHORUS_FUSION_THRESHOLD $CHORUS_CACHE_CAPACITY'])
    check('tuning flags reach the workers as in MPI mode',
          p.returncode == 0 and set(p.stdout.splitlines()) ==
          {'[0]<stdout>:16777216 9', '[1]<stdout>:16777216 9'}, describe(p))


def test_output(t):
    p = t.run(['-np', '2', '/bin/sh', '-c',
               'echo out-$CHORUS_RANK; echo err-$CHORUS_RANK >&2; printf tail-$CHORUS_RANK'])
    check('stdout and stderr lines come back tagged on their own streams',
          p.returncode == 0 and
          sorted(p.stdout.splitlines()) == ['[0]<stdout>:out-0', '[0]<stdout>:tail-0',
                                            '[1]<stdout>:out-1', '[1]<stdout>:tail-1'] and
          sorted(p.stderr.splitlines()) == ['[0]<stderr>:err-0', '[1]<stderr>:err-1'],
          describe(p))

    p = t.run(['-np', '1', '--prefix-output-with-timestamp', '/bin/echo', 'hi'])
    check('--prefix-output-with-timestamp puts mpirun\'s timestamp before the tag',
          p.returncode == 0 and re.fullmatch(
              r'[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\[0\]<stdout>:hi',
              p.stdout.strip()) is not None, describe(p))

    out_dir = os.path.join(t.tmp, 'out', 'nested')
    p = t.run(['-np', '3', '--output-filename', out_dir, '/bin/sh', '-c',
               'echo file-$CHORUS_RANK; echo warn-$CHORUS_RANK >&2'])
    found = {}
    for root, _, files in os.walk(os.path.join(t.tmp, 'out')):
        for name in files:
            with open(os.path.join(root, name)) as f:
                found[os.path.relpath(os.path.join(root, name), out_dir)] = f.read()
    want = {}
    for r in range(3):
        want[f'rank.{r}/stdout'] = f'file-{r}\n'
        want[f'rank.{r}/stderr'] = f'warn-{r}\n'
    check('--output-filename DIR writes DIR/rank.<r>/stdout and stderr, nothing on the terminal',
          p.returncode == 0 and found == want and p.stdout == '' and p.stderr == '',
          describe(p) + f'\nfiles: {found}')


def read_pids(path):
    with open(path) as f:
        return [int(x) for x in f.read().split()]


def test_failures(t):
    fifo = t.pid_file('go')
    for np, code in ((2, 1), (3, 5)):
        pids = t.pid_file(f'pids{np}')
        p = t.staged(['-np', str(np), '/bin/sh', '-c',
                      f'if [ $CHORUS_RANK = 1 ]; then read _ < {fifo}; exit {code}; fi; '
                      f'echo $$ >> {pids}; echo ready; ' + SLEEP], np - 1, fifo)
        others = read_pids(pids)
        check(f'{np} ranks: rank 1 exiting {code} ends the job with its code and a summary',
              p.returncode == code and
              last_line(p.stderr) == f'chorusrun: job failed: rank 1 on localhost exited with '
                                     f'code {code}', describe(p))
        check(f'{np} ranks: the sleeping workers were stopped',
              len(others) == np - 1 and all(gone(pid) for pid in others), f'pids {others}')

    pids = t.pid_file('pids_kill')
    p = t.staged(['-np', '3', '/bin/sh', '-c',
                  f'if [ $CHORUS_RANK = 1 ]; then read _ < {fifo}; kill -9 $$; fi; '
                  f'echo $$ >> {pids}; echo ready; ' + SLEEP], 2, fifo)
    others = read_pids(pids)
    check('a worker killed by SIGKILL: exit 137, the summary names the signal',
          p.returncode == 137 and last_line(p.stderr) ==
          'chorusrun: job failed: rank 1 on localhost killed by SIGKILL',
          describe(p))
    check('... and the other workers were stopped',
          len(others) == 2 and all(gone(pid) for pid in others), f'pids {others}')

    # A worker that ignores SIGTERM still ends: SIGKILL follows the grace period.
    pids = t.pid_file('pids_trap')
    p = t.staged(['-np', '2', '/bin/sh', '-c',
                  f'if [ $CHORUS_RANK = 1 ]; then read _ < {fifo}; exit 2; fi; trap "" TERM; '
                  f'echo $$ >> {pids}; echo ready; while :; do sleep 1; done'], 1, fifo)
    others = read_pids(pids)
    check('a worker ignoring SIGTERM is killed after the grace period',
          p.returncode == 2 and len(others) == 1 and gone(others[0]), describe(p))

    # A background child left behind by a worker that exited 0 is killed too.
    bg = t.pid_file('bg')
    p = t.run(['-np', '1', '/bin/sh', '-c', f'sleep 600 & echo $! > {bg}; exit 0'])
    child = read_pids(bg)[0]
    check('a successful job leaves nothing running (a worker\'s background child is killed)',
          p.returncode == 0 and wait_gone(child), describe(p))


def test_signals(t):
    for sig in (signal.SIGTERM, signal.SIGINT):
        pids = t.pid_file(f'sig{sig}')
        proc = subprocess.Popen(
            [t.c, '--gloo', '-np', '3', '/bin/sh', '-c', f'echo $$ >> {pids}; echo ready; ' + SLEEP],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=t.environment())
        ready = 0
        while ready < 3:
            line = proc.stdout.readline()
            if not line:
                break
            ready += line.strip().endswith('<stdout>:ready')
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        workers = read_pids(pids)
        name = signal.Signals(sig).name
        check(f'{name} to chorusrun stops every worker and exits 128+{int(sig)}',
              ready == 3 and proc.returncode == 128 + sig and len(workers) == 3 and
              all(gone(pid) for pid in workers) and
              last_line(err) == f'chorusrun: job stopped: chorusrun received signal {int(sig)} '
                                f'({signal.strsignal(sig)})',
              f'rc={proc.returncode} ready={ready} workers={workers}\n{err}')


def test_remote(t):
    for shell in ('/bin/sh', '/bin/bash'):
        script = REPORT + '; echo "secret=$CHORUS_RENDEZVOUS_SECRET addr=$CHORUS_RENDEZVOUS_ADDR pwd=$PWD"'
        p = t.run(['-np', '3', '-H', 'localhost:1,fakehost:2', '-p', '2222', '-i', '/k/id key',
                   '/bin/sh', '-c', script], fake_ssh=True, env={'FAKE_SSH_SHELL': shell},
                  cwd=t.tmp)
        calls = t.ssh_calls()
        report = [line for line in p.stdout.splitlines() if 'secret=' not in line]
        extra = [line.split(':', 1)[1] for line in p.stdout.splitlines() if 'secret=' in line]
        want = {0: (3, 0, 1, 0, 2, 'localhost'), 1: (3, 0, 2, 1, 2, 'fakehost'),
                2: (3, 1, 2, 0, 1, 'fakehost')}
        secrets = {x.split()[0] for x in extra}
        addrs = {x.split()[1] for x in extra}
        prefix = ['-o', 'BatchMode=yes', '-o', 'ConnectTimeout=30', '-p', '2222', '-i', '/k/id key',
                  'fakehost']
        check(f'ranks over ssh ({shell}): layout, one secret, this host\'s address, same cwd',
              p.returncode == 0 and
              placements(subprocess.CompletedProcess([], 0, '\n'.join(report), '')) == want and
              len(extra) == 3 and len(secrets) == 1 and
              re.fullmatch(r'secret=[0-9a-f]{64}', secrets.pop()) is not None and
              # Every rank dials 127.0.0.1: local ones always, remote ones through `lo`.
              len(addrs) == 1 and re.fullmatch(r'addr=127\.0\.0\.1:\d+', addrs.pop()) and
              all(x.split()[2] == 'pwd=' + os.path.realpath(t.tmp) for x in extra),
              describe(p))
        check(f'ssh ({shell}): one `ssh HOST true` check, then one ssh per remote rank, with '
              '-p/-i, and neither the secret nor any variable is on a command line',
              len(calls) == 3 and calls[0] == prefix + ['true'] and
              all(c[:-1] == prefix for c in calls[1:]) and
              all('CHORUS_RANK=' not in c[-1] and 'PATH=' not in c[-1] for c in calls) and
              all(len(re.findall(r'[0-9a-f]{64}', c[-1])) == 0 for c in calls), repr(calls))

    pids = t.pid_file('remote_pids')
    fifo = t.pid_file('remote_go')
    p = t.staged(['-np', '3', '-H', 'localhost:1,fakehost:2', '/bin/sh', '-c',
                  f'if [ $CHORUS_RANK = 0 ]; then read _ < {fifo}; exit 3; fi; '
                  f'echo $$ >> {pids}; echo ready; ' + SLEEP], 2, fifo, fake_ssh=True)
    t.ssh_calls()
    remote = read_pids(pids)
    check('a local rank failing stops the remote ranks (their ssh stdin closes)',
          p.returncode == 3 and last_line(p.stderr) ==
          'chorusrun: job failed: rank 0 on localhost exited with code 3' and
          len(remote) == 2 and all(wait_gone(pid) for pid in remote), describe(p) + str(remote))

    p = t.run(['-np', '2', '-H', 'localhost:1,fakehost:1', '/bin/sh', '-c',
               f'if [ $CHORUS_RANK = 1 ]; then exit 4; fi; ' + SLEEP], fake_ssh=True)
    t.ssh_calls()
    check('a remote rank failing ends the job with its code, naming its host',
          p.returncode == 4 and last_line(p.stderr) ==
          'chorusrun: job failed: rank 1 on fakehost exited with code 4', describe(p))

    p = t.run(['-np', '2', '-H', 'localhost:1,hang1:1', '--start-timeout', '1', 'true'],
              fake_ssh=True)
    calls = t.ssh_calls()
    check('a host that does not answer within --start-timeout: exit 1, nothing started',
          p.returncode == 1 and p.stdout == '' and p.stderr.strip() ==
          'chorusrun: error: host hang1 did not answer over ssh within --start-timeout 1 s' and
          calls == [['-o', 'BatchMode=yes', '-o', 'ConnectTimeout=1', 'hang1', 'true']],
          describe(p) + repr(calls))

    p = subprocess.run([t.c, '--gloo', '-np', '2', '-H', 'localhost:1,fakehost:1', 'true'],
                       capture_output=True, text=True, env=t.environment(True))
    check('a remote host whose name does not resolve, no --network-interface: exit 1 (as in MPI '
          'mode), one line naming the host, the interfaces and the flag',
          p.returncode == 1 and len(p.stderr.splitlines()) == 1 and
          p.stderr.startswith('chorusrun: error: cannot resolve host fakehost') and
          '--network-interface' in p.stderr and 'lo 127.0.0.1/8' in p.stderr, describe(p))

    # The real ssh, if this machine has one; without it chorusrun says ssh is missing.
    p = t.run(['-np', '2', '-H', 'localhost:1,nosuchhost.invalid:1', '--network-interface', 'lo',
               '/bin/sh', '-c', SLEEP])
    lines = p.stderr.splitlines()
    if shutil.which('ssh'):
        ok = (p.returncode == 1 and len(lines) == 1 and
              lines[0].startswith('chorusrun: error: cannot reach host nosuchhost.invalid over ssh'))
    else:
        ok = (p.returncode == 2 and len(lines) == 1 and 'nosuchhost.invalid' in lines[0])
    check('an unreachable ssh host: exit 1, one line naming it, nothing started',
          ok and p.stdout == '', describe(p))


def test_remote_environment(t):
    """chorusrun's environment reaches remote workers intact, minus the documented exclusions."""
    for shell in ('/bin/sh', '/bin/bash'):
        dump_dir = os.path.join(t.tmp, 'env_' + os.path.basename(shell))
        os.mkdir(dump_dir)
        env = dict(FORWARDED, **NOT_FORWARDED, FAKE_SSH_SHELL=shell, ENV_DUMP_DIR=dump_dir)
        p = t.run(['-np', '3', '-H', 'localhost:1,fakehost:2', '/usr/bin/python3', '-c', DUMP_ENV],
                  fake_ssh=True, env=env)
        calls = t.ssh_calls()
        dumps = {r: read_env_dump(os.path.join(dump_dir, f'env.{r}')) for r in range(3)}
        local, remote = dumps[0], [dumps[1], dumps[2]]
        wrong = {}
        for rank, got in ((1, remote[0]), (2, remote[1])):
            for name, value in FORWARDED.items():
                if got.get(name) != value:
                    wrong[f'rank {rank} {name}'] = got.get(name)
        check(f'--gloo over ssh ({shell}): {len(FORWARDED)} variables ({sum(map(len, BIG.values()))} '
              'bytes, quotes, newlines, =, non-ASCII, 0xff) reach the remote workers intact',
              p.returncode == 0 and len(remote[0]) > 0 and not wrong,
              describe(p) + f'\nwrong: {repr(wrong)[:2000]}')
        leaked = {f'rank {r} {name}': dumps[r].get(name) for r in (1, 2)
                  for name, value in NOT_FORWARDED.items() if dumps[r].get(name) == value}
        check(f'--gloo over ssh ({shell}): the excluded variables do not travel (the remote keeps '
              'its own SSH_CONNECTION)',
              p.returncode == 0 and not leaked and
              all(dumps[r].get('SSH_CONNECTION') == '127.0.0.1 40000 127.0.0.1 22' and
                  'SSH_AUTH_SOCK' not in dumps[r] and 'HOSTNAME' not in dumps[r] and
                  'BASH_FUNC_f%%' not in dumps[r] and 'my.var' not in dumps[r] for r in (1, 2)),
              repr(leaked) + repr({r: dumps[r].get('SSH_CONNECTION') for r in (1, 2)}))
        secrets = {dumps[r].get('CHORUS_RENDEZVOUS_SECRET') for r in range(3)}
        check(f'--gloo over ssh ({shell}): the local worker inherits everything; every rank has '
              'the one secret; no value is on an ssh command line',
              all(local.get(k) == v for k, v in dict(FORWARDED, **NOT_FORWARDED).items()
                  if k not in ('_', 'PWD')) and
              len(secrets) == 1 and re.fullmatch(r'[0-9a-f]{64}', secrets.pop() or '') and
              len(calls) == 3 and
              not any(x in ' '.join(c) for c in calls
                      for x in ('second line', 'MYVAR', 'BIG_', 'dotted', 'callerhost')),
              repr({k: local.get(k) for k in NOT_FORWARDED}) + repr(calls)[:2000])


BAD_INPUT = [
    (['-np', '3', '-H', 'localhost:2', 'true'], '-np 3 is more than the 2 slots of -H localhost:2'),
    (['-np', '2', 'no_such_command_xyz'], "command 'no_such_command_xyz' not found in PATH"),
    (['-np', '2', '--mpi-args', '-x FOO', 'true'], '--mpi-args is for mpirun'),
    (['-np', '2', '--min-np', '3', 'true'], '--min-np=3 is larger than -np=2'),
    (['-np', '2', '--mpi', 'true'], 'excludes'),
    (['-np', '1', 'true'], 'HOROVOD_START_TIMEOUT=soon is not a number of seconds'),
]


def test_bad_input(t):
    for args, expected in BAD_INPUT:
        env = {'HOROVOD_START_TIMEOUT': 'soon'} if 'HOROVOD_START_TIMEOUT' in expected else None
        p = t.run(args, env=env)
        lines = p.stderr.splitlines()
        check('bad input exits 2: --gloo ' + ' '.join(args),
              p.returncode == 2 and p.stdout == '' and len(lines) == 1 and
              lines[0].startswith('chorusrun: error: ') and expected in lines[0], describe(p))
    p = t.run(['-cb'])
    check('--gloo -cb still prints the build', p.returncode == 0 and 'Available Controllers' in
          p.stdout, describe(p))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chorusrun', required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix='chorus_ucx_launch_e2e_') as tmp:
        t = Env(os.path.abspath(args.chorusrun), tmp)
        test_bad_input(t)
        test_layouts(t)
        test_rendezvous_env(t)
        test_output(t)
        test_failures(t)
        test_signals(t)
        test_remote(t)
        test_remote_environment(t)
    return summary()


if __name__ == '__main__':
    sys.exit(main())
