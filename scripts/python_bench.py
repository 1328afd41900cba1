"""Speed of chorus.torch against raw mpi4py on the same bytes, in one run:

  1. small: N x 1 KiB float32 tensors per step. chorus.torch: allreduce_async_ of each (named,
     as DistributedOptimizer does), then synchronize of every handle. mpi4py: the same N
     in-place comm.Allreduce calls in a Python loop.
  2. resnet50: the 161 gradient tensors of torchvision's ResNet-50 (25.6 M float32).
     chorus.torch: allreduce_async_ of each in reverse order (the order backward produces
     them), then synchronize. mpi4py: one in-place Allreduce per 1 MiB piece of one
     contiguous buffer of the same bytes.

    mpirun -np 2 python3 scripts/python_bench.py [--steps 20] [--warmup 3]

A step's time is the slowest rank's (ranks start each step together after a barrier; chorus
and mpi4py steps alternate); the script prints the medians and the ratio
"chorus.torch / mpi4py ..." (below 1: chorus is faster).
mpi4py initialises MPI (MPI_THREAD_MULTIPLE) before chorus starts; chorus then runs on its own
duplicate of MPI_COMM_WORLD, so both can be used in one process.
"""

import argparse
import statistics
import time

from mpi4py import MPI  # first: MPI is initialised here; chorus reuses it

import numpy as np
import torch

import chorus.torch as hvd

MIB = 1 << 20


def resnet50_shapes():
    from torchvision import models
    return [tuple(p.shape) for p in models.resnet50().parameters()]


def timed_pair(comm, fn_a, fn_b, steps, warmup):
    """Medians over `steps` of the slowest rank's time of fn_a() and of fn_b().

    The two alternate step by step (after `warmup` untimed calls of each), so that drift in
    the machine's speed hits both alike.
    """
    for _ in range(warmup):
        fn_a()
        fn_b()
    times_a, times_b = [], []
    for _ in range(steps):
        for fn, times in ((fn_a, times_a), (fn_b, times_b)):
            comm.Barrier()
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
            times.append(comm.allreduce(elapsed, op=MPI.MAX))
    return statistics.median(times_a), statistics.median(times_b)


def bench_small(comm, count, nbytes, steps, warmup):
    n = nbytes // 4
    tensors = [torch.ones(n) for _ in range(count)]
    arrays = [t.numpy() for t in tensors]  # the same memory, for mpi4py
    names = ["small.%d" % i for i in range(count)]

    def chorus_step():
        handles = [hvd.allreduce_async_(t, name=nm, op=hvd.Sum)
                   for t, nm in zip(tensors, names)]
        for h in handles:
            hvd.synchronize(h)

    def mpi_step():
        for a in arrays:
            comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)

    # Correctness on the first call (ones sum to size); then zeros, which stay finite.
    chorus_step()
    assert all(float(t[0]) == comm.Get_size() for t in tensors)
    for t in tensors:
        t.zero_()
    t_chorus, t_mpi = timed_pair(comm, chorus_step, mpi_step, steps, warmup)
    return t_chorus, t_mpi


def bench_resnet50(comm, steps, warmup):
    shapes = resnet50_shapes()
    tensors = [torch.ones(s) for s in shapes]
    total = sum(t.numel() for t in tensors)
    flat = np.ones(total, dtype=np.float32)
    piece = MIB // 4
    pieces = [flat[i:i + piece] for i in range(0, total, piece)]
    names = ["resnet50.grad.%d" % i for i in range(len(tensors))]
    order = list(reversed(range(len(tensors))))

    def chorus_step():
        handles = [hvd.allreduce_async_(tensors[i], name=names[i], op=hvd.Sum) for i in order]
        for h in handles:
            hvd.synchronize(h)

    def mpi_step():
        for p in pieces:
            comm.Allreduce(MPI.IN_PLACE, p, op=MPI.SUM)

    chorus_step()
    assert all(float(t.reshape(-1)[0]) == comm.Get_size() for t in tensors)
    for t in tensors:
        t.zero_()
    flat[:] = 0.0
    t_chorus, t_mpi = timed_pair(comm, chorus_step, mpi_step, steps, warmup)
    return t_chorus, t_mpi, len(tensors), total * 4, len(pieces)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--small-count", type=int, default=1000, help="small tensors per step")
    parser.add_argument("--small-bytes", type=int, default=1024, help="bytes per small tensor")
    parser.add_argument("--skip-resnet50", action="store_true", help="only the small case")
    args = parser.parse_args(argv)

    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        raise SystemExit("python_bench: MPI must provide MPI_THREAD_MULTIPLE for chorus")
    hvd.init()
    comm = MPI.COMM_WORLD
    assert hvd.rank() == comm.Get_rank() and hvd.size() == comm.Get_size()
    root = comm.Get_rank() == 0

    def say(s):
        if root:
            print(s, flush=True)

    say("python_bench: %d ranks, %d timed steps (+%d warmup), medians of the slowest rank"
        % (comm.Get_size(), args.steps, args.warmup))
    t_c, t_m = bench_small(comm, args.small_count, args.small_bytes, args.steps, args.warmup)
    say("small: %d x %d B float32 allreduce per step" % (args.small_count, args.small_bytes))
    say("  chorus.torch allreduce_async_+synchronize: %8.3f ms/step  (%6.1f us/tensor)"
        % (t_c * 1e3, t_c * 1e6 / args.small_count))
    say("  mpi4py Allreduce loop:                     %8.3f ms/step  (%6.1f us/tensor)"
        % (t_m * 1e3, t_m * 1e6 / args.small_count))
    say("  chorus.torch / mpi4py loop = %.2f" % (t_c / t_m))

    if not args.skip_resnet50:
        t_c, t_m, n, nbytes, npieces = bench_resnet50(comm, args.steps, args.warmup)
        say("resnet50: %d gradient tensors, %.1f MiB float32" % (n, nbytes / MIB))
        say("  chorus.torch allreduce_async_ (reverse order): %8.2f ms/step  (%6.2f GB/s)"
            % (t_c * 1e3, nbytes / t_c / 1e9))
        say("  mpi4py Allreduce per 1 MiB piece (%3d):        %8.2f ms/step  (%6.2f GB/s)"
            % (npieces, t_m * 1e3, nbytes / t_m / 1e9))
        say("  chorus.torch / mpi4py 1MiB pieces = %.2f" % (t_c / t_m))
    hvd.shutdown()


if __name__ == "__main__":
    main()
