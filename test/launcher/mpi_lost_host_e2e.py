#!/usr/bin/python3
"""End-to-end tests of chorusrun in MPI mode when a host is lost or cannot be reached, on this
machine:

- a real 3-rank job whose rank 2 stops itself (SIGSTOP, as a lost host looks to its peers):
  the runtime's no-progress reports name it, and chorusrun's last line says rank 2 on its host
  is presumed lost;
- a stand-in for mpirun that hangs after the ranks' reports, as Open MPI 4.1's mpirun does
  when it cannot reach a lost host's daemon (test/cluster's cut_mpi shows the real one): chorusrun
  stops it (SIGTERM, then SIGKILL) and names the rank and host; with SIGTERM sent to chorusrun
  instead, it kills mpirun after its grace; nothing mpirun started is left running;
- the ssh check before mpirun starts, with a stand-in ssh: a refused host fails the job at once
  naming it; --ssh-port, --ssh-identity-file and --start-timeout reach the check; names of this
  machine are not checked.

Usage: mpi_lost_host_e2e.py --chorusrun PATH --no-progress-job PATH
Exits 0 when every case passes; prints one line per case.
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

from e2e_report import check, describe, summary

# What the runtime prints when its MPI calls made no progress (runtime/progress/progress_watchdog.h),
# after the log prefix; the stand-in mpirun prints it for ranks 0 and 1, waiting on rank 2.
REPORT = ('[chorus {r}/0 ERROR mpi_controller.cc:106] rank {r}: no progress for 5s: '
          'MPI_Iallreduce (the cycle\'s bit vector) has not completed, running the cycle\'s '
          'negotiation, no op pending on this rank; it waits on ranks {peers} (the transport '
          'does not say which of them has not answered). A peer that stopped answering without '
          'closing its connections (its host lost, a link cut, the process stopped or stuck) '
          'looks like this. Ending the job. If those ranks are only slow, raise '
          'CHORUS_NO_PROGRESS_TIMEOUT_SECONDS (0 disables this check). (MPI_Abort, exit code 75)')

# A stand-in for mpirun that never ends by itself and ignores SIGTERM, as Open MPI 4.1's mpirun
# does while it waits for a lost host's daemon. It leaves a background process behind (its pid
# in $FAKE_DIR/leftover), as mpirun leaves its ssh clients when it is killed. With
# FAKE_REPORTS=1 it first prints what mpirun relays from ranks 0 and 1 and its own abort notice.
FAKE_MPIRUN = r'''#!/bin/sh
trap '' TERM
touch "$FAKE_DIR/mpirun_ran"
sleep 600 >/dev/null 2>&1 &
echo $! > "$FAKE_DIR/leftover"
if [ "$FAKE_REPORTS" = 1 ]; then
  printf '%s\n' "[1,0]<stderr>:$REPORT0" "[1,1]<stderr>:$REPORT1"
  printf '%s\n' '--------------------------------------------------------------------------' \
    'MPI_ABORT was invoked on rank 0 in communicator MPI COMMUNICATOR 3 DUP FROM 0' \
    'with errorcode 75.' '--------------------------------------------------------------------------'
else
  echo "[1,0]<stdout>:ready"
fi
exec sleep 600
'''

# A stand-in for ssh: records its arguments; refuses hosts named in FAKE_SSH_REFUSE (ssh's own
# words and status), succeeds for the others.
FAKE_SSH = r'''#!/bin/sh
echo "$*" >> "$FAKE_DIR/ssh.log"
for host; do :; done
for arg; do case " $FAKE_SSH_REFUSE " in *" $arg "*) host=$arg;
  echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255;; esac; done
exit 0
'''


def start(chorusrun, args, env):
    """chorusrun in a session of its own: whatever it leaves can be killed with it."""
    return subprocess.Popen([chorusrun] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)


def finish(proc, timeout):
    """chorusrun's (status, stdout, stderr); status None when it ran past `timeout` seconds
    (it and its session are then killed)."""
    try:
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return subprocess.CompletedProcess(proc.args, None, out, err + f'\n(killed after {timeout} s)')


def run(chorusrun, args, env, timeout):
    return finish(start(chorusrun, args, env), timeout)


def last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ''


def running(pid):
    """Whether `pid` runs (a zombie does not)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (OSError, IndexError):
        return False


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


class FakeTools:
    """A directory with the stand-in mpirun and ssh, first on PATH."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        for name, text in (('mpirun', FAKE_MPIRUN), ('ssh', FAKE_SSH)):
            path = os.path.join(self.dir, name)
            with open(path, 'w') as f:
                f.write(text)
            os.chmod(path, 0o755)

    def env(self, **extra):
        env = dict(os.environ, PATH=self.dir + ':' + os.environ['PATH'], FAKE_DIR=self.dir,
                   REPORT0=REPORT.format(r=0, peers='1, 2'),
                   REPORT1=REPORT.format(r=1, peers='0, 2'))
        for name in ('OMPI_MCA_plm_rsh_agent', 'SLURM_JOB_ID', 'SLURM_JOBID'):
            env.pop(name, None)
        env.update(extra)
        return env

    def path(self, name):
        return os.path.join(self.dir, name)

    def ssh_calls(self):
        try:
            with open(self.path('ssh.log')) as f:
                return f.read().splitlines()
        except OSError:
            return []

    def forget_ssh_calls(self):
        if os.path.exists(self.path('ssh.log')):
            os.unlink(self.path('ssh.log'))

    def close(self):
        leftover = read_pid(self.path('leftover'))
        if leftover and running(leftover):
            os.kill(leftover, signal.SIGKILL)
        self.tmp.cleanup()


def test_real_job(c, job):
    """Rank 2 of a real job stops itself: the reports of ranks 0 and 1 name it; mpirun, which
    reaches every rank here, ends the job itself with the ranks' MPI_Abort status 75."""
    env = dict(os.environ, CHORUS_NO_PROGRESS_TIMEOUT_SECONDS='3', CHORUS_PIPELINE_CHUNK_BYTES='65536',
               OMPI_MCA_mpi_yield_when_idle='1')
    host = 'localhost'
    prefix = 'chorusrun: job failed (mpirun exit status 75): '
    both = prefix + (f'rank 2 on {host} presumed lost: ranks 0, 1 saw no progress for 3s '
                     'waiting on it (CHORUS_NO_PROGRESS_TIMEOUT_SECONDS)')
    # Open MPI kills every rank after the first MPI_Abort: the other waiting rank may be killed
    # before its own report, and cannot then be told from rank 2 (Note [The no-progress report
    # contract] in launcher/mpi/no_progress_report.h).
    one = re.compile(re.escape(prefix) + r'rank ([01]) on localhost or rank 2 on localhost '
                     r'presumed lost: rank ([01]) saw no progress for 3s waiting on them '
                     r'\(CHORUS_NO_PROGRESS_TIMEOUT_SECONDS\)')
    for mode in ('stop-between-steps', 'stop-in-allreduce'):
        p = run(c, ['-np', '3', job, mode], env, timeout=300)
        last = last_line(p.stderr)
        m = one.fullmatch(last)
        check(f'a rank lost in a real job ({mode}): status 75, rank 2 on {host} named',
              p.returncode == 75 and (last == both or (m and m.group(1) != m.group(2))),
              describe(p)[-4000:])
        print(f'     ({"both ranks reported" if last == both else last[len(prefix):]})')


def test_hanging_mpirun(c):
    """mpirun that does not end after the ranks' reports is stopped: SIGTERM after 2 s, SIGKILL
    3 s later (it ignores SIGTERM); status 75; the rank and host the reports point at."""
    tools = FakeTools()
    try:
        began = time.monotonic()
        p = run(c, ['-np', '3', '-H', 'hosta:1,hostb:1,hostc:1', 'true'],
                tools.env(FAKE_REPORTS='1'), timeout=60)
        elapsed = time.monotonic() - began
        lines = p.stderr.splitlines()
        want = [
            'chorusrun: mpirun is still running 2s after rank 0 reported no progress (it cannot '
            'end the job while a host\'s daemon does not answer): stopping it (SIGTERM)',
            'chorusrun: mpirun is still running 3s after it was asked to stop: killing it '
            '(SIGKILL)',
            'chorusrun: job failed (exit status 75, mpirun stopped): rank 2 on hostc presumed '
            'lost: ranks 0, 1 saw no progress for 5s waiting on it '
            '(CHORUS_NO_PROGRESS_TIMEOUT_SECONDS)']
        # "About 5 s" against "the stand-in's 600 s".
        check('mpirun still running after the ranks\' no-progress reports is stopped; the lost '
              'rank and its host are named',
              p.returncode == 75 and lines[-3:] == want and elapsed < 60,
              describe(p) + f'\nafter {elapsed:.1f} s')
        print(f'     (chorusrun ended {elapsed:.1f} s after it started)')
        leftover = read_pid(tools.path('leftover'))
        check('what mpirun left behind is killed by chorusrun',
              p.returncode is not None and leftover and not running(leftover),
              f'pid {leftover} still running' if running(leftover) else describe(p))
        check('the remote hosts were checked over ssh first',
              sorted(line.split()[-2] for line in tools.ssh_calls()) == ['hosta', 'hostb', 'hostc'],
              repr(tools.ssh_calls()))
    finally:
        tools.close()


def test_sigterm_to_hanging_mpirun(c):
    """SIGTERM to chorusrun while mpirun does not obey it: SIGKILL after the grace (3 s)."""
    tools = FakeTools()
    try:
        proc = start(c, ['-np', '1', 'true'], tools.env())
        ready = proc.stdout.readline().strip() == '[0]<stdout>:ready'
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        p = finish(proc, 60)
        err = p.stderr
        elapsed = time.monotonic() - sent
        check('SIGTERM to chorusrun: mpirun that does not end is killed after the grace',
              ready and proc.returncode == 128 + signal.SIGTERM and elapsed < 60 and
              last_line(err) == 'chorusrun: job stopped: chorusrun received signal 15 '
                                '(Terminated); mpirun had not ended 3s later and was killed',
              f'rc={proc.returncode} ready={ready} after {elapsed:.1f} s\n{err}')
        print(f'     (chorusrun ended {elapsed:.1f} s after SIGTERM)')
        leftover = read_pid(tools.path('leftover'))
        check('after SIGTERM, what mpirun left behind is killed by chorusrun too',
              p.returncode is not None and leftover and not running(leftover),
              f'pid {leftover} still running' if running(leftover) else describe(p))
    finally:
        tools.close()


def test_ssh_checks(c):
    tools = FakeTools()
    try:
        env = tools.env(FAKE_SSH_REFUSE='hostb')
        began = time.monotonic()
        p = run(c, ['-np', '3', '-H', 'hosta:1,hostb:1,hostc:1', 'true'], env, timeout=60)
        elapsed = time.monotonic() - began
        check('MPI mode: a host that refuses ssh fails the job at once, naming it; mpirun does not '
              'start',
              p.returncode == 1 and p.stderr.splitlines() == [
                  'chorusrun: error: cannot reach host hostb over ssh (ssh hostb true): ssh: '
                  'connect to host hostb port 22: Connection refused'] and
              not os.path.exists(tools.path('mpirun_ran')) and elapsed < 25,
              describe(p) + f'\nafter {elapsed:.1f} s')

        tools.forget_ssh_calls()
        this_host = socket.gethostname()
        p = run(c, ['-np', '4', '-H', f'localhost:1,127.0.0.1:1,{this_host}:1,hostb:1',
                    '--ssh-port', '2222', '--ssh-identity-file', '/keys/id', '--start-timeout', '7',
                    'true'], env, timeout=60)
        calls = tools.ssh_calls()
        check('MPI mode: the check uses --ssh-port, --ssh-identity-file and --start-timeout, and '
              'skips this machine\'s names',
              p.returncode == 1 and calls == ['-o BatchMode=yes -o ConnectTimeout=7 -p 2222 -i '
                                              '/keys/id hostb true'],
              describe(p) + '\n' + repr(calls))

        # Another agent: mpirun does not use ssh, and chorusrun does not check it. The stand-in
        # mpirun starting is what this case looks for; SIGTERM then ends chorusrun.
        tools.forget_ssh_calls()
        proc = start(c, ['-np', '2', '-H', 'hosta:1,hostb:1', 'true'],
                     dict(env, OMPI_MCA_plm_rsh_agent=tools.path('ssh')))
        ready = proc.stdout.readline().strip() == '[0]<stdout>:ready'
        proc.send_signal(signal.SIGTERM)
        finish(proc, 60)
        check('MPI mode: no ssh check when mpirun is given another agent (OMPI_MCA_plm_rsh_agent)',
              ready and tools.ssh_calls() == [], f'mpirun ran: {ready}; ssh calls: '
              f'{tools.ssh_calls()!r}')
    finally:
        tools.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chorusrun', required=True)
    parser.add_argument('--no-progress-job', required=True)
    args = parser.parse_args()
    c = os.path.abspath(args.chorusrun)
    test_ssh_checks(c)
    test_hanging_mpirun(c)
    test_sigterm_to_hanging_mpirun(c)
    test_real_job(c, os.path.abspath(args.no_progress_job))
    return summary()


if __name__ == '__main__':
    sys.exit(main())
