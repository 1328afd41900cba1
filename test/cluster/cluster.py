#!/usr/bin/python3
"""A multi-host test cluster on one Linux machine: hosts are network namespaces on a bridge,
each with its own address, hostname and sshd. A module for tests and a command line.

What it builds (README.md next to this file has the why and the by-hand use):
- a bridge `chcl0` in the root namespace, 198.18.0.1/24 (198.18.0.0/15 is reserved for network
  test benches, RFC 2544); no route leads anywhere else, nothing is forwarded or NATed, so the
  cluster's traffic never leaves this machine;
- per host nK (K = 1..N): a network namespace `chcl-nK` whose interface `chcl0` (a veth whose
  other end, `chcl-nK`, is a port of the bridge) has 198.18.0.(10+K); its sshd runs there on
  port 22 in a UTS namespace of its own (hostname nK) and a mount namespace of its own (its own
  /etc/hosts and /run), so whatever ssh starts on nK sees the host that nK would be;
- in the test's own temporary directory: the client key, authorized_keys, the host keys,
  known_hosts, the ssh client configuration, a `bin/ssh` that runs /usr/bin/ssh with that
  configuration (-F), the hosts files, each sshd's configuration and log. Nothing is written to
  /etc or to the user's ~/.ssh.

Names: the launch machine (the root namespace) sees the cluster's names only in commands run
through `Cluster.launcher_argv` (a private mount namespace with a generated hosts file over
/etc/hosts) with `Cluster.env()` (PATH starts with the `ssh` above, which chorusrun and mpirun
find on PATH).

One cluster at a time per machine: an abstract unix socket is the lock (released when its
holders die, leaving no file). Whoever holds it removes, before building, whatever a crashed
run left (`sweep`: the namespaces, links and processes named with the `chcl` prefix). Teardown
runs on leaving the `with` block, at exit, on SIGTERM/SIGHUP, and, when the test process is
killed outright, in a watchdog process that holds the lock with it and tears down when the
test's end of a pipe closes without a word.

Thread-safety: a Cluster is used from one thread (its signal handlers need the main thread).
"""
import argparse
import atexit
import json
import os
import pwd
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PREFIX = 'chcl'                 # every namespace and link the cluster makes starts with it
BRIDGE = 'chcl0'                # the bridge, and each host's interface inside its namespace
SUBNET = '198.18.0'             # /24 of the reserved 198.18.0.0/15
BRIDGE_ADDRESS = SUBNET + '.1'
LOCK_NAME = '\0chorus-test-cluster'
STATE_FILE = '/run/chorus-test-cluster.json'
SKIP_STATUS = 77                # ctest SKIP_RETURN_CODE of the tests that use the cluster
SSHD = '/usr/sbin/sshd'
TOOLS = ('ip', 'tc', 'unshare', 'nsenter', 'mount', 'ssh', 'ssh-keygen')
MAX_HOSTS = 200


class ClusterError(Exception):
    """The cluster could not do what was asked; the message says what and why."""


class Unavailable(ClusterError):
    """This machine cannot run the cluster (not root, tools missing, no namespaces)."""


def unavailable_reason():
    """Why this machine cannot run the cluster, or None when it can."""
    if os.geteuid() != 0:
        return 'the test cluster needs root (network namespaces, a bridge, sshds)'
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if not os.access(SSHD, os.X_OK):
        missing.append(SSHD + ' (Debian package openssh-server)')
    if missing:
        return ('the test cluster needs ' + ', '.join(missing) +
                ' (Debian packages iproute2, util-linux, mount, openssh-client, openssh-server;'
                ' scripts/setup.sh installs them)')
    probe = subprocess.run(['unshare', '--net', '--mount', '--uts', 'true'],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return ('this machine does not allow new network/mount/UTS namespaces '
                f'(unshare: {probe.stderr.strip()}); a container needs CAP_SYS_ADMIN and '
                'CAP_NET_ADMIN')
    return None


def run(argv, check=True, **kwargs):
    """Runs argv to completion; a failure raises ClusterError with its output."""
    p = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if check and p.returncode != 0:
        raise ClusterError(f'{" ".join(argv)} failed (status {p.returncode}): '
                           f'{(p.stderr or p.stdout).strip()}')
    return p


def _netns_names():
    p = run(['ip', 'netns', 'list'], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def _links():
    return sorted(os.listdir('/sys/class/net'))


def _process_alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _signal_all(pids, sig, wait_s):
    """Sends `sig` to `pids`; waits up to wait_s for them to end. Returns those signalled."""
    signalled = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            signalled.append(pid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait_s
    while any(_process_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return signalled


def sweep(log=None, grace_s=0):
    """Removes every namespace and link whose name starts with PREFIX, after ending every
    process in those namespaces (sshds, and whatever ran under them): SIGTERM and up to
    `grace_s` seconds to exit, then SIGKILL. Returns what it removed. Call it only while
    holding the lock: it cannot tell a live cluster from a leftover."""
    removed = []
    namespaces = [n for n in _netns_names() if n.startswith(PREFIX + '-')]
    pids = set()
    for ns in namespaces:
        pids.update(int(p) for p in run(['ip', 'netns', 'pids', ns], check=False).stdout.split())
    pids.discard(os.getpid())
    if grace_s > 0:
        _signal_all(pids, signal.SIGTERM, grace_s)
    removed += [f'process {p}' for p in _signal_all(pids, signal.SIGKILL, 10)]
    for ns in namespaces:
        run(['ip', 'netns', 'delete', ns], check=False)
        removed.append(f'namespace {ns}')
    # Host ports first (deleting one end of a veth deletes both), the bridge last.
    for link in sorted(_links(), key=lambda n: n == BRIDGE):
        if link.startswith(PREFIX):
            run(['ip', 'link', 'delete', link], check=False)
            removed.append(f'link {link}')
    try:
        os.unlink(STATE_FILE)
    except FileNotFoundError:
        pass
    if log and removed:
        log(f'cluster: removed {", ".join(removed)}')
    return removed


def leftovers():
    """What of the cluster's kind exists now: namespaces, links, processes in those
    namespaces. Empty when nothing is left."""
    found = [f'namespace {n}' for n in _netns_names() if n.startswith(PREFIX + '-')]
    found += [f'link {n}' for n in _links() if n.startswith(PREFIX)]
    for ns in _netns_names():
        if ns.startswith(PREFIX + '-'):
            pids = run(['ip', 'netns', 'pids', ns], check=False).stdout.split()
            found += [f'process {p} in {ns}' for p in pids]
    return found


def _acquire_lock(timeout_s):
    """The machine-wide cluster lock, or ClusterError naming its holder after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(LOCK_NAME)
            return s
        except OSError:
            s.close()
        if time.monotonic() >= deadline:
            holder = ''
            try:
                with open(STATE_FILE) as f:
                    holder = f' (process {json.load(f)["pid"]})'
            except (OSError, ValueError, KeyError):
                pass
            raise ClusterError(f'another test cluster is running{holder}; waited {timeout_s} s '
                               'for it to end')
        time.sleep(0.1)


class Host:
    """One host of the cluster. Its files live in <cluster dir>/<name>/."""

    def __init__(self, cluster, index):
        self.index = index
        self.name = f'n{index}'
        self.address = f'{SUBNET}.{10 + index}'
        self.netns = f'{PREFIX}-{self.name}'
        self.port = f'{PREFIX}-{self.name}'  # the bridge side of its link
        self.dir = os.path.join(cluster.dir, self.name)
        self.sshd = None  # its Popen while it runs

    def path(self, name):
        return os.path.join(self.dir, name)


class Cluster:
    """N hosts n1..nN (see the module comment). Use as a context manager:

        with Cluster(3) as c:
            subprocess.run(c.launcher_argv(['chorusrun', '-H', 'n1:2,n2:1', ...]), env=c.env())
            c.cut('n3'); c.heal('n3')
    """

    def __init__(self, hosts=3, keep=False, lock_timeout_s=300, log=None):
        if not 1 <= hosts <= MAX_HOSTS:
            raise ValueError(f'hosts must be in [1, {MAX_HOSTS}], got {hosts}')
        self.hosts = []
        self.count = hosts
        self.keep = keep
        self.lock_timeout_s = lock_timeout_s
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.dir = None
        self._lock = None
        self._watchdog_pipe = None
        self._watchdog_done = None
        self._old_handlers = {}
        self._started = False
        self.setup_seconds = None
        self.teardown_seconds = None

    # --- lifetime -------------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        """Builds the cluster; returns when every host answers `ssh HOST hostname` with its
        name. Raises Unavailable (skip) or ClusterError (fail); nothing is left on failure."""
        reason = unavailable_reason()
        if reason:
            raise Unavailable(reason)
        began = time.monotonic()
        self._lock = _acquire_lock(self.lock_timeout_s)
        self._started = True
        atexit.register(self.stop)
        self._install_signal_handlers()
        try:
            sweep(self.log)
            self.dir = tempfile.mkdtemp(prefix='chorus-cluster-')
            self._start_watchdog()
            self.hosts = [Host(self, i) for i in range(1, self.count + 1)]
            self._write_files()
            self._build_network()
            for h in self.hosts:
                self.start_sshd(h.name)
            self._check_logins()
            self._write_state()
        except BaseException:
            self.stop()
            raise
        self.setup_seconds = time.monotonic() - began

    def stop(self):
        """Tears everything down (idempotent): every process in the hosts' namespaces, the
        namespaces, the links, the state file, the directory (unless keep). SIGTERM, SIGHUP
        and SIGINT arriving meanwhile are held until it is done (then raised as SystemExit or
        KeyboardInterrupt); should it fail anyway, the watchdog finishes it."""
        if not self._started:
            return
        self._started = False
        began = time.monotonic()
        held, previous = [], {}
        try:
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda signum, frame: held.append(signum))
        except ValueError:  # not the main thread: nothing to hold
            pass
        done = False
        try:
            sweep(grace_s=2)
            for h in self.hosts:
                if h.sshd is not None:
                    h.sshd.wait()
                    h.sshd = None
            if self.dir and not self.keep:
                shutil.rmtree(self.dir, ignore_errors=True)
            elif self.dir:
                self.log(f'cluster: kept {self.dir}')
            done = True
        finally:
            self._stop_watchdog(done)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._restore_signal_handlers()
            if self._lock is not None:
                self._lock.close()
                self._lock = None
            atexit.unregister(self.stop)
            self.teardown_seconds = time.monotonic() - began
        if held:
            if held[0] == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + held[0])

    def _install_signal_handlers(self):
        def handler(signum, frame):
            raise SystemExit(128 + signum)  # unwinds through `with` and atexit: teardown runs
        try:
            for sig in (signal.SIGTERM, signal.SIGHUP):
                self._old_handlers[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread: the watchdog still covers a kill
            pass

    def _restore_signal_handlers(self):
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers = {}

    def _start_watchdog(self):
        """The watchdog: a process outside this one's tree that shares the lock and tears down
        when this process's end of its stdin closes without 'done' (this process was killed)."""
        pipe_r, pipe_w = os.pipe()
        done_r, done_w = os.pipe()
        argv = [sys.executable, os.path.abspath(__file__), '_watchdog', self.dir]
        if self.keep:
            argv.append('--keep')
        intermediate = subprocess.Popen(argv, stdin=pipe_r, stdout=done_w,
                                        pass_fds=(self._lock.fileno(),), start_new_session=True)
        os.close(pipe_r)
        os.close(done_w)
        intermediate.wait()  # it forks the watchdog and exits at once
        self._watchdog_pipe = pipe_w
        self._watchdog_done = done_r

    def _stop_watchdog(self, done):
        """Tells the watchdog the teardown is `done` (it exits) or not (it finishes it), and
        waits for it to exit: then the lock is free for the next cluster."""
        if self._watchdog_pipe is None:
            return
        if done:
            try:
                os.write(self._watchdog_pipe, b'done')
            except OSError:
                pass
        os.close(self._watchdog_pipe)
        self._watchdog_pipe = None
        select.select([self._watchdog_done], [], [], 30)  # its exit closes the other end
        os.close(self._watchdog_done)
        self._watchdog_done = None

    # --- building -------------------------------------------------------------------------

    def path(self, name):
        return os.path.join(self.dir, name)

    def _write(self, path, text, mode=0o644):
        with open(path, 'w') as f:
            f.write(text)
        os.chmod(path, mode)

    def _write_files(self):
        keygen = ['ssh-keygen', '-q', '-t', 'ed25519', '-N', '']
        run(keygen + ['-C', 'chorus-test-cluster', '-f', self.path('id_ed25519')])
        os.rename(self.path('id_ed25519.pub'), self.path('authorized_keys'))
        with open('/etc/hosts') as f:
            names = {h.name for h in self.hosts}
            machine = [line.rstrip('\n') for line in f
                       if not names & set(line.split('#')[0].split()[1:])]
        cluster_lines = [f'{h.address}\t{h.name}' for h in self.hosts]
        self._write(self.path('hosts'), '\n'.join(
            machine + ['# chorus test cluster'] + cluster_lines) + '\n')
        known = []
        for h in self.hosts:
            os.mkdir(h.dir)
            run(keygen + ['-C', h.name, '-f', h.path('ssh_host_ed25519_key')])
            with open(h.path('ssh_host_ed25519_key.pub')) as f:
                key = ' '.join(f.read().split()[:2])
            known.append(f'{h.name},{h.address} {key}')
            # Its own name at 127.0.1.1, as Debian's installer writes it.
            others = [line for line in cluster_lines if not line.endswith('\t' + h.name)]
            self._write(h.path('hosts'), '\n'.join(
                machine + ['# chorus test cluster', f'127.0.1.1\t{h.name}'] + others) + '\n')
            self._write(h.path('sshd_config'), '\n'.join([
                'ListenAddress 0.0.0.0',
                'Port 22',
                f'HostKey {h.path("ssh_host_ed25519_key")}',
                f'PidFile {h.path("sshd.pid")}',
                f'AuthorizedKeysFile {self.path("authorized_keys")}',
                'PermitRootLogin prohibit-password',
                'PubkeyAuthentication yes',
                'PasswordAuthentication no',
                'KbdInteractiveAuthentication no',
                'UsePAM no',          # the test's own key is the whole authentication
                'StrictModes no',     # the files live under /tmp (world-writable)
                'UseDNS no',
                'PrintMotd no',
                'PrintLastLog no',
                'X11Forwarding no',
                'MaxStartups 200',    # chorusrun opens one connection per rank at once
                'MaxSessions 200',
                'LogLevel VERBOSE',
            ]) + '\n')
        self._write(self.path('known_hosts'), '\n'.join(known) + '\n')
        self._write(self.path('ssh_config'), '\n'.join([
            'Host *',
            '  User root',
            f'  IdentityFile {self.path("id_ed25519")}',
            '  IdentitiesOnly yes',
            f'  UserKnownHostsFile {self.path("known_hosts")}',
            '  GlobalKnownHostsFile /dev/null',
            '  StrictHostKeyChecking yes',
            '  CheckHostIP no',
            '  BatchMode yes',
            '  LogLevel ERROR',
        ]) + '\n')
        self._write(self.path('empty'), '')
        os.mkdir(self.path('bin'))
        # OpenSSH reads ~/.ssh from the passwd entry, not $HOME, and chorusrun has no option for
        # a client configuration: the configuration reaches ssh through this, first on PATH.
        self._write(self.path('bin/ssh'),
                    f'#!/bin/sh\nexec /usr/bin/ssh -F {self.path("ssh_config")} "$@"\n', 0o755)

    def _build_network(self):
        run(['ip', 'link', 'add', BRIDGE, 'type', 'bridge'])
        run(['ip', 'address', 'add', f'{BRIDGE_ADDRESS}/24', 'dev', BRIDGE])
        run(['ip', 'link', 'set', BRIDGE, 'up'])
        for h in self.hosts:
            run(['ip', 'netns', 'add', h.netns])
            run(['ip', 'link', 'add', h.port, 'type', 'veth', 'peer', 'name', BRIDGE,
                 'netns', h.netns])
            run(['ip', 'link', 'set', h.port, 'master', BRIDGE, 'up'])
            run(['ip', '-n', h.netns, 'address', 'add', f'{h.address}/24', 'dev', BRIDGE])
            run(['ip', '-n', h.netns, 'link', 'set', BRIDGE, 'up'])
            run(['ip', '-n', h.netns, 'link', 'set', 'lo', 'up'])

    def _check_logins(self):
        """`ssh HOST hostname` answers HOST on every host (names, keys, known hosts)."""
        checks = {h.name: subprocess.Popen(self.launcher_argv(['ssh', h.name, 'hostname']),
                                           env=self.env(), stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)
                  for h in self.hosts}
        for name, p in checks.items():
            out = p.communicate(timeout=60)[0].strip()
            if p.returncode != 0 or out != name:
                raise ClusterError(f'ssh {name} hostname answered {out!r} (status {p.returncode})'
                                   f'; sshd log: {self.sshd_log(name)}')

    def _write_state(self):
        state = {'pid': os.getpid(), 'dir': self.dir,
                 'hosts': [{'name': h.name, 'address': h.address, 'netns': h.netns,
                            'port': h.port, 'sshd_pid': h.sshd.pid} for h in self.hosts]}
        tmp = STATE_FILE + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(state, f, indent=1)
        os.replace(tmp, STATE_FILE)

    # --- using it -------------------------------------------------------------------------

    def host(self, name):
        for h in self.hosts:
            if h.name == name:
                return h
        raise ClusterError(f'no host {name!r} in this cluster (hosts: '
                           f'{", ".join(h.name for h in self.hosts)})')

    def launcher_argv(self, argv):
        """argv run as on the launch machine (the root namespace), where the cluster's names
        resolve: in a private mount namespace with the cluster's hosts file over /etc/hosts.
        Each step execs the next, so the process started is argv's (signals reach it)."""
        return ['unshare', '--mount', '--propagation', 'private', '--', '/bin/sh', '-c',
                'mount --bind "$0" /etc/hosts && exec "$@"', self.path('hosts')] + list(argv)

    def env(self, base=None, **extra):
        """The environment for launcher_argv: `base` (default os.environ) with PATH starting
        with the cluster's ssh (its client configuration), plus `extra`."""
        env = dict(os.environ if base is None else base)
        env['PATH'] = self.path('bin') + os.pathsep + env.get('PATH', '/usr/bin:/bin')
        env.update(extra)
        return env

    def host_argv(self, name, argv):
        """argv run on host `name` without ssh: in its sshd's network, mount and UTS
        namespaces (its address, /etc/hosts and hostname)."""
        h = self.host(name)
        if h.sshd is None or h.sshd.poll() is not None:
            raise ClusterError(f'sshd of {name} is not running: its namespaces are gone; '
                               f'start it with start_sshd({name!r})')
        return ['nsenter', '-t', str(h.sshd.pid), '-n', '-m', '-u', f'--wd={os.getcwd()}',
                '--'] + list(argv)

    def start_sshd(self, name):
        """Starts host `name`'s sshd (in a new UTS and mount namespace inside its network
        namespace); returns when it accepts connections."""
        h = self.host(name)
        if h.sshd is not None and h.sshd.poll() is None:
            return
        # The user's shell startup files are hidden (an empty file bound over each): a login
        # on a host runs no dotfiles of the developer's, which would make the tests depend
        # on them, and could leave their state (e.g. pyenv's rehash lock in ~/.pyenv, shared
        # by every host) behind when a teardown kills a session.
        setup = ('mount --bind "$1" /etc/hosts && mount -t tmpfs -o mode=755 tmpfs /run && '
                 'mkdir -m 755 /run/sshd && hostname "$2" && '
                 'for f in "$6"/.bashrc "$6"/.bash_profile "$6"/.bash_login "$6"/.profile; do '
                 '  if [ -f "$f" ]; then mount --bind "$7" "$f" || exit 1; fi; '
                 'done && exec "$3" -D -E "$4" -f "$5"')
        home = pwd.getpwuid(os.getuid()).pw_dir
        with open(h.path('sshd.out'), 'a') as out:
            h.sshd = subprocess.Popen(
                ['ip', 'netns', 'exec', h.netns, 'unshare', '--mount', '--uts', '--propagation',
                 'private', '--', '/bin/sh', '-c', setup, 'sh', h.path('hosts'), h.name, SSHD,
                 h.path('sshd.log'), h.path('sshd_config'), home, self.path('empty')],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection((h.address, 22), timeout=1).close()
                return
            except OSError as e:
                if h.sshd.poll() is not None or time.monotonic() > deadline:
                    raise ClusterError(f'sshd on {name} ({h.address}:22) does not accept '
                                       f'connections ({e}); its log: {self.sshd_log(name)}')
                time.sleep(0.05)

    def stop_sshd(self, name):
        """Stops host `name`'s sshd (SIGKILL): ssh to it is refused from then on. Sessions it
        started keep running."""
        h = self.host(name)
        if h.sshd is not None:
            h.sshd.kill()
            h.sshd.wait()
            h.sshd = None

    def sshd_log(self, name):
        h = self.host(name)
        text = ''
        for f in ('sshd.out', 'sshd.log'):
            try:
                with open(h.path(f)) as fh:
                    text += fh.read()
            except FileNotFoundError:
                pass
        return text[-2000:] or '(empty)'

    def cut(self, name):
        """Takes host `name`'s link down on the bridge side, as a failed switch port or a
        reclaimed node looks from everywhere else: its packets are dropped from now on, no
        FIN or RST reaches anyone, and the host itself keeps running."""
        run(['ip', 'link', 'set', self.host(name).port, 'down'])

    def heal(self, name):
        """Brings host `name`'s link back up (the bridge forwards at once: no STP)."""
        run(['ip', 'link', 'set', self.host(name).port, 'up'])

    def shape(self, name, rate=None, delay=None):
        """Limits host `name`'s link both ways: `rate` like '1gbit' or '100mbit', `delay` like
        '5ms' (one way; needs tc netem in the kernel). None removes the limit."""
        h = self.host(name)
        if rate is None and delay is None:
            self.unshape(name)
            return
        netem = ['netem'] + (['delay', delay] if delay else []) + (['rate', rate] if rate else [])
        for prefix, dev in ((['ip', 'netns', 'exec', h.netns], BRIDGE), ([], h.port)):
            p = run(prefix + ['tc', 'qdisc', 'replace', 'dev', dev, 'root'] + netem, check=False)
            if p.returncode == 0:
                continue
            if delay or 'unknown' not in p.stderr.lower():
                raise ClusterError(f'tc netem on {dev} ({name}): {p.stderr.strip()}'
                                   + ('; this kernel has no netem (CONFIG_NET_SCH_NETEM): only a '
                                      'rate can be set here (tbf)' if delay else ''))
            # No netem: a token bucket gives the rate (no delay).
            bits = _rate_bits(rate)
            burst = max(16 * 1024, bits // 8 // 100)  # >= 10 ms of traffic
            run(prefix + ['tc', 'qdisc', 'replace', 'dev', dev, 'root', 'tbf', 'rate', rate,
                          'burst', str(burst), 'latency', '100ms'])

    def unshape(self, name):
        h = self.host(name)
        for prefix, dev in ((['ip', 'netns', 'exec', h.netns], BRIDGE), ([], h.port)):
            run(prefix + ['tc', 'qdisc', 'delete', 'dev', dev, 'root'], check=False)

    def counters(self, name):
        """Bytes through host `name`'s link since it was made: {'sent': from the host,
        'received': to the host} (the bridge port's counters, read from sysfs)."""
        base = f'/sys/class/net/{self.host(name).port}/statistics/'
        with open(base + 'rx_bytes') as rx, open(base + 'tx_bytes') as tx:
            return {'sent': int(rx.read()), 'received': int(tx.read())}


def _rate_bits(rate):
    """'100mbit' -> 100000000 (tc's units: bit, kbit, mbit, gbit; bps etc. are bytes)."""
    units = {'gbit': 10**9, 'mbit': 10**6, 'kbit': 10**3, 'bit': 1,
             'gbps': 8 * 10**9, 'mbps': 8 * 10**6, 'kbps': 8 * 10**3, 'bps': 8}
    text = rate.lower()
    for unit, factor in units.items():
        if text.endswith(unit) and text[:-len(unit)].replace('.', '', 1).isdigit():
            return int(float(text[:-len(unit)]) * factor)
    raise ClusterError(f'rate {rate!r}: expected a number and a unit (bit, kbit, mbit, gbit, '
                       'bps, kbps, mbps, gbps)')


# --- the watchdog -------------------------------------------------------------------------

def _watchdog(directory, keep):
    """Runs detached from the test (its own session, reparented): holds the inherited lock,
    waits for EOF on stdin; without 'done' first, the test died: tear down."""
    if os.fork():
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    said = b''
    while True:
        chunk = os.read(0, 64)
        if not chunk:
            break
        said += chunk
    if said == b'done':
        return 0
    try:
        sweep(lambda line: print(f'{line} (the test process died or its teardown failed)', file=sys.stderr),
              grace_s=2)
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    except Exception as e:  # nobody to report to but stderr
        print(f'cluster watchdog: teardown failed: {e}', file=sys.stderr)
        return 1
    return 0


# --- the command line ---------------------------------------------------------------------

def _state():
    try:
        with open(STATE_FILE) as f:
            return json.load(f)
    except FileNotFoundError:
        raise ClusterError('no test cluster is running (start one with: cluster.py up)')


def _state_host(state, name):
    for h in state['hosts']:
        if h['name'] == name:
            return h
    raise ClusterError(f'no host {name!r} (hosts: {", ".join(h["name"] for h in state["hosts"])})')


def main(argv):
    parser = argparse.ArgumentParser(
        description='The chorus multi-host test cluster (network namespaces with their own sshd; '
                    'see test/cluster/README.md).')
    sub = parser.add_subparsers(dest='command', required=True)
    up = sub.add_parser('up', help='build a cluster and keep it until Ctrl-C or SIGTERM')
    up.add_argument('--hosts', type=int, default=3)
    up.add_argument('--keep', action='store_true', help='keep its directory (logs) afterwards')
    ex = sub.add_parser('exec', help='run a command as the launch machine, with the names and '
                                     'the ssh settings of the running cluster')
    ex.add_argument('cmd', nargs=argparse.REMAINDER)
    sh = sub.add_parser('shell', help='a shell (or a command) on one host, without ssh')
    sh.add_argument('host')
    sh.add_argument('cmd', nargs=argparse.REMAINDER)
    for name, text in (('cut', "take a host's link down"), ('heal', "bring it back up"),
                       ('unshape', 'remove rate and delay limits')):
        sub.add_parser(name, help=text).add_argument('host')
    sp = sub.add_parser('shape', help="limit a host's link (both ways)")
    sp.add_argument('host')
    sp.add_argument('--rate')
    sp.add_argument('--delay')
    sub.add_parser('counters', help="bytes through each host's link")
    sub.add_parser('check', help=f'can this machine run it? (exit {SKIP_STATUS} and why if not)')
    sub.add_parser('down', help='remove every leftover of a crashed run (refused while a '
                                'cluster runs)')
    wd = sub.add_parser('_watchdog')
    wd.add_argument('dir')
    wd.add_argument('--keep', action='store_true')
    a = parser.parse_args(argv)

    if a.command == '_watchdog':
        return _watchdog(a.dir, a.keep)
    if a.command == 'check':
        reason = unavailable_reason()
        print(reason or 'this machine can run the test cluster')
        return SKIP_STATUS if reason else 0
    if a.command == 'up':
        c = Cluster(a.hosts, keep=a.keep)
        try:
            c.start()
            print(f'cluster up in {c.setup_seconds:.1f} s: ' +
                  ', '.join(f'{h.name} {h.address}' for h in c.hosts) +
                  f'; the launch machine is {BRIDGE_ADDRESS} ({BRIDGE}); files in {c.dir}',
                  flush=True)
            print(f'  {sys.argv[0]} exec -- CMD   (e.g. ssh n1 hostname)\n'
                  f'  {sys.argv[0]} shell n1\n  Ctrl-C here tears it down.', flush=True)
            signal.pause()
        except KeyboardInterrupt:
            pass
        finally:
            c.stop()
            if c.teardown_seconds is not None:
                print(f'cluster down in {c.teardown_seconds:.1f} s', flush=True)
        return 0
    if a.command == 'down':
        lock = _acquire_lock(0)
        try:
            removed = sweep()
        finally:
            lock.close()
        print('removed: ' + ', '.join(removed) if removed else 'nothing to remove')
        return 0
    state = _state()
    if a.command == 'exec':
        cmd = a.cmd[1:] if a.cmd[:1] == ['--'] else a.cmd
        c = Cluster.__new__(Cluster)
        c.dir = state['dir']
        os.execvpe(c.launcher_argv(cmd)[0], c.launcher_argv(cmd), c.env())
    if a.command == 'shell':
        h = _state_host(state, a.host)
        cmd = (a.cmd[1:] if a.cmd[:1] == ['--'] else a.cmd) or [os.environ.get('SHELL',
                                                                               '/bin/bash')]
        argv = ['nsenter', '-t', str(h['sshd_pid']), '-n', '-m', '-u', f'--wd={os.getcwd()}',
                '--'] + cmd
        os.execvp(argv[0], argv)
    if a.command == 'counters':
        for h in state['hosts']:
            base = f'/sys/class/net/{h["port"]}/statistics/'
            with open(base + 'rx_bytes') as rx, open(base + 'tx_bytes') as tx:
                print(f'{h["name"]}: sent {int(rx.read())} B, received {int(tx.read())} B')
        return 0
    # cut, heal, shape, unshape: the same code as the module's, on the running cluster's state.
    c = Cluster.__new__(Cluster)
    c.dir = state['dir']
    c.hosts = []
    for i, h in enumerate(state['hosts'], 1):
        c.hosts.append(Host(c, i))
    getattr(c, a.command)(a.host, **({'rate': a.rate, 'delay': a.delay}
                                     if a.command == 'shape' else {}))
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main(sys.argv[1:]))
    except ClusterError as e:
        print(f'cluster: {e}', file=sys.stderr)
        sys.exit(SKIP_STATUS if isinstance(e, Unavailable) else 1)
