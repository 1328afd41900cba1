#!/usr/bin/python3
"""Tests of the test cluster itself (cluster.py): what a crashed run left is swept, each host
is its own machine to whoever logs in (hostname, address, names), a cut link drops packets
without a word to either side and heals, shaping limits the rate, counters count, the delay
line (delay_line.py) delays the traffic between hosts and delivers it intact, a stopped sshd
refuses, and teardown leaves nothing: after `with`, after the test process is killed
outright (the watchdog), and a machine that cannot run it is told why (status 77).

Usage: cluster_self_test.py
Exits 0 when every check passes, 1 otherwise, 77 when this machine cannot run the cluster.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster as cl  # noqa: E402
import delay_line  # noqa: E402

failures = []


def check(name, fn, *args):
    began = time.monotonic()
    try:
        fn(*args)
        print(f'PASS {name} ({time.monotonic() - began:.1f} s)', flush=True)
    except (AssertionError, cl.ClusterError, subprocess.TimeoutExpired) as e:
        failures.append(name)
        print(f'FAIL {name} ({time.monotonic() - began:.1f} s): {e}', flush=True)


def ssh(c, host, command, **kwargs):
    return subprocess.run(c.launcher_argv(['ssh', host, command]), env=c.env(),
                          capture_output=True, text=True, timeout=60, **kwargs)


def connect(address, timeout=1.0):
    """'ok', 'refused' or 'timeout' for a TCP connection to address:22."""
    try:
        socket.create_connection((address, 22), timeout=timeout).close()
        return 'ok'
    except ConnectionRefusedError:
        return 'refused'
    except (TimeoutError, socket.timeout):
        return 'timeout'


def plant_leftover():
    """What a crashed run leaves: a namespace with a process in it and its link. Planted while
    holding the lock, so no live cluster is disturbed."""
    lock = cl._acquire_lock(300)
    try:
        cl.run(['ip', 'netns', 'add', 'chcl-n7'])
        cl.run(['ip', 'link', 'add', 'chcl-n7', 'type', 'veth', 'peer', 'name', 'x0', 'netns',
                'chcl-n7'])
        sleeper = subprocess.Popen(['ip', 'netns', 'exec', 'chcl-n7', 'sleep', '600'],
                                   start_new_session=True)
        deadline = time.monotonic() + 10
        while str(sleeper.pid) not in cl.run(['ip', 'netns', 'pids', 'chcl-n7']).stdout.split():
            assert time.monotonic() < deadline, 'the planted process did not start'
            time.sleep(0.02)
    finally:
        lock.close()
    return sleeper


def sweeps_leftovers(c, sleeper):
    assert sleeper.wait(timeout=10) == -9, f'planted process: status {sleeper.returncode}'
    assert 'chcl-n7' not in cl._netns_names() and 'chcl-n7' not in cl._links(), \
        'planted namespace or link still there'


def hosts_are_machines(c):
    for h in c.hosts:
        p = ssh(c, h.name, 'hostname; getent hosts n1 n2 n3; ip -4 -o address show chcl0')
        lines = p.stdout.split('\n')
        assert p.returncode == 0 and lines[0] == h.name, (p.returncode, p.stdout, p.stderr)
        # Its own name at 127.0.1.1 (as Debian writes it), the others at their addresses.
        want = {o.name: o.address for o in c.hosts}
        want[h.name] = '127.0.1.1'
        got = {line.split()[1]: line.split()[0] for line in lines[1:4]}
        assert got == want, (h.name, got)
        assert f'inet {h.address}/24' in lines[4], lines[4]
    # A host runs none of the user's shell startup files.
    p = ssh(c, 'n1', 'cat ~/.bashrc ~/.profile 2>/dev/null | wc -c')
    assert p.stdout.strip() == '0', f'startup files seen on n1: {p.stdout} bytes'
    p = subprocess.run(c.host_argv('n2', ['hostname']), capture_output=True, text=True)
    assert p.stdout.strip() == 'n2', p.stdout
    # The launch machine resolves the names only in the cluster's mount namespace.
    p = subprocess.run(c.launcher_argv(['getent', 'hosts', 'n3']), capture_output=True,
                       text=True)
    assert p.stdout.split() == ['198.18.0.13', 'n3'], p.stdout


def counters_count(c):
    before = {h.name: c.counters(h.name) for h in c.hosts}
    p = ssh(c, 'n1', 'head -c 2000000 /dev/zero')
    assert p.returncode == 0 and len(p.stdout) == 2000000, p.returncode
    after = {h.name: c.counters(h.name) for h in c.hosts}
    sent = after['n1']['sent'] - before['n1']['sent']
    assert sent >= 2000000, f'n1 sent {sent} B'
    other = after['n3']['sent'] - before['n3']['sent']
    assert other < 100000, f'n3 sent {other} B while idle'


def cut_is_silent(c):
    h = c.host('n2')
    session = subprocess.Popen(c.launcher_argv(['ssh', 'n2', 'echo started; sleep 60']),
                               env=c.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert session.stdout.readline().strip() == 'started'
        assert connect(h.address) == 'ok'
        c.cut('n2')
        # Packets are dropped: no RST (a refusal would come at once), no FIN to the session.
        assert connect(h.address) == 'timeout'
        time.sleep(2)
        assert session.poll() is None, f'the session ended at the cut: {session.returncode}'
        c.heal('n2')
        deadline = time.monotonic() + 10
        while connect(h.address) != 'ok':
            assert time.monotonic() < deadline, 'n2 unreachable 10 s after the heal'
    finally:
        session.kill()
        session.wait()


def shaping_limits_the_rate(c):
    c.shape('n1', rate='8mbit')
    try:
        began = time.monotonic()
        p = ssh(c, 'n1', 'head -c 1000000 /dev/zero')
        took = time.monotonic() - began
        assert p.returncode == 0 and len(p.stdout) == 1000000
        # 8 Mbit/s moves 1 MB in 1 s; faster would mean no limit (a lower bound only).
        assert took >= 0.8, f'1 MB in {took:.2f} s at 8 mbit'
        print(f'  1 MB from n1 at 8mbit: {took:.2f} s')
    finally:
        c.unshape('n1')
    shown = cl.run(['tc', 'qdisc', 'show', 'dev', c.host('n1').port]).stdout
    assert 'tbf' not in shown and 'netem' not in shown, shown
    try:
        c.shape('n1', delay='50ms')
    except cl.ClusterError as e:
        assert 'netem' in str(e), e
        print(f'  delay: {e}')
        return
    try:
        began = time.monotonic()
        assert connect(c.host('n1').address, timeout=5) == 'ok'
        took = time.monotonic() - began
        assert took >= 0.09, f'a connection (one round trip) took {took:.3f} s with 2 x 50 ms'
        print(f'  delay: connect took {took:.3f} s with 50 ms each way')
    finally:
        c.unshape('n1')


# Run on a host (Cluster.host_argv): `connect ADDRESS` prints the median time of 20 TCP
# connections to ADDRESS:22 (one round trip each: the SYN and its SYN-ACK); `send ADDRESS N`
# sends N random bytes to a `receive` on ADDRESS, both print the SHA-256 of the bytes.
PROBE = """
import hashlib, os, socket, statistics, sys, time
what, address = sys.argv[1], sys.argv[2]
if what == 'connect':
    took = []
    for _ in range(20):
        began = time.perf_counter()
        socket.create_connection((address, 22), timeout=10).close()
        took.append(time.perf_counter() - began)
    print(statistics.median(took))
elif what == 'receive':
    server = socket.create_server((address, 5001))
    print('listening', flush=True)
    peer, _ = server.accept()
    digest = hashlib.sha256()
    while chunk := peer.recv(1 << 20):
        digest.update(chunk)
    print(digest.hexdigest())
else:
    data = os.urandom(int(sys.argv[3]))
    socket.create_connection((address, 5001), timeout=10).sendall(data)
    print(hashlib.sha256(data).hexdigest())
"""


def probe(c, host, *args):
    p = subprocess.run(c.host_argv(host, [sys.executable, '-c', PROBE] + list(args)),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f'probe {args} on {host}: {p.stderr.strip()}'
    return p.stdout.strip()


def delay_line_delays(c):
    n2 = c.host('n2').address
    plain = float(probe(c, 'n1', 'connect', n2))
    delay_ms = 5
    with delay_line.DelayLine(c, delay_ms):
        delayed = float(probe(c, 'n1', 'connect', n2))
        receiver = subprocess.Popen(
            c.host_argv('n2', [sys.executable, '-c', PROBE, 'receive', n2]),
            stdout=subprocess.PIPE, text=True)
        try:
            assert receiver.stdout.readline().strip() == 'listening'
            before = c.counters('n1')
            sent = probe(c, 'n1', 'send', n2, str(8 << 20))
            received = receiver.communicate(timeout=60)[0].strip()
            after = c.counters('n1')
        finally:
            receiver.kill()
            receiver.wait()
    print(f'  connect n1 -> n2: {plain * 1e3:.3f} ms, {delayed * 1e3:.3f} ms through the '
          f'delay line ({delay_ms} ms each way)')
    # A round trip through the line takes at least twice its delay (a lower bound only); the
    # bridge alone answers within a fraction of it (it separates "delayed" from "not").
    assert delayed >= 2 * delay_ms / 1e3, f'{delayed * 1e3:.3f} ms'
    assert plain < delay_ms / 1e3, f'{plain * 1e3:.3f} ms without the delay line'
    assert sent == received, f'8 MiB sent as {sent}, received as {received}'
    assert after['sent'] - before['sent'] >= 8 << 20, (before, after)
    # Gone with the `with`: the redirects, the TAP device, the delay.
    for h in c.hosts:
        shown = cl.run(['tc', 'qdisc', 'show', 'dev', h.port]).stdout
        assert 'clsact' not in shown, shown
    assert not os.path.exists(f'/sys/class/net/{delay_line.TAP}')
    again = float(probe(c, 'n1', 'connect', n2))
    assert again < delay_ms / 1e3, f'{again * 1e3:.3f} ms after the delay line'


def stopped_sshd_refuses(c):
    c.stop_sshd('n3')
    assert connect(c.host('n3').address) == 'refused'
    c.start_sshd('n3')
    p = ssh(c, 'n3', 'hostname')
    assert p.stdout.strip() == 'n3', (p.stdout, p.stderr)


def nothing_left(sshd_pids, directory):
    left = cl.leftovers()
    assert not left, f'left behind: {left}'
    alive = [p for p in sshd_pids if cl._process_alive(p)]
    assert not alive, f'sshds still running: {alive}'
    assert not os.path.exists(directory), f'{directory} still there'
    assert not os.path.exists(cl.STATE_FILE)


def killed_test_is_cleaned_up():
    child = subprocess.Popen(
        [sys.executable, '-c', 'import sys, time; sys.path.insert(0, sys.argv[1]); '
         'import cluster; c = cluster.Cluster(2); c.start(); print(c.dir, flush=True); '
         'time.sleep(600)', HERE], stdout=subprocess.PIPE, text=True)
    directory = child.stdout.readline().strip()
    assert directory, 'the child did not build its cluster'
    assert cl.leftovers(), 'the child left no trace to clean'
    child.kill()
    child.wait()
    # The watchdog tears down, then lets go of the lock.
    lock = cl._acquire_lock(30)
    lock.close()
    nothing_left([], directory)


def unavailable_is_a_skip():
    # A copy that user nobody can read wherever the checkout is (mktemp -d makes 0700 folders).
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        script = shutil.copy(os.path.join(HERE, 'cluster.py'), d)
        os.chmod(script, 0o644)
        p = subprocess.run(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups',
                            sys.executable, script, 'check'],
                           capture_output=True, text=True, timeout=60)
    assert p.returncode == cl.SKIP_STATUS and 'needs root' in p.stdout, (p.returncode, p.stdout)


def main():
    reason = cl.unavailable_reason()
    if reason:
        print(f'SKIP: {reason}')
        return cl.SKIP_STATUS
    sleeper = plant_leftover()
    with cl.Cluster(3) as c:
        print(f'cluster of 3 hosts set up in {c.setup_seconds:.2f} s', flush=True)
        check('sweeps_leftovers', sweeps_leftovers, c, sleeper)
        check('hosts_are_machines', hosts_are_machines, c)
        check('counters_count', counters_count, c)
        check('cut_is_silent', cut_is_silent, c)
        check('shaping_limits_the_rate', shaping_limits_the_rate, c)
        check('delay_line_delays', delay_line_delays, c)
        check('stopped_sshd_refuses', stopped_sshd_refuses, c)
        sshd_pids = [h.sshd.pid for h in c.hosts if h.sshd]
        directory = c.dir
    print(f'cluster torn down in {c.teardown_seconds:.2f} s', flush=True)
    check('teardown_leaves_nothing', nothing_left, sshd_pids, directory)
    check('killed_test_is_cleaned_up', killed_test_is_cleaned_up)
    check('unavailable_is_a_skip', unavailable_is_a_skip)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
