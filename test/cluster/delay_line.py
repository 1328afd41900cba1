"""A one-way delay between the hosts of a test cluster (cluster.py), where the kernel has no tc
netem: delay_line.c holds every IPv4 frame one host sends to another for the delay, then
delivers it.

    with delay_line.DelayLine(cluster, delay_ms=2):
        ...  # traffic between n1, n2, n3 takes 2 ms longer each way

How: the frames between two hosts' addresses are taken off each bridge port's ingress (a u32
filter with a mirred redirect, both in this kernel) into a TAP device that delay_line reads, so
the bridge never forwards them; after the delay delay_line sends each one out of the
destination host's port. ARP and the traffic between the hosts and the launch machine (ssh,
the rendezvous) stay on the bridge, undelayed. The TAP device is named chcl-dl, so the cluster's
sweep removes it should this process die. Needs gcc (the delay line is compiled on first use into
the cluster's directory).
"""
import os
import subprocess

import cluster as cl

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, 'delay_line.c')
TAP = 'chcl-dl'
# The cluster's host addresses (198.18.0.11 ... 198.18.0.15) are in this /29, the launch
# machine's (198.18.0.1) is not.
HOSTS_PREFIX = '198.18.0.8/29'


class DelayLine:
    def __init__(self, cluster, delay_ms):
        self.c = cluster
        self.delay_us = int(delay_ms * 1000)
        self.proc = None
        self.ports = []

    def __enter__(self):
        binary = self.c.path('delay_line')
        if not os.path.exists(binary):
            cl.run(['gcc', '-O2', '-Wall', '-Wextra', '-o', binary, SOURCE])
        pairs = [f'{h.port}={h.address}' for h in self.c.hosts]
        self.proc = subprocess.Popen([binary, str(self.delay_us), TAP] + pairs,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != 'ready':
            self.proc.kill()
            raise cl.ClusterError(f'delay_line did not start (said {line!r})')
        try:
            for h in self.c.hosts:
                if not 8 <= int(h.address.rsplit('.', 1)[1]) <= 15:
                    raise cl.ClusterError(f'{h.name} ({h.address}) is outside {HOSTS_PREFIX}')
                cl.run(['tc', 'qdisc', 'add', 'dev', h.port, 'clsact'])
                self.ports.append(h.port)
                cl.run(['tc', 'filter', 'add', 'dev', h.port, 'ingress', 'protocol', 'ip',
                        'u32', 'match', 'ip', 'src', HOSTS_PREFIX, 'match', 'ip', 'dst',
                        HOSTS_PREFIX, 'action', 'mirred', 'egress', 'redirect', 'dev', TAP])
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for port in self.ports:
            cl.run(['tc', 'qdisc', 'delete', 'dev', port, 'clsact'], check=False)
        self.ports = []
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
