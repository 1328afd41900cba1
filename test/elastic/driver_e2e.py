#!/usr/bin/python3
"""End-to-end tests of chorusrun's elastic driver (elastic/driver.h) with real processes.

Workers are elastic_worker.py: chorus's elastic loop around a counter; it records its place,
pid and resumed state each time its world is formed and follows a schedule. Survivors of a
reset keep their process (same pid), and every rank of a generation resumes from the same
committed state: a rollback lands on a commit (step a multiple of COMMIT_EVERY, and `total`
equals what the steps added at their world sizes). Hosts are
`localhost` and `127.0.0.1`, both this machine; the discovery script cats a hosts file that the
tests rewrite. Every case is bounded by its own timeout and fails with a message naming what it
waited for; nothing asserts on wall-clock durations.

Usage: driver_e2e.py --chorusrun PATH
Exits 0 when every case passes; prints one line per case.
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
WORKER = os.path.join(HERE, 'elastic_worker.py')
CASE_TIMEOUT = 30  # seconds, per case
failures = []

# A stand-in ssh: runs the remote command here, in a session of its own as sshd would, and exits
# with its status (255 when it was killed by a signal, or for hosts named "down*", as ssh does
# when it cannot connect).
FAKE_SSH = r'''#!/usr/bin/python3
import os, sys
args = sys.argv[1:]
i = 0
while i < len(args) and args[i].startswith('-'):
    i += 2 if args[i] in ('-o', '-p', '-i') else 1
host, command = args[i], ' '.join(args[i + 1:])
if host.startswith('down'):
    sys.exit(255)  # as ssh does when it cannot connect
if command == 'true':
    sys.exit(0)
pid = os.fork()
if pid == 0:
    os.setsid()
    os.execv('/bin/sh', ['/bin/sh', '-c', command])
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 255)
'''


class Job:
    """One chorusrun run in its own directory (hosts file, schedule, events, output)."""

    def __init__(self, chorusrun, name, hosts, schedule, flags, discovery=True, script=None,
                 fake_ssh=False, timeline=False):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f'elastic_{name}_')
        self.write_hosts(hosts)
        with open(self.path('schedule.json'), 'w') as f:
            json.dump(schedule, f)
        script_path = self.path('discover.sh')
        with open(script_path, 'w') as f:
            f.write(script.format(dir=self.dir) if script else
                    f'#!/bin/sh\ncat {self.path("hosts")}\n')
        os.chmod(script_path, 0o755)
        env = dict(os.environ, ELASTIC_TEST_DIR=self.dir, CHORUS_ELASTIC_DISCOVERY_INTERVAL='0.05')
        if timeline:
            env['CHORUS_TIMELINE'] = self.path('timeline.json')
        if fake_ssh:
            os.mkdir(self.path('bin'))
            with open(self.path('bin/ssh'), 'w') as f:
                f.write(FAKE_SSH)
            os.chmod(self.path('bin/ssh'), 0o755)
            env['PATH'] = self.path('bin') + os.pathsep + env.get('PATH', '')
        args = [chorusrun] + flags
        if discovery:
            args += ['--host-discovery-script', script_path]
        args += [WORKER]
        self.out = open(self.path('stdout'), 'w')
        self.err = open(self.path('stderr'), 'w')
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=self.err, env=env,
                                     stdin=subprocess.DEVNULL)
        self.deadline = time.monotonic() + CASE_TIMEOUT

    def path(self, name):
        return os.path.join(self.dir, name)

    def write_hosts(self, text):
        tmp = self.path('hosts.tmp')
        with open(tmp, 'w') as f:
            f.write(text)
        os.replace(tmp, self.path('hosts'))  # the script never sees a half-written file

    def events(self):
        try:
            with open(self.path('events')) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def generation(self, g):
        return sorted((e for e in self.events() if e['gen'] == g), key=lambda e: e['rank'])

    def stderr(self):
        with open(self.path('stderr')) as f:
            return f.read()

    def stdout(self):
        with open(self.path('stdout')) as f:
            return f.read()

    def wait_for(self, what, predicate):
        while not predicate():
            if time.monotonic() > self.deadline:
                raise TimeoutError(f'timed out after {CASE_TIMEOUT} s waiting for {what}')
            if self.proc.poll() is not None and not predicate():
                raise RuntimeError(f'chorusrun ended (status {self.proc.returncode}) '
                                   f'before {what}')
            time.sleep(0.02)

    def wait_generation(self, g, size):
        self.wait_for(f'generation {g} with {size} workers',
                      lambda: len(self.generation(g)) >= size)
        return self.generation(g)

    def wait_generation_from(self, first, size):
        """The events of the first generation numbered `first` or later in which at least
        `size` workers trained (a later one can supersede `first` before its world forms), once
        every worker of that generation has trained (its records carry its size)."""
        def complete(g):
            gen = self.generation(g)
            return len(gen) >= max(size, gen[0]['size']) if gen else False

        def found():
            gens = sorted({e['gen'] for e in self.events() if e['gen'] >= first})
            return next((g for g in gens if complete(g)), None)
        self.wait_for(f'a generation from {first} on with {size} workers',
                      lambda: found() is not None)
        return self.generation(found())

    def release(self):
        open(self.path('release'), 'w').close()

    def finish(self):
        left = max(0.1, self.deadline - time.monotonic())
        try:
            return self.proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise TimeoutError(f'chorusrun did not end within {CASE_TIMEOUT} s')

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.out.close()
        self.err.close()

    def describe(self):
        return (f'status {self.proc.returncode}\n--- stdout\n{self.stdout()}'
                f'--- stderr\n{self.stderr()}--- events\n' +
                '\n'.join(json.dumps(e) for e in self.events()))


def case(fn):
    """Runs one case; a failed check or a timeout is reported with the job's output."""
    def run(chorusrun):
        jobs = []
        try:
            fn(chorusrun, jobs)
            print(f'PASS {fn.__name__}')
        except (AssertionError, TimeoutError, RuntimeError) as e:
            failures.append(fn.__name__)
            print(f'FAIL {fn.__name__}: {e}')
            for job in jobs:
                print(job.describe())
        finally:
            for job in jobs:
                job.close()
                shutil.rmtree(job.dir, ignore_errors=True)
    run.__name__ = fn.__name__
    return run


def start(jobs, *args, **kwargs):
    job = Job(*args, **kwargs)
    jobs.append(job)
    return job


def ranks(gen):
    return [(e['rank'], e['size'], e['host']) for e in gen]


COMMIT_EVERY = 5  # elastic_worker.py's


def assert_synced_on_a_commit(gen):
    """Every rank of the generation resumed from the same committed state."""
    states = {(e['step'], e['total'], e['commits']) for e in gen}
    assert len(states) == 1, gen
    step, _, commits = states.pop()
    assert step == commits * COMMIT_EVERY, gen


def pids(gen):
    return [e['pid'] for e in gen]


@case
def test_grow_then_shrink(c, jobs):
    job = start(jobs, c, 'grow', 'localhost:2\n', {'g2r0': 'exit:0'}, ['-np', '2'],
                timeline=True)
    g0 = job.wait_generation(0, 2)
    assert ranks(g0) == [(0, 2, 'localhost'), (1, 2, 'localhost')], ranks(g0)
    assert all(e['scope'] == 'world/0' and e['elastic'] == '1' for e in g0), g0
    job.write_hosts('localhost:2\n127.0.0.1:2\n')
    g1 = job.wait_generation(1, 4)
    assert ranks(g1) == [(0, 4, 'localhost'), (1, 4, 'localhost'), (2, 4, '127.0.0.1'),
                         (3, 4, '127.0.0.1')], ranks(g1)
    assert [e['local_rank'] for e in g1] == [0, 1, 0, 1], g1
    assert all(e['scope'] == 'world/1' and e['horovod_rank'] == e['rank'] for e in g1), g1
    # The two first workers went on in process; the two new ones took their state.
    assert pids(g1)[:2] == pids(g0) and [e['resets'] for e in g1] == [1, 1, 0, 0], (g0, g1)
    assert_synced_on_a_commit(g1)
    assert g1[0]['total'] == 2 * g1[0]['step'], g1  # every step so far ran on 2 ranks
    job.write_hosts('localhost:2\n')
    g2 = job.wait_generation(2, 2)
    assert ranks(g2) == [(0, 2, 'localhost'), (1, 2, 'localhost')], ranks(g2)
    assert pids(g2) == pids(g0) and [e['resets'] for e in g2] == [2, 2], (g0, g2)
    assert_synced_on_a_commit(g2)
    # Hosts added and removed are acted on at a commit: no step is lost or repeated.
    assert g2[0]['step'] >= g1[0]['step'], (g1, g2)
    status = job.finish()  # rank 0 of generation 2 exits 0: the job is done
    assert status == 0, f'status {status}'
    err = job.stderr()
    assert 'chorusrun: generation 1: +127.0.0.1, size 2 -> 4, cause: hosts changed' in err, err
    assert ('chorusrun: generation 2: -127.0.0.1 (gone from discovery), size 4 -> 2, '
            'cause: hosts changed') in err, err
    out = job.stdout().splitlines()
    assert any(l.startswith('[3]<stdout>:{') and '"gen": 1' in l for l in out), out
    # Rank 0 (the same process throughout) recorded each generation into a file of its own.
    for name in ('timeline.json', 'timeline.gen1.json', 'timeline.gen2.json'):
        with open(job.path(name)) as f:
            events = json.load(f)
        assert any(e.get('name') == 'thread_name' and 'allreduce.noname' in e['args']['name']
                   for e in events), name  # the step's (unnamed) allreduce was recorded


@case
def test_failure_blacklists_host(c, jobs):
    job = start(jobs, c, 'fail', 'localhost:1\n127.0.0.1:1\n', {'g0r1': 'exit:3', 'g1r0': 'exit:0'},
                ['-np', '1'])
    # New hosts are ordered by name: 127.0.0.1 is rank 0, localhost rank 1.
    g0 = job.wait_generation(0, 2)
    g1 = job.wait_generation(1, 1)
    assert ranks(g1) == [(0, 1, '127.0.0.1')], ranks(g1)
    # The survivor rolled back to its last commit in process.
    assert pids(g1) == pids(g0)[:1] and g1[0]['resets'] == 1, (g0, g1)
    assert_synced_on_a_commit(g1)
    assert g1[0]['total'] == 2 * g1[0]['step'], g1
    assert job.finish() == 0
    err = job.stderr()
    assert ('chorusrun: generation 1: -localhost (rank 1 exited with code 3), size 2 -> 1, '
            'cause: rank 1 on localhost exited with code 3; localhost blacklisted') in err, err
    assert not job.generation(2), job.events()


@case
def test_every_host_blacklisted(c, jobs):
    job = start(jobs, c, 'allbad', 'localhost:1\n127.0.0.1:1\n', {'*': 'exit:4'},
                ['-np', '1'])
    status = job.finish()
    err = job.stderr()
    assert status == 1, f'status {status}'
    assert err.splitlines()[-1].startswith(
        'chorusrun: elastic job failed: every host is blacklisted (127.0.0.1, localhost)'), err


@case
def test_min_np_not_reachable(c, jobs):
    job = start(jobs, c, 'minnp', 'localhost:1\n', {}, ['-np', '2', '--elastic-timeout', '1'])
    status = job.finish()
    err = job.stderr()
    assert status == 1, f'status {status}'
    assert ('chorusrun: elastic job failed: fewer than --min-np=2 slots for longer than '
            '--elastic-timeout=1 s (1 available)') in err, err
    assert not job.events(), job.events()


def reset_limit_job(c, jobs, limit):
    # Each worker leaves after SIGTERM (no blacklist), so every generation resets once.
    return start(jobs, c, f'limit{limit}', 'localhost:1\n',
                 {'g0r0': 'term', 'g1r0': 'term', 'g2r0': 'exit:0'},
                 ['-np', '1', '--reset-limit', str(limit)])


@case
def test_reset_limit_1_ends_the_job(c, jobs):
    job = reset_limit_job(c, jobs, 1)
    status = job.finish()
    err = job.stderr()
    assert status == 1, f'status {status}'
    assert 'chorusrun: elastic job failed: reset limit 1 reached (--reset-limit)' in err, err
    assert len(job.generation(1)) == 1 and not job.generation(2), job.events()


@case
def test_reset_limit_2_allows_two_resets(c, jobs):
    job = reset_limit_job(c, jobs, 2)
    status = job.finish()
    assert status == 0, f'status {status}'
    assert ranks(job.generation(2)) == [(0, 1, 'localhost')], job.events()


@case
def test_sigterm_is_not_blacklisted(c, jobs):
    # Alone, the survivor is below --min-np=2: generation 1 holds it (no world forms) while a
    # new worker starts in the freed slot; generation 2 adds that worker once it is ready.
    job = start(jobs, c, 'spot', 'localhost:1\n127.0.0.1:1\n', {'g0r1': 'term'}, ['-np', '2'])
    g0 = job.wait_generation(0, 2)
    g2 = job.wait_generation(2, 2)
    assert ranks(g2) == [(0, 2, '127.0.0.1'), (1, 2, 'localhost')], ranks(g2)
    assert pids(g2)[0] == pids(g0)[0] and pids(g2)[1] != pids(g0)[1], (g0, g2)
    assert not job.generation(1), job.events()
    assert_synced_on_a_commit(g2)
    job.release()
    assert job.finish() == 0
    err = job.stderr()
    assert ('chorusrun: generation 1: -localhost (rank 1 left after SIGTERM), size 2 -> 1, '
            'cause: rank 1 on localhost left after SIGTERM; on hold: fewer than --min-np=2 '
            'workers') in err, err
    assert ('chorusrun: generation 2: +localhost, size 1 -> 2, cause: joined: rank 1 on '
            'localhost') in err, err
    assert 'blacklisted' not in err, err


@case
def test_discovery_garbage_keeps_last_good_set(c, jobs):
    job = start(jobs, c, 'garbage', 'localhost:2\n', {}, ['-np', '2'])
    job.wait_generation(0, 2)
    job.write_hosts('localhost:x\n')
    job.wait_for('the discovery warning', lambda: 'chorusrun: warning: ' in job.stderr())
    job.write_hosts('localhost:2\n')
    job.release()
    assert job.finish() == 0
    assert 'localhost:x' in job.stderr(), job.stderr()
    assert 'generation 1' not in job.stderr() and not job.generation(1), job.describe()


@case
def test_first_discovery_failure_is_fatal(c, jobs):
    job = start(jobs, c, 'nodisc', 'localhost:1\n', {}, ['-np', '1'], discovery=False)
    job.proc.kill()  # replaced by a run with a failing script
    job.proc.wait()
    script = job.path('fail.sh')
    with open(script, 'w') as f:
        f.write('#!/bin/sh\necho no hosts today >&2\nexit 3\n')
    os.chmod(script, 0o755)
    p = subprocess.run([c, '-np', '1', '--host-discovery-script', script, WORKER],
                       capture_output=True, text=True, timeout=CASE_TIMEOUT,
                       env=dict(os.environ, ELASTIC_TEST_DIR=job.dir))
    assert p.returncode == 1, p
    assert 'chorusrun: elastic job failed: host discovery failed' in p.stderr, p.stderr
    assert not job.events(), job.events()


@case
def test_mpi_with_elastic_flags_is_exit_2(c, jobs):
    p = subprocess.run([c, '-np', '2', '--mpi', '--min-np', '1', 'true'], capture_output=True,
                       text=True, timeout=CASE_TIMEOUT)
    lines = p.stderr.splitlines()
    assert p.returncode == 2 and len(lines) == 1, p
    assert lines[0].startswith('chorusrun: error: ') and 'Open MPI 4.1 cannot resize' in lines[0], p


@case
def test_blacklisted_host_readmitted_after_cooldown(c, jobs):
    job = start(jobs, c, 'cooldown', 'localhost:1\n127.0.0.1:1\n', {'g0r1': 'exit:3'},
                ['-np', '1', '--blacklist-cooldown-range', '1', '2'])
    g1 = job.wait_generation(1, 1)
    assert ranks(g1) == [(0, 1, '127.0.0.1')], ranks(g1)
    g2 = job.wait_generation(2, 2)
    assert ranks(g2) == [(0, 2, '127.0.0.1'), (1, 2, 'localhost')], ranks(g2)
    job.release()
    assert job.finish() == 0
    assert 'chorusrun: generation 2: +localhost, size 1 -> 2' in job.stderr(), job.stderr()


@case
def test_fixed_hosts_with_min_np(c, jobs):
    job = start(jobs, c, 'fixed', '', {'g0r1': 'exit:3', 'g1r0': 'exit:0'},
                ['-np', '2', '--min-np', '1', '-H', 'localhost:1,127.0.0.1:1'], discovery=False)
    g0 = job.wait_generation(0, 2)
    assert ranks(g0) == [(0, 2, 'localhost'), (1, 2, '127.0.0.1')], ranks(g0)
    assert job.finish() == 0
    assert ranks(job.generation(1)) == [(0, 1, 'localhost')], job.events()


@case
def test_sigint_is_forwarded(c, jobs):
    job = start(jobs, c, 'sigint', 'localhost:2\n', {}, ['-np', '2'])
    job.wait_generation(0, 2)
    job.proc.send_signal(signal.SIGINT)
    status = job.finish()
    err = job.stderr()
    assert status == 130, f'status {status}'
    assert err.splitlines()[-1] == 'chorusrun: job stopped: chorusrun received signal 2 (Interrupt)', err
    assert '[0]<stderr>:KeyboardInterrupt' in err and '[1]<stderr>:KeyboardInterrupt' in err, err


@case
def test_hanging_discovery_does_not_block_the_loop(c, jobs):
    # The first run answers; every later run hangs (the script timeout is 30 s, as long as the
    # case's): the failure must still be handled with the last good hosts.
    script = ('#!/bin/sh\nif [ -e {dir}/answered ]; then exec sleep 60; fi\n'
              'touch {dir}/answered\ncat {dir}/hosts\n')
    job = start(jobs, c, 'hang', 'localhost:1\n127.0.0.1:1\n', {'g0r1': 'exit:3'},
                ['-np', '1'], script=script)
    g1 = job.wait_generation(1, 1)
    assert ranks(g1) == [(0, 1, '127.0.0.1')], ranks(g1)
    job.release()
    assert job.finish() == 0


@case
def test_max_np_caps_the_world(c, jobs):
    job = start(jobs, c, 'maxnp', 'localhost:2\n127.0.0.1:2\n', {}, ['-np', '1', '--max-np', '3'])
    g0 = job.wait_generation(0, 3)
    assert ranks(g0) == [(0, 3, '127.0.0.1'), (1, 3, '127.0.0.1'), (2, 3, 'localhost')], ranks(g0)
    job.release()
    assert job.finish() == 0
    assert not job.generation(1) and len(g0) == 3, job.events()


@case
def test_silent_worker_is_killed(c, jobs):
    # Rank 1 stops itself (SIGSTOP): only the missing heartbeats tell; after 5 s of silence it
    # is killed, its host blacklisted, and rank 0 goes on alone from its last commit.
    job = start(jobs, c, 'sigstop', 'localhost:1\n127.0.0.1:1\n', {'g0r1': 'stop', 'g1r0': 'exit:0'},
                ['-np', '1'])
    g0 = job.wait_generation(0, 2)
    g1 = job.wait_generation(1, 1)
    assert ranks(g1) == [(0, 1, '127.0.0.1')] and pids(g1) == pids(g0)[:1], (g0, g1)
    assert_synced_on_a_commit(g1)
    assert job.finish() == 0
    err = job.stderr()
    assert ('chorusrun: generation 1: -localhost (rank 1 silent for 5s (no heartbeat: hung, '
            'stopped or cut off), killed), size 2 -> 1') in err, err
    assert 'localhost blacklisted' in err, err


@case
def test_rank_0_killed(c, jobs):
    # 127.0.0.1 sorts first: rank 0 is there. It fails; the lowest survivor becomes rank 0.
    job = start(jobs, c, 'rank0', '127.0.0.1:1\nlocalhost:2\n', {'g0r0': 'exit:5'},
                ['-np', '3', '--min-np', '2'])
    g0 = job.wait_generation(0, 3)
    g1 = job.wait_generation(1, 2)
    assert ranks(g1) == [(0, 2, 'localhost'), (1, 2, 'localhost')], ranks(g1)
    assert pids(g1) == pids(g0)[1:], (g0, g1)
    assert_synced_on_a_commit(g1)
    assert g1[0]['total'] == 3 * g1[0]['step'], g1
    job.release()
    assert job.finish() == 0
    # The survivors' output carries their new ranks.
    out = job.stdout().splitlines()
    for rank in (0, 1):
        assert any(l.startswith(f'[{rank}]<stdout>:{{') and '"gen": 1' in l and
                   f'"rank": {rank},' in l for l in out), out


@case
def test_worker_lost_during_reset(c, jobs):
    # Rank 2 fails; while the others re-form, rank 1 leaves (SIGTERM): rank 0 gives up the
    # half-formed generation 1 and joins generation 2 with a new worker in rank 1's slot.
    # Rank 1's leave and rank 2's exit reach chorusrun in one decision or in two, so the
    # generation that adds the new worker is 2 or 3.
    job = start(jobs, c, 'inreset', '127.0.0.1:2\nlocalhost:1\n',
                {'g0r2': 'exit:3', 'g0r1': 'term_in_reset'},
                ['-np', '3', '--min-np', '1'])
    g0 = job.wait_generation(0, 3)
    job.wait_for('a generation of 2 after the losses',
                 lambda: any(len(job.generation(g)) == 2 for g in (2, 3)))
    g = next(g for g in (2, 3) if len(job.generation(g)) == 2)
    joined = job.generation(g)
    assert ranks(joined) == [(0, 2, '127.0.0.1'), (1, 2, '127.0.0.1')], ranks(joined)
    assert pids(joined)[0] == pids(g0)[0] and pids(joined)[1] not in pids(g0), (g0, joined)
    assert_synced_on_a_commit(joined)
    job.release()
    assert job.finish() == 0
    err = job.stderr()
    # Rank 2's exit and rank 1's SIGTERM may reach chorusrun in either order (rank 2's exit
    # also shuts chorus down on the others, which starts their reset): two resets either way.
    assert 'rank 1 on 127.0.0.1 left after SIGTERM' in err, err
    assert 'rank 2 on localhost exited with code 3; localhost blacklisted' in err or \
        'rank 1 on localhost exited with code 3; localhost blacklisted' in err, err


@case
def test_survivor_held_while_forming_waits_for_the_joiners(c, jobs):
    # Rank 2 leaves (SIGTERM): generation 1 keeps ranks 0 and 1 and a joiner starts in the freed
    # slot. Rank 1 adopts generation 1, then leaves too, while rank 0 forms generation 1's world:
    # generation 2 holds rank 0 alone (below --min-np=2), so the world it was forming is refused
    # as stale. The joiners take 8 s to start: rank 0 must wait in its reset until they join,
    # keeping its process and its committed state, however long that takes within the elastic
    # timeout (not give up after a few seconds, failing and taking the job's state with it).
    # The two joiners start about a second apart (rank 1 leaves 1 s after adopting), so the
    # generation that adds the second (4) may supersede the one that adds the first (3) before
    # its world forms: the survivor then trains first in generation 4.
    job = start(jobs, c, 'heldforming', '127.0.0.1:1\nlocalhost:2\n',
                {'g0r2': 'term', 'g0r1': 'term_after_adopt', 'join_delay': 8},
                ['-np', '3', '--min-np', '2', '--max-np', '3'])
    g0 = job.wait_generation(0, 3)
    g3 = job.wait_generation_from(3, 2)
    assert ranks(g3)[:2] == [(0, len(g3), '127.0.0.1'), (1, len(g3), 'localhost')], ranks(g3)
    assert pids(g3)[0] == pids(g0)[0] and g3[0]['resets'] == 1, (g0, g3)
    assert pids(g3)[1] not in pids(g0), (g0, g3)
    assert_synced_on_a_commit(g3)
    assert g3[0]['step'] > 0, g3  # the survivor's committed state, not a fresh start
    job.release()
    assert job.finish() == 0
    err = job.stderr()
    assert ('chorusrun: generation 2: -localhost (rank 1 left after SIGTERM), size 2 -> 1, '
            'cause: rank 1 on localhost left after SIGTERM; on hold') in err, err
    assert 'exited with code' not in err and 'blacklisted' not in err, err


@case
def test_remote_sigterm_is_graceful(c, jobs):
    # A worker on a remote host (over ssh) that receives SIGTERM reaches chorusrun as ssh's
    # exit status 143: it leaves without blacklisting, and its slot is filled again.
    job = start(jobs, c, 'remote', 'remotehost:1\nlocalhost:1\n', {'g0r1': 'term'},
                ['-np', '2', '--network-interface', 'lo'], fake_ssh=True)
    g0 = job.wait_generation(0, 2)
    assert ranks(g0) == [(0, 2, 'localhost'), (1, 2, 'remotehost')], ranks(g0)
    g2 = job.wait_generation(2, 2)  # 1 holds the survivor (below --min-np), 2 adds the new one
    assert ranks(g2) == [(0, 2, 'localhost'), (1, 2, 'remotehost')], ranks(g2)
    job.release()
    assert job.finish() == 0
    err = job.stderr()
    assert 'rank 1 on remotehost left after SIGTERM' in err and 'blacklisted' not in err, err
    assert pids(g2)[0] == pids(g0)[0], (g0, g2)


def rogue_init(job, secret, generation):
    """A process that is not one of the job's workers calls the job's rendezvous (chorus init as
    rank 0 of 2 in generation `generation`'s scope); returns its (status, output)."""
    g0 = job.generation(0)[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith(('CHORUS_', 'HOROVOD_'))}
    env.update(CHORUS_RENDEZVOUS_ADDR=g0['rendezvous'], CHORUS_RENDEZVOUS_SECRET=secret,
               CHORUS_RENDEZVOUS_SCOPE=f'world/{generation}', CHORUS_RANK='0', CHORUS_SIZE='2',
               CHORUS_ELASTIC_GENERATION=str(generation), CHORUS_START_TIMEOUT_SECONDS='5')
    p = subprocess.run([sys.executable, '-c', 'import chorus.numpy as h; h.init()'],
                       capture_output=True, text=True, env=env, timeout=CASE_TIMEOUT)
    return p.returncode, p.stdout + p.stderr


@case
def test_rogue_rendezvous_calls_are_refused(c, jobs):
    # Calls without the job's secret, or of a generation the job has left, are refused with a
    # clear status; the job goes on untouched.
    job = start(jobs, c, 'rogue', 'localhost:2\n', {}, ['-np', '2'])
    g0 = job.wait_generation(0, 2)
    job.write_hosts('localhost:2\n127.0.0.1:1\n')
    job.wait_generation(1, 3)
    status, out = rogue_init(job, 'f' * 64, 1)
    assert status != 0 and 'wrong rendezvous secret' in out, out
    status, out = rogue_init(job, g0[0]['secret'], 0)
    assert status != 0 and 'stale generation 0: the job is at generation 1' in out, out
    job.release()
    assert job.finish() == 0
    assert 'generation 2' not in job.stderr(), job.stderr()
    g1 = job.generation(1)
    assert ranks(g1) == [(0, 3, 'localhost'), (1, 3, 'localhost'), (2, 3, '127.0.0.1')], g1


@case
def test_unreachable_remote_host_is_blacklisted(c, jobs):
    # ssh cannot reach a host discovery lists (the stand-in ssh exits 255 for hosts named
    # "down*"): its `ssh HOST true` check fails, the host is blacklisted with ssh named before
    # any worker is placed on it, and the job runs on the others.
    job = start(jobs, c, 'sshdown', 'downhost:1\nlocalhost:1\n', {'g0r0': 'exit:0'},
                ['-np', '1', '--network-interface', 'lo'], fake_ssh=True)
    g0 = job.wait_generation(0, 1)
    assert ranks(g0) == [(0, 1, 'localhost')], ranks(g0)
    assert job.finish() == 0
    err = job.stderr()
    assert ('chorusrun: cannot reach host downhost over ssh (ssh downhost true): ssh exited '
            'with code 255; downhost blacklisted') in err, err


@case
def test_output_filename_follows_ranks(c, jobs):
    # --output-filename DIR: rank r's files gather the output of whoever holds rank r in each
    # generation; nothing goes to the terminal.
    out_dir = tempfile.mkdtemp(prefix='elastic_output_')
    job = start(jobs, c, 'output', 'localhost:1\n', {}, ['-np', '1', '--output-filename', out_dir])
    g0 = job.wait_generation(0, 1)
    job.write_hosts('localhost:1\n127.0.0.1:1\n')
    g1 = job.wait_generation(1, 2)
    job.release()
    status = job.finish()
    assert status == 0, f'status {status}'

    def lines(rank, stream='stdout'):
        with open(os.path.join(out_dir, f'rank.{rank}', stream)) as f:
            return [json.loads(l) for l in f if l.startswith('{')]
    # Rank 0 is the same process in both generations; rank 1 is the worker generation 1 added.
    assert [(e['gen'], e['pid']) for e in lines(0)] == [(0, g0[0]['pid']), (1, g0[0]['pid'])], \
        lines(0)
    assert [(e['gen'], e['pid']) for e in lines(1)] == [(1, g1[1]['pid'])], lines(1)
    assert os.path.exists(os.path.join(out_dir, 'rank.1', 'stderr'))
    assert '<stdout>' not in job.stdout(), job.stdout()
    shutil.rmtree(out_dir)


def cpu_fraction(pid, seconds=1.0):
    """The share of one core process `pid` used (user + system, from /proc) over `seconds`."""
    def ticks():
        with open(f'/proc/{pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime
    hz = os.sysconf('SC_CLK_TCK')
    t0, c0 = time.monotonic(), ticks()
    time.sleep(seconds)
    return (ticks() - c0) / hz / (time.monotonic() - t0)


def assert_idle_then_sigterm(job, what):
    """chorusrun, waiting in state `what`, uses under 10% of a core and ends with 143 on
    SIGTERM."""
    share = cpu_fraction(job.proc.pid)
    assert share < 0.10, f'chorusrun used {share:.0%} of a core while {what}'
    job.proc.send_signal(signal.SIGTERM)
    status = job.finish()
    assert status == 143, f'status {status} after SIGTERM while {what}'
    assert job.stderr().splitlines()[-1] == (
        'chorusrun: job stopped: chorusrun received signal 15 (Terminated)'), job.stderr()


# Rank 0 is on 127.0.0.1 (sorted first), ranks 1-2 on localhost; rank 2 fails, localhost is
# blacklisted and one slot is left, below --min-np=2.
BELOW_MIN_NP_HOSTS = 'localhost:2\n127.0.0.1:1\n'
BELOW_MIN_NP_STOPPED = ('chorusrun: generation 1: -localhost (rank 2 exited with code 3, '
                        'blacklisted), size 3 -> 1, cause: rank 2 on localhost exited with code '
                        '3; localhost blacklisted; on hold: fewer than --min-np=2 workers')


@case
def test_below_min_np_after_failure_times_out(c, jobs):
    job = start(jobs, c, 'belowmin', BELOW_MIN_NP_HOSTS, {'g0r2': 'exit:3'},
                ['-np', '3', '--min-np', '2', '--max-np', '3', '--elastic-timeout', '1'])
    job.wait_generation(0, 3)
    status = job.finish()
    err = job.stderr()
    assert status == 1, f'status {status}'
    assert BELOW_MIN_NP_STOPPED in err, err
    assert err.splitlines()[-1].startswith(
        'chorusrun: elastic job failed: fewer than --min-np=2 slots for longer than '
        '--elastic-timeout=1 s (1 available after generation 1)'), err


@case
def test_waiting_below_min_np_sleeps_and_takes_sigterm(c, jobs):
    job = start(jobs, c, 'belowminterm', BELOW_MIN_NP_HOSTS, {'g0r2': 'exit:3'},
                ['-np', '3', '--min-np', '2', '--max-np', '3', '--elastic-timeout', '60'])
    job.wait_for('the stopped generation', lambda: BELOW_MIN_NP_STOPPED in job.stderr())
    assert_idle_then_sigterm(job, 'waiting below --min-np')


@case
def test_waiting_for_first_discovery_sleeps_and_takes_sigterm(c, jobs):
    script = '#!/bin/sh\ntouch {dir}/discovering\nexec sleep 60\n'
    job = start(jobs, c, 'discwait', '', {}, ['-np', '1'], script=script)
    job.wait_for('the discovery run', lambda: os.path.exists(job.path('discovering')))
    assert_idle_then_sigterm(job, 'waiting for the first discovery')


@case
def test_waiting_for_a_released_worker_sleeps_and_takes_sigterm(c, jobs):
    # Rank 1 is busy (no commit), so when its host leaves discovery it cannot leave yet:
    # chorusrun waits for it (up to 60 s) while rank 0 goes on alone.
    job = start(jobs, c, 'released', 'localhost:1\n127.0.0.1:1\n', {'g0r1': 'sleep'},
                ['-np', '2', '--min-np', '1'])
    job.wait_generation(0, 2)
    job.write_hosts('127.0.0.1:1\n')
    job.wait_generation(1, 1)
    assert_idle_then_sigterm(job, 'waiting for a released worker')


CASES = [test_grow_then_shrink, test_failure_blacklists_host, test_every_host_blacklisted,
         test_min_np_not_reachable, test_reset_limit_1_ends_the_job,
         test_reset_limit_2_allows_two_resets, test_sigterm_is_not_blacklisted,
         test_discovery_garbage_keeps_last_good_set, test_first_discovery_failure_is_fatal,
         test_mpi_with_elastic_flags_is_exit_2, test_blacklisted_host_readmitted_after_cooldown,
         test_fixed_hosts_with_min_np, test_sigint_is_forwarded,
         test_hanging_discovery_does_not_block_the_loop, test_max_np_caps_the_world,
         test_silent_worker_is_killed, test_rank_0_killed, test_worker_lost_during_reset,
         test_survivor_held_while_forming_waits_for_the_joiners,
         test_remote_sigterm_is_graceful, test_rogue_rendezvous_calls_are_refused,
         test_unreachable_remote_host_is_blacklisted, test_output_filename_follows_ranks,
         test_below_min_np_after_failure_times_out,
         test_waiting_below_min_np_sleeps_and_takes_sigterm,
         test_waiting_for_first_discovery_sleeps_and_takes_sigterm,
         test_waiting_for_a_released_worker_sleeps_and_takes_sigterm]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chorusrun', required=True)
    parser.add_argument('-k', help='run only the cases whose name contains this')
    args = parser.parse_args()
    for run in CASES:
        if args.k is None or args.k in run.__name__:
            run(args.chorusrun)
    print(f'{len(failures)} failed' if failures else 'all passed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
