#!/usr/bin/python3
"""Multi-host tests of chorusrun on the test cluster (cluster.py, README.md): real ssh to real
sshds on hosts n1..n3 with their own addresses, hostnames and links, in both launch modes.

Each run builds one cluster, runs the cases named on the command line in it (each case leaves
the cluster as it found it: links up, no shaping, every sshd running), tears it down and checks
that nothing is left. It prints one line per case with its time, and the cluster's setup and
teardown times. The workers are /usr/bin/python3 with the built chorus package (PYTHONPATH):
every host shares this machine's file system, so the paths are the same everywhere.

UCX can use shared memory between the namespaces of one machine, which a cut link would not
stop, so the workers get UCX_TLS=tcp,self. chorusrun forwards only some variables to remote workers today (CHORUS_*,
HOROVOD_*, NCCL_*, PATH, LD_LIBRARY_PATH, PYTHONPATH), so the command itself sets it
(`/usr/bin/env UCX_TLS=tcp,self ...`); the env_* cases check the forwarding itself.

Usage: multihost_e2e.py --chorusrun PATH [--probe PATH] CASE...
Exits 0 when every case passes, 1 when one fails, 77 when this machine cannot run the cluster
(the reason on stdout).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster as cl  # noqa: E402

SUPPORT = os.path.join(os.path.dirname(HERE), 'support')
WORKER = os.path.join(HERE, 'cluster_worker.py')
HIERARCHICAL_JOB = os.path.join(SUPPORT, 'hierarchical_job.py')
HISTORY_WORKER = os.path.join(HERE, 'elastic_history_worker.py')
ELASTIC_WORKER = os.path.join(os.path.dirname(HERE), 'elastic', 'elastic_worker.py')
PYTHON = '/usr/bin/python3'
UCX_TCP = ['/usr/bin/env', 'UCX_TLS=tcp,self']  # see the module comment
JOB_TIMEOUT = 120  # seconds; no case waits longer for anything
# A value that survives only an exact forwarding: spaces, both quotes, a $ and a ;.
TEST_VALUE = 'two  words "dq" \'sq\' $HOME;x'


class Job:
    """One chorusrun run, started as the launch machine of the cluster; output in its own
    directory."""

    def __init__(self, ctx, name, argv, env=None, directory=None):
        self.name = name
        self.dir = directory or tempfile.mkdtemp(prefix=f'cluster_{name}_')
        self.out = open(self.path('stdout'), 'w')
        self.err = open(self.path('stderr'), 'w')
        self.argv = argv
        self.started = time.monotonic()
        self.proc = subprocess.Popen(ctx.cluster.launcher_argv(argv), env=env or ctx.env,
                                     stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        ctx.jobs.append(self)

    def path(self, name):
        return os.path.join(self.dir, name)

    def stdout(self):
        with open(self.path('stdout')) as f:
            return f.read()

    def stderr(self):
        with open(self.path('stderr')) as f:
            return f.read()

    def last_stderr_line(self):
        lines = [line for line in self.stderr().splitlines() if line.strip()]
        return lines[-1] if lines else ''

    def wait(self, timeout=JOB_TIMEOUT):
        """chorusrun's exit status; TimeoutError when it runs longer than `timeout`."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f'chorusrun still running after {timeout} s') from None

    def wait_for(self, what, predicate, timeout=JOB_TIMEOUT):
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None and not predicate():
                raise AssertionError(f'chorusrun ended (status {self.proc.returncode}) before '
                                     f'{what}')
            if time.monotonic() > deadline:
                raise TimeoutError(f'timed out after {timeout} s waiting for {what}')
            time.sleep(0.05)

    def close(self):
        """Stops chorusrun if it still runs (SIGTERM, then SIGKILL to it and everything it
        started here), and closes the output files."""
        if self.proc.poll() is None:
            family = descendants(self.proc.pid)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for pid in [self.proc.pid] + family + descendants(self.proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait()
        self.out.close()
        self.err.close()

    def describe(self):
        return (f'$ {" ".join(self.argv)}\nstatus {self.proc.returncode}\n'
                f'--- stdout\n{self.stdout()[-6000:]}--- stderr\n{self.stderr()[-6000:]}')


def descendants(pid):
    """The pids of every process below `pid` (from /proc), children first."""
    children = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open(f'/proc/{entry}/stat') as f:
                    ppid = int(f.read().rsplit(')', 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Context:
    def __init__(self, cluster, args):
        self.cluster = cluster
        self.chorusrun = args.chorusrun
        self.probe = args.probe
        self.cut_window = args.cut_window
        self.jobs = []
        # Open MPI's ranks spin in their waits unless told to yield; five of them on a 2-core
        # machine would starve each other.
        self.env = cluster.env(UCX_TLS='tcp,self', OMPI_MCA_mpi_yield_when_idle='1',
                               PYTHONDONTWRITEBYTECODE='1')


def hosts_arg(hosts):
    return ','.join(f'{h}:{s}' for h, s in hosts)


def expected_layout(hosts, np):
    """Per rank: host, local_rank, local_size, cross_rank, cross_size (horovodrun's layout:
    ranks fill the hosts in order; cross numbers among the hosts with that local_rank)."""
    ranks = []
    for host, slots in hosts:
        for i in range(slots):
            if len(ranks) < np:
                ranks.append({'host': host, 'local_rank': i})
    for r in ranks:
        r['local_size'] = sum(1 for o in ranks if o['host'] == r['host'])
        with_lr = []
        for o in ranks:
            if o['local_rank'] == r['local_rank'] and o['host'] not in with_lr:
                with_lr.append(o['host'])
        r['cross_rank'] = with_lr.index(r['host'])
        r['cross_size'] = len(with_lr)
    return ranks


def worker_reports(job):
    """{rank: report} from the `[r]<stdout>:CLUSTER_WORKER {...}` lines; the tag's rank must be
    the report's, and every stdout line must carry a rank tag."""
    reports = {}
    for line in job.stdout().splitlines():
        m = re.match(r'^\[(\d+)\]<stdout>:(.*)$', line)
        assert m, f'untagged stdout line: {line!r}'
        if m.group(2).startswith('CLUSTER_WORKER '):
            report = json.loads(m.group(2)[len('CLUSTER_WORKER '):])
            assert report['rank'] == int(m.group(1)), f'[{m.group(1)}] tags rank {report}'
            assert report['rank'] not in reports, f'rank {report["rank"]} reported twice'
            reports[report['rank']] = report
    return reports


def check_reports(job, hosts, np, gloo, forwarded=None, interface=True):
    """Every rank's numbers, host and results against what the host list implies; `gloo` and
    `interface` as given to mode_flags."""
    reports = worker_reports(job)
    assert sorted(reports) == list(range(np)), f'reports from ranks {sorted(reports)}'
    layout = expected_layout(hosts, np)
    for r, want in enumerate(layout):
        got = reports[r]
        for key in ('local_rank', 'local_size', 'cross_rank', 'cross_size'):
            assert got[key] == want[key], f'rank {r}: {key} {got[key]}, expected {want[key]}'
        assert got['size'] == np, f'rank {r}: size {got["size"]}'
        assert got['hostname'] == want['host'], (
            f'rank {r} runs on {got["hostname"]}, expected {want["host"]}')
        if gloo:
            assert got['chorus_hostname'] == want['host'], got
        assert got['allreduce'] == [np * (np + 1) / 2 * k for k in (1, 2, 3)], got['allreduce']
        assert got['allgather'] == [[i, i] for i in range(np) for _ in range(i + 1)], \
            got['allgather']
        assert got['broadcast'] == [10 * (np - 1) + 7], got['broadcast']
        assert got['ucx_tls'] == 'tcp,self', f'rank {r}: UCX_TLS={got["ucx_tls"]!r}'
        # --gloo --network-interface: UCX's connections (the data moved above) use that
        # interface alone, as Gloo's do in horovodrun.
        devices = cl.BRIDGE if gloo and interface else None
        assert got['ucx_net_devices'] == devices, \
            f'rank {r}: UCX_NET_DEVICES={got["ucx_net_devices"]!r}, expected {devices!r}'
        for name, value in (forwarded or {}).items():
            assert got[name] == value, f'rank {r}: {name} = {got[name]!r}, expected {value!r}'


def mode_flags(gloo, interface=True):
    if not gloo:
        return []
    return ['--gloo'] + (['--network-interface', cl.BRIDGE] if interface else [])


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# --- 1. both launch modes across three hosts ------------------------------------------------

LAUNCH_HOSTS = [('n1', 2), ('n2', 1), ('n3', 2)]


def launch(ctx, name, gloo):
    job = Job(ctx, name, [ctx.chorusrun, '-np', '5', '-H', hosts_arg(LAUNCH_HOSTS)] +
              mode_flags(gloo) + UCX_TCP + [PYTHON, WORKER])
    status = job.wait()
    assert status == 0, f'status {status}'
    check_reports(job, LAUNCH_HOSTS, 5, gloo)


@case
def launch_mpi(ctx):
    launch(ctx, 'launch_mpi', gloo=False)


@case
def launch_gloo(ctx):
    launch(ctx, 'launch_gloo', gloo=True)


# --- 2. the caller's environment reaches remote ranks ---------------------------------------

def env_forwarding(ctx, name, gloo):
    hosts = [('n1', 2), ('n2', 1)]
    env = dict(ctx.env, CLUSTER_TEST_VAR=TEST_VALUE)  # UCX_TLS too: no `env` prefix here
    job = Job(ctx, name, [ctx.chorusrun, '-np', '3', '-H', hosts_arg(hosts)] + mode_flags(gloo) +
              [PYTHON, WORKER], env=env)
    status = job.wait()
    assert status == 0, f'status {status}'
    check_reports(job, hosts, 3, gloo, forwarded={'test_var': TEST_VALUE})


@case
def env_mpi(ctx):
    env_forwarding(ctx, 'env_mpi', gloo=False)


@case
def env_gloo(ctx):
    env_forwarding(ctx, 'env_gloo', gloo=True)


# --- 3. the rendezvous address remote workers dial ------------------------------------------

@case
def rendezvous_default(ctx):
    # --gloo with no interface flag: the workers must still reach the rendezvous.
    hosts = [('n1', 1), ('n2', 1), ('n3', 1)]
    job = Job(ctx, 'rendezvous_default', [ctx.chorusrun, '-np', '3', '-H', hosts_arg(hosts),
                                          '--gloo'] + UCX_TCP + [PYTHON, WORKER])
    status = job.wait()
    assert status == 0, f'status {status}'
    check_reports(job, hosts, 3, gloo=True, interface=False)


def probe(ctx, argv, host=None):
    """rendezvous_address_probe's (status, stdout, stderr), run on the launch machine or, with
    `host`, on that host."""
    assert ctx.probe, '--probe PATH is needed for this case'
    c = ctx.cluster
    full = c.host_argv(host, [ctx.probe] + argv) if host else c.launcher_argv([ctx.probe] + argv)
    p = subprocess.run(full, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


@case
def rendezvous_address(ctx):
    # From the launch machine every host is reached through the bridge.
    status, out, err = probe(ctx, ['n1', 'n2', 'n3'])
    assert (status, out) == (0, f'n1 {cl.BRIDGE_ADDRESS}\nn2 {cl.BRIDGE_ADDRESS}\n'
                                f'n3 {cl.BRIDGE_ADDRESS}\n'), (status, out, err)
    # From n1, n2 is reached through n1's own address.
    status, out, err = probe(ctx, ['n2', 'n3'], host='n1')
    assert (status, out) == (0, 'n2 198.18.0.11\nn3 198.18.0.11\n'), (status, out, err)
    # A named interface is honoured, even one the hosts cannot reach.
    status, out, err = probe(ctx, ['--network-interface', cl.BRIDGE, 'n2'])
    assert (status, out) == (0, f'n2 {cl.BRIDGE_ADDRESS}\n'), (status, out, err)
    status, out, err = probe(ctx, ['--network-interface', 'lo', 'n2'])
    assert (status, out) == (0, 'n2 127.0.0.1\n'), (status, out, err)
    # Errors name the host or interface and say how to choose.
    status, out, err = probe(ctx, ['--network-interface', 'nosuch0', 'n2'])
    assert status == 1 and 'nosuch0 has no IPv4 address' in err and \
        f'{cl.BRIDGE} {cl.BRIDGE_ADDRESS}/24' in err, err
    status, out, err = probe(ctx, ['203.0.113.5'], host='n1')  # n1 has no default route
    assert status == 1 and 'host 203.0.113.5 resolves to 203.0.113.5, and this machine has no ' \
        'route to it' in err and '--network-interface (this machine\'s: ' in err, err
    assert '198.18.0.11/24' in err, err
    status, out, err = probe(ctx, ['nosuchhost'], host='n1')
    assert status == 1 and 'cannot resolve host nosuchhost' in err and \
        '--network-interface' in err, err


# --- 4. a host that refuses ssh ------------------------------------------------------------

def ssh_refused(ctx, name, gloo):
    ctx.cluster.stop_sshd('n2')
    job = Job(ctx, name, [ctx.chorusrun, '-np', '3', '-H', 'n1:2,n2:1'] + mode_flags(gloo) +
              UCX_TCP + [PYTHON, WORKER])
    # A refused connection is known at once: well before the 30 s start timeout.
    status = job.wait(timeout=25)
    elapsed = time.monotonic() - job.started
    assert status != 0, f'status {status}'
    assert 'CLUSTER_WORKER' not in job.stdout(), 'workers ran'
    last = job.last_stderr_line()
    assert last.startswith('chorusrun:') and 'n2' in last, f'last stderr line: {last!r}'
    print(f'  {name}: status {status} after {elapsed:.1f} s: {last}')
    return last


@case
def ssh_refused_gloo(ctx):
    last = ssh_refused(ctx, 'ssh_refused_gloo', gloo=True)
    assert last == ('chorusrun: error: cannot reach host n2 over ssh (ssh n2 true): '
                    'ssh: connect to host n2 port 22: Connection refused'), last


@case
def ssh_refused_mpi(ctx):
    last = ssh_refused(ctx, 'ssh_refused_mpi', gloo=False)
    assert last == ('chorusrun: error: cannot reach host n2 over ssh (ssh n2 true): '
                    'ssh: connect to host n2 port 22: Connection refused'), last


# --- 5. network cuts and signals over real ssh -----------------------------------------------

def steps(job):
    """{rank: last step} from the CLUSTER_STEP lines."""
    last = {}
    for m in re.finditer(r'^\[\d+\]<stdout>:CLUSTER_STEP (\d+) (\d+) \d+$', job.stdout(), re.M):
        last[int(m.group(1))] = int(m.group(2))
    return last


def cut_fixed(ctx, name, gloo, env=None):
    """A fixed-size job loses n3 (rank 2) to a cut link: it must end non-zero within 10 s of
    the cut, naming the lost rank and host. Returns (status, last stderr line, the processes
    chorusrun had started just before the cut)."""
    job = Job(ctx, name, [ctx.chorusrun, '-np', '3', '-H', 'n1:1,n2:1,n3:1'] + mode_flags(gloo) +
              UCX_TCP + [PYTHON, WORKER, '--train', '100'], env=env)
    job.wait_for('5 steps on every rank',
                 lambda: len(steps(job)) == 3 and min(steps(job).values()) >= 5)
    # Each rank runs where the -H list puts it (rank 2 on n3): what chorusrun names.
    check_reports(job, [('n1', 1), ('n2', 1), ('n3', 1)], 3, gloo)
    family = descendants(job.proc.pid)
    ctx.cluster.cut('n3')
    cut_at = time.monotonic()
    try:
        status = job.wait(timeout=ctx.cut_window)  # to see what happens; the bound is 10 s
    except TimeoutError:
        status = None
    elapsed = time.monotonic() - cut_at
    last = job.last_stderr_line()
    print(f'  {name}: status {status} {elapsed:.1f} s after the cut; last stderr line: {last}')
    assert status is not None, f'still running {elapsed:.0f} s after the cut'
    assert status != 0 and elapsed <= 10, f'status {status} after {elapsed:.1f} s'
    assert 'rank 2' in last and 'n3' in last, f'last stderr line: {last!r}'
    return status, last, family


def left_running(pids):
    """Those of `pids` still running (zombies count as ended)."""
    alive = []
    for pid in pids:
        try:
            with open(f'/proc/{pid}/stat') as f:
                if f.read().rsplit(')', 1)[1].split()[0] != 'Z':
                    alive.append(pid)
        except OSError:
            pass
    return alive


@case
def cut_gloo(ctx):
    cut_fixed(ctx, 'cut_gloo', gloo=True)


@case
def cut_mpi(ctx):
    # The ranks on n1 and n2 notice within CHORUS_NO_PROGRESS_TIMEOUT_SECONDS (forwarded to
    # them by chorusrun) and call MPI_Abort; mpirun cannot reach n3's daemon to end the job, so
    # chorusrun stops it and names the rank the reports waited on that never reported.
    status, last, family = cut_fixed(ctx, 'cut_mpi', gloo=False,
                                     env=dict(ctx.env, CHORUS_NO_PROGRESS_TIMEOUT_SECONDS='3'))
    assert status == 75, f'status {status}'
    # Both waiting ranks report; should mpirun's abort kill one of them before its own report,
    # that rank cannot be told from rank 2 and is named too (launcher/mpi/no_progress_report.h).
    cause = (r'(rank 2 on n3 presumed lost: ranks 0, 1 saw no progress for 3s waiting on it|'
             r'rank 1 on n2 or rank 2 on n3 presumed lost: rank 0 saw no progress for 3s waiting '
             r'on them|rank 0 on n1 or rank 2 on n3 presumed lost: rank 1 saw no progress for 3s '
             r'waiting on them)')
    assert re.fullmatch(r'chorusrun: job failed \((mpirun exit status 75|exit status 75, mpirun '
                        r'stopped)\): ' + cause + r' \(CHORUS_NO_PROGRESS_TIMEOUT_SECONDS\)',
                        last), last
    # mpirun and the ssh clients it started (the one to n3 among them) are gone.
    assert not left_running(family), f'left running: {left_running(family)}'


@case
def cut_mpi_sigterm(ctx):
    # No bound (CHORUS_NO_PROGRESS_TIMEOUT_SECONDS=0): after the cut the job waits forever, and
    # so does mpirun when told to stop, waiting for n3's daemon. SIGTERM to chorusrun must end
    # it all the same: passed on to mpirun, then SIGKILL after the grace (3 s).
    job = Job(ctx, 'cut_mpi_sigterm', [ctx.chorusrun, '-np', '3', '-H', 'n1:1,n2:1,n3:1'] +
              UCX_TCP + [PYTHON, WORKER, '--train', '100'],
              env=dict(ctx.env, CHORUS_NO_PROGRESS_TIMEOUT_SECONDS='0'))
    job.wait_for('5 steps on every rank',
                 lambda: len(steps(job)) == 3 and min(steps(job).values()) >= 5)
    family = descendants(job.proc.pid)
    ctx.cluster.cut('n3')
    time.sleep(2)  # the ranks are stuck waiting on rank 2
    assert job.proc.poll() is None, f'chorusrun ended (status {job.proc.returncode}) by itself'
    job.proc.send_signal(signal.SIGTERM)
    sent_at = time.monotonic()
    status = job.wait(timeout=ctx.cut_window)
    elapsed = time.monotonic() - sent_at
    last = job.last_stderr_line()
    print(f'  cut_mpi_sigterm: status {status} {elapsed:.1f} s after SIGTERM; last stderr line: '
          f'{last}')
    # "At once" against "never": the grace is 3 s.
    assert elapsed <= 10, f'{elapsed:.1f} s after SIGTERM'
    assert status == 128 + signal.SIGTERM, f'status {status}'
    assert last == ('chorusrun: job stopped: chorusrun received signal 15 (Terminated); mpirun '
                    'had not ended 3s later and was killed'), last
    assert not left_running(family), f'left running: {left_running(family)}'


def elastic_job(ctx, name, hosts_text, argv):
    """An elastic chorusrun whose discovery script cats <job dir>/hosts (see write_hosts)."""
    d = tempfile.mkdtemp(prefix=f'cluster_{name}_')
    with open(os.path.join(d, 'hosts'), 'w') as f:
        f.write(hosts_text)
    script = os.path.join(d, 'discover.sh')
    with open(script, 'w') as f:
        f.write(f'#!/bin/sh\ncat {os.path.join(d, "hosts")}\n')
    os.chmod(script, 0o755)
    return Job(ctx, name, [ctx.chorusrun, '--host-discovery-script', script,
                           '--network-interface', cl.BRIDGE] + argv,
               env=dict(ctx.env, CHORUS_ELASTIC_DISCOVERY_INTERVAL='0.2'), directory=d)


def write_hosts(job, text):
    tmp = job.path('hosts.tmp')
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, job.path('hosts'))


def elastic_steps(job):
    """{rank: (size, last batch)} from the CLUSTER_ELASTIC_STEP lines, in output order."""
    last = {}
    for m in re.finditer(r'<stdout>:CLUSTER_ELASTIC_STEP (\d+) (\d+) (\d+) \S+$', job.stdout(),
                         re.M):
        last[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    return last


@case
def cut_elastic(ctx):
    # An elastic job whose remote host n3 is cut mid-training while discovery still lists it
    # (for 5 s): it goes on at size 2, and every committed batch is trained exactly once.
    batches = 100
    job = elastic_job(ctx, 'cut_elastic', 'n1:1\nn2:1\nn3:1\n',
                      ['-np', '3', '--min-np', '2', '--max-np', '3'] + UCX_TCP +
                      [PYTHON, HISTORY_WORKER, '--batches', str(batches)])
    job.wait_for('batch 20 at size 3', lambda: any(
        size == 3 and batch >= 20 for size, batch in elastic_steps(job).values()), timeout=60)
    ctx.cluster.cut('n3')
    cut_at = time.monotonic()
    job.wait_for('a step at size 2', lambda: any(
        size == 2 for size, _ in elastic_steps(job).values()), timeout=60)
    resumed = time.monotonic() - cut_at
    print(f'  cut_elastic: training at size 2 {resumed:.1f} s after the cut')
    for line in job.stderr().splitlines():
        if line.startswith('chorusrun: generation'):
            print(f'  cut_elastic: {line}')
    time.sleep(max(0.0, 5 - (time.monotonic() - cut_at)))
    write_hosts(job, 'n1:1\nn2:1\n')
    status = job.wait()
    assert status == 0, f'status {status}'
    done = [line for line in job.stdout().splitlines() if 'CLUSTER_ELASTIC_DONE ' in line]
    assert len(done) == 1, done
    history = json.loads(done[0].split('CLUSTER_ELASTIC_DONE ', 1)[1])
    assert [b for b, _ in history] == list(range(batches)), 'batches trained twice or skipped'
    sizes = [s for _, s in history]
    assert sizes[0] == 3 and sizes[-1] == 2 and sizes == sorted(sizes, reverse=True), sizes
    assert 'n3' in job.stderr(), job.stderr()


@case
def remote_sigterm(ctx):
    # An elastic worker on n2 (over real ssh) gets SIGTERM: it leaves gracefully (no blacklist)
    # and its slot is filled again: generation 1 holds the survivor (alone it is below
    # --min-np = 2), generation 2 adds the new worker on n2 once it is ready. The worker is
    # test/elastic/elastic_worker.py; its directory (schedule, events, release) is the test's,
    # passed as UCX_TLS is.
    d = tempfile.mkdtemp(prefix='cluster_remote_sigterm_events_')
    with open(os.path.join(d, 'schedule.json'), 'w') as f:
        json.dump({'g0r1': 'term'}, f)
    job = elastic_job(ctx, 'remote_sigterm', 'n1:1\nn2:1\n',
                      ['-np', '2'] + UCX_TCP + [f'ELASTIC_TEST_DIR={d}', PYTHON, ELASTIC_WORKER])

    def generation(g):
        try:
            with open(os.path.join(d, 'events')) as f:
                events = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []
        return sorted((e for e in events if e['gen'] == g), key=lambda e: e['rank'])

    try:
        job.wait_for('generation 0 with 2 workers', lambda: len(generation(0)) >= 2, timeout=30)
        assert [(e['rank'], e['host']) for e in generation(0)] == [(0, 'n1'), (1, 'n2')], \
            generation(0)
        job.wait_for('generation 2 with 2 workers', lambda: len(generation(2)) >= 2,
                     timeout=30)
        assert [(e['rank'], e['host']) for e in generation(2)] == [(0, 'n1'), (1, 'n2')], \
            generation(2)
        assert generation(2)[0]['pid'] == generation(0)[0]['pid'], (generation(0), generation(2))
        open(os.path.join(d, 'release'), 'w').close()
        status = job.wait(timeout=30)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    err = job.stderr()
    assert status == 0, f'status {status}'
    assert 'rank 1 on n2 left after SIGTERM' in err and 'blacklisted' not in err, err


# --- 6. hierarchical collectives across real hosts -----------------------------------------

def hierarchical(ctx, name, hosts, gloo):
    """test/support/hierarchical_job.py with --hierarchical-allreduce/-allgather; its results
    checked against the exact ones (integers, min, max and allgathers bit for bit, floats within
    the summation-order bound), and rank 0's line: the hierarchy, or the warning of a layout whose
    hosts run different numbers of ranks."""
    np = sum(slots for _, slots in hosts)
    env = dict(ctx.env, CHORUS_PIPELINE_CHUNK_BYTES='65536')
    out_dir = tempfile.mkdtemp(prefix=f'cluster_{name}_out_')
    try:
        job = Job(ctx, name,
                  [ctx.chorusrun, '-np', str(np), '-H', hosts_arg(hosts)] + mode_flags(gloo) +
                  ['--hierarchical-allreduce', '--hierarchical-allgather', '--log-level', 'info'] +
                  UCX_TCP + [PYTHON, HIERARCHICAL_JOB, 'run', out_dir], env=env)
        status = job.wait(timeout=240)
        assert status == 0, f'status {status}'
        lines = job.stdout().count('HIERARCHICAL_JOB rank')
        assert lines == np, f'{lines} ranks reported'
        err = job.stderr()
        said = [line for line in err.splitlines() if 'hierarchical over' in line]
        warned = [line for line in err.splitlines() if 'cannot run hierarchically' in line]
        if len({slots for _, slots in hosts}) == 1:
            shape = f'{len(hosts)} hosts x {hosts[0][1]} ranks'
            assert len(said) == 1 and not warned and '[chorus 0/0 INFO' in said[0] and \
                f'hierarchical over {shape}' in said[0], f'rank 0 does not say "{shape}": {said}'
        else:
            counts = ', '.join(str(slots) for _, slots in hosts)
            assert not said and len(warned) == 1 and '[chorus 0/0 WARNING' in warned[0] and \
                f'its {len(hosts)} hosts run {counts} of its {np} ranks' in warned[0], \
                f'not one warning from rank 0: {warned}'
        sys.path.insert(0, SUPPORT)
        import hierarchical_job  # imports torch: only the cases that need it
        problems = hierarchical_job.check(out_dir, np)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    assert not problems, '; '.join(problems[:10])


@case
def hierarchical_gloo_2x2(ctx):
    hierarchical(ctx, 'hierarchical_gloo_2x2', [('n1', 2), ('n2', 2)], gloo=True)


@case
def hierarchical_mpi_2x2(ctx):
    hierarchical(ctx, 'hierarchical_mpi_2x2', [('n1', 2), ('n2', 2)], gloo=False)


@case
def hierarchical_gloo_3x2(ctx):
    hierarchical(ctx, 'hierarchical_gloo_3x2', [('n1', 2), ('n2', 2), ('n3', 2)], gloo=True)


@case
def hierarchical_mpi_3x2(ctx):
    hierarchical(ctx, 'hierarchical_mpi_3x2', [('n1', 2), ('n2', 2), ('n3', 2)], gloo=False)


@case
def hierarchical_fallback_gloo(ctx):
    hierarchical(ctx, 'hierarchical_fallback_gloo', [('n1', 2), ('n2', 1)], gloo=True)


@case
def hierarchical_fallback_mpi(ctx):
    hierarchical(ctx, 'hierarchical_fallback_mpi', [('n1', 2), ('n2', 1)], gloo=False)


# --- running --------------------------------------------------------------------------------

def restore(c):
    """Every link up and unshaped, every sshd running: the next case starts from a clean
    cluster."""
    for h in c.hosts:
        c.heal(h.name)
        c.unshape(h.name)
        c.start_sshd(h.name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--chorusrun', required=True)
    parser.add_argument('--probe', help='rendezvous_address_probe (case rendezvous_address)')
    parser.add_argument('--cut-window', type=float, default=30,
                        help='cut_gloo, cut_mpi, cut_mpi_sigterm: how long to watch chorusrun '
                             'after the cut (or the SIGTERM) before stopping it (seconds)')
    parser.add_argument('cases', nargs='+', choices=sorted(CASES))
    args = parser.parse_args()
    args.chorusrun = os.path.abspath(args.chorusrun)
    args.probe = args.probe and os.path.abspath(args.probe)
    reason = cl.unavailable_reason()
    if reason:
        print(f'SKIP: {reason}')
        return cl.SKIP_STATUS
    failures = []
    with cl.Cluster(3) as c:
        print(f'cluster of {len(c.hosts)} hosts set up in {c.setup_seconds:.2f} s', flush=True)
        for name in args.cases:
            ctx = Context(c, args)
            began = time.monotonic()
            try:
                CASES[name](ctx)
                verdict = 'PASS'
            except (AssertionError, TimeoutError, cl.ClusterError) as e:
                verdict = f'FAIL: {e}'
                failures.append(name)
                for job in ctx.jobs:
                    job.close()
                    print(job.describe())
            finally:
                for job in ctx.jobs:
                    job.close()
                    shutil.rmtree(job.dir, ignore_errors=True)
                restore(c)
            print(f'{verdict.split(":")[0]} {name} ({time.monotonic() - began:.1f} s)'
                  f'{verdict[4:] if verdict != "PASS" else ""}', flush=True)
    print(f'cluster torn down in {c.teardown_seconds:.2f} s')
    left = cl.leftovers()
    if left:
        print(f'FAIL: left behind: {", ".join(left)}')
        failures.append('teardown')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
