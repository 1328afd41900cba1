"""Speed of chorus.torch against raw mpi4py on the same bytes, in one run:

  1. small: N x 1 KiB float32 tensors per step. chorus.torch: allreduce_async_ of each (named,
     as DistributedOptimizer does), then synchronize of every handle. mpi4py: the same N
     in-place comm.Allreduce calls in a Python loop.
  2. resnet50: the 161 gradient tensors of torchvision's ResNet-50 (25.6 M float32).
     chorus.torch: allreduce_async_ of each in reverse order (the order backward produces
     them), then synchronize. mpi4py: in-place Allreduce of one contiguous buffer of the same
     bytes, in pieces of 1, 4, 8 and 16 MiB and whole; the fastest is the baseline.

    mpirun -np 2 python3 scripts/python_bench.py [--steps 20] [--warmup 3]

A step's time is the slowest rank's (ranks start each step together after a barrier; the
configurations alternate step by step); the script prints medians and the ratios
"chorus.torch / ..." (below 1: chorus is faster). "CPU" is the CPU time of the whole process
(all threads) per tensor, averaged over the ranks: where the time goes when the ranks' threads
outnumber the cores.
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


class Timing:
    """Medians over the timed steps: `wall`, the slowest rank's time; `cpu`, the CPU time this
    rank's process (every thread: Python's and chorus's background thread) spent, on average
    over the ranks."""

    def __init__(self, walls, cpus):
        self.wall = statistics.median(walls)
        self.cpu = statistics.median(cpus)


def timed(comm, fns, steps, warmup):
    """A Timing for each of `fns` over `steps` steps each.

    They alternate step by step (after `warmup` untimed calls of each), so that drift in the
    machine's speed hits all alike.
    """
    for _ in range(warmup):
        for fn in fns:
            fn()
    samples = [([], []) for _ in fns]
    size = comm.Get_size()
    for _ in range(steps):
        for fn, (walls, cpus) in zip(fns, samples):
            comm.Barrier()
            cpu_start = time.process_time()
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
            cpu = time.process_time() - cpu_start
            walls.append(comm.allreduce(elapsed, op=MPI.MAX))
            cpus.append(comm.allreduce(cpu, op=MPI.SUM) / size)
    return [Timing(walls, cpus) for walls, cpus in samples]


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
    return timed(comm, [chorus_step, mpi_step], steps, warmup)


# Raw MPI configurations for the ResNet-50 bytes: one Allreduce per piece of this many MiB
# (None: the whole buffer in one call). The fastest is chorus's baseline.
RAW_PIECES_MIB = (1, 4, 8, 16, None)


def bench_resnet50(comm, steps, warmup):
    """Times chorus.torch on the ResNet-50 gradients and every raw configuration of
    RAW_PIECES_MIB; returns (chorus Timing, [(label, Timing)], tensors, bytes)."""
    shapes = resnet50_shapes()
    tensors = [torch.ones(s) for s in shapes]
    total = sum(t.numel() for t in tensors)
    flat = np.ones(total, dtype=np.float32)
    names = ["resnet50.grad.%d" % i for i in range(len(tensors))]
    order = list(reversed(range(len(tensors))))

    def chorus_step():
        handles = [hvd.allreduce_async_(tensors[i], name=names[i], op=hvd.Sum) for i in order]
        for h in handles:
            hvd.synchronize(h)

    def raw_step(mib):
        piece = total if mib is None else mib * MIB // 4
        pieces = [flat[i:i + piece] for i in range(0, total, piece)]
        label = ("one Allreduce, whole buffer" if mib is None else
                 "Allreduce per %d MiB piece (%d)" % (mib, len(pieces)))

        def step():
            for p in pieces:
                comm.Allreduce(MPI.IN_PLACE, p, op=MPI.SUM)
        return label, step

    chorus_step()
    assert all(float(t.reshape(-1)[0]) == comm.Get_size() for t in tensors)
    for t in tensors:
        t.zero_()
    flat[:] = 0.0
    raws = [raw_step(mib) for mib in RAW_PIECES_MIB]
    timings = timed(comm, [chorus_step] + [step for _, step in raws], steps, warmup)
    return (timings[0], [(label, t) for (label, _), t in zip(raws, timings[1:])],
            len(tensors), total * 4)


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
    n = args.small_count
    say("small: %d x %d B float32 allreduce per step" % (n, args.small_bytes))
    say("  chorus.torch allreduce_async_+synchronize: %8.3f ms/step  (%6.2f us/tensor; "
        "CPU %5.2f us/tensor/rank)" % (t_c.wall * 1e3, t_c.wall * 1e6 / n, t_c.cpu * 1e6 / n))
    say("  mpi4py Allreduce loop:                     %8.3f ms/step  (%6.2f us/tensor; "
        "CPU %5.2f us/tensor/rank)" % (t_m.wall * 1e3, t_m.wall * 1e6 / n, t_m.cpu * 1e6 / n))
    say("  chorus.torch / mpi4py loop = %.2f" % (t_c.wall / t_m.wall))

    if not args.skip_resnet50:
        t_c, raws, count, nbytes = bench_resnet50(comm, args.steps, args.warmup)
        say("resnet50: %d gradient tensors, %.1f MiB float32" % (count, nbytes / MIB))
        say("  chorus.torch allreduce_async_ (reverse order): %8.2f ms/step  (%6.2f GB/s)"
            % (t_c.wall * 1e3, nbytes / t_c.wall / 1e9))
        for label, t in raws:
            say("  mpi4py %-39s %8.2f ms/step  (%6.2f GB/s)"
                % (label + ":", t.wall * 1e3, nbytes / t.wall / 1e9))
        best_label, best = min(raws, key=lambda r: r[1].wall)
        say("  chorus.torch / fastest raw (%s) = %.2f" % (best_label, t_c.wall / best.wall))
    hvd.shutdown()


if __name__ == "__main__":
    main()
