#!/usr/bin/python3
"""A chorus worker for the multi-host tests (multihost_e2e.py): one allreduce, allgather and
broadcast whose results depend on every rank, then one line on stdout:

    CLUSTER_WORKER {"rank": ..., "hostname": ..., "allreduce": [...], ...}

with the rank's numbers as chorus reports them, the machine's hostname, what chorusrun named
its host, the three results, and the variables the tests forward (CLUSTER_TEST_VAR, UCX_TLS).
The test computes what each value must be from the host list and compares; this script checks
nothing itself.

With --train SECONDS it then keeps allreducing (one step every 50 ms, printing
`CLUSTER_STEP <rank> <step> <sum>`) until SECONDS have passed, for the network-cut tests.
"""
import argparse
import json
import os
import socket
import time

import numpy as np

import chorus.numpy as hvd

parser = argparse.ArgumentParser()
parser.add_argument('--train', type=float, default=0)
args = parser.parse_args()

hvd.init()
r, n = hvd.rank(), hvd.size()
# Sum of (r + 1) * [1, 2, 3] over the ranks: n (n + 1) / 2 * [1, 2, 3].
total = hvd.allreduce(np.arange(1, 4, dtype=np.float64) * (r + 1), op=hvd.Sum, name='sum')
# Rank r gives r + 1 rows of r: the rows of 0, then 1, 1, then 2, 2, 2, ...
gathered = hvd.allgather(np.full((r + 1, 2), r, dtype=np.int32), name='gather')
# The last rank's 10 r + 7 reaches everyone.
broadcast = hvd.broadcast(np.array([10 * r + 7], dtype=np.int64), root_rank=n - 1, name='bcast')
e = os.environ
report = {
    'rank': r, 'size': n, 'local_rank': hvd.local_rank(), 'local_size': hvd.local_size(),
    'cross_rank': hvd.cross_rank(), 'cross_size': hvd.cross_size(),
    'hostname': socket.gethostname(), 'chorus_hostname': e.get('CHORUS_HOSTNAME'),
    'allreduce': total.tolist(), 'allgather': gathered.tolist(), 'broadcast': broadcast.tolist(),
    'test_var': e.get('CLUSTER_TEST_VAR'), 'ucx_tls': e.get('UCX_TLS'),
    'ucx_net_devices': e.get('UCX_NET_DEVICES'), 'pid': os.getpid(),
}
print('CLUSTER_WORKER ' + json.dumps(report, sort_keys=True), flush=True)

step = 0
end = time.monotonic() + args.train
while time.monotonic() < end:
    step += 1
    s = hvd.allreduce(np.ones(1, dtype=np.int64), op=hvd.Sum, name='step')
    print(f'CLUSTER_STEP {r} {step} {int(s[0])}', flush=True)
    time.sleep(0.05)
hvd.shutdown()
