"""Jobs on the namespace test cluster (test/cluster/) for the benchmark scripts: the host
shapes, the jobs' environment, chorusrun's command line on the cluster and rate-limited links.
Used by scripts/hierarchical_bench.py and scripts/autotune_cluster_bench.py.

Thread-safety: as test/cluster/cluster.py (one thread).
"""
import contextlib
import os
import sys

CLUSTER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test', 'cluster')
sys.path.insert(0, CLUSTER_DIR)

import cluster  # noqa: E402  (test/cluster/cluster.py)

__all__ = ['cluster', 'PYTHON', 'UCX_TCP', 'SHAPES', 'HIERARCHICAL_FLAGS', 'hosts_of_ranks',
           'job_env', 'chorusrun_argv', 'shaped']

PYTHON = '/usr/bin/python3'
# chorusrun forwards CHORUS_*, HOROVOD_*, NCCL_*, PATH, LD_LIBRARY_PATH and PYTHONPATH only, so
# the transports are set in the command: TCP between ranks, so that every byte between hosts
# crosses their links (test/cluster/README.md, "Notes for tests").
UCX_TCP = ['/usr/bin/env', 'UCX_TLS=tcp,self']
SHAPES = {'2x2': [('n1', 2), ('n2', 2)], '3x2': [('n1', 2), ('n2', 2), ('n3', 2)]}
HIERARCHICAL_FLAGS = ['--hierarchical-allreduce', '--hierarchical-allgather']


def hosts_of_ranks(shape):
    """The host of each rank, in rank order (chorusrun fills -H's hosts in turn)."""
    return [h for h, slots in SHAPES[shape] for _ in range(slots)]


def job_env(c, assignments=()):
    """The launch machine's environment for a job on cluster `c`: the cluster's ssh and names,
    TCP transports, Open MPI ranks that yield while they wait (they share this machine's cores),
    plus `assignments` ("NAME=VALUE"; chorusrun forwards CHORUS_* and HOROVOD_* to every rank)."""
    env = c.env(UCX_TLS='tcp,self', OMPI_MCA_mpi_yield_when_idle='1',
                PYTHONDONTWRITEBYTECODE='1')
    for item in assignments:
        key, value = item.split('=', 1)
        env[key] = value
    return env


def chorusrun_argv(c, chorusrun, shape, mode, command, flags=()):
    """chorusrun running `command` (an argv) on every slot of `shape`, in `mode` ('mpi':
    mpirun across the hosts; 'gloo': MPI-less over chcl0), with chorusrun `flags`, each rank
    under UCX_TLS=tcp,self, as a command for the launch machine."""
    hosts = SHAPES[shape]
    np = sum(s for _, s in hosts)
    return c.launcher_argv(
        [chorusrun, '-np', str(np), '-H', ','.join(f'{h}:{s}' for h, s in hosts)] +
        (['--gloo', '--network-interface', 'chcl0'] if mode == 'gloo' else []) +
        list(flags) + UCX_TCP + list(command))


@contextlib.contextmanager
def shaped(c, rate):
    """Every host link of cluster `c` limited to `rate` (tbf; tc syntax, e.g. '1gbit') within
    the block, unlimited afterwards."""
    for h in c.hosts:
        c.shape(h.name, rate=rate)
    try:
        yield
    finally:
        for h in c.hosts:
            c.unshape(h.name)
