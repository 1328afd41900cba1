"""Speed of chorus.torch against raw mpi4py on the same bytes, in one run:

  1. small: N x 1 KiB float32 tensors per step. chorus.torch: allreduce_async_ of each (named,
     as DistributedOptimizer does), then synchronize of every handle. mpi4py: the same N
     in-place comm.Allreduce calls in a Python loop. And the same gradients as views into
     buckets (as in 2: what DistributedOptimizer(gradient_as_bucket_view=True) does).
  2. resnet50: the 161 gradient tensors of torchvision's ResNet-50 (25.6 M float32).
     chorus.torch: allreduce_async_ of each in reverse order (the order backward produces
     them), then synchronize. mpi4py: in-place Allreduce of one contiguous buffer of the same
     bytes, in pieces of 1, 4, 8 and 16 MiB and whole; the fastest is the baseline. And the
     same gradients as views into persistent buckets (DistributedOptimizer's
     gradient_as_bucket_view: chorus/torch/buckets.py, 25 MiB buckets), one allreduce_async_
     per bucket, in place: the zero-copy path against the copying one, in the same round.

    mpirun -np 2 python3 scripts/python_bench.py [--steps 20] [--warmup 20] [--rounds 3]

The first steps of both sides run slower (chorus by up to 2x, the mpi4py loop by up to 1.5x on a
2-core machine) until the processes settle; the warmup leaves them out, as a training run of
thousands of steps would.

A step's time is the slowest rank's (ranks start each step together after a barrier;
configurations of one phase alternate step by step). The run is `--rounds` rounds of
chorus.init, chorus steps, chorus.shutdown, with a raw MPI phase before the first round and
after each, so that chorus's background thread (whose idle cycles use MPI too) competes with
none of the raw steps; a round's baseline is the faster median of the raw phases around it.
This machine's speed drifts by up to 2x over seconds, so ratios are taken within a round; the
script prints the median round's times and the per-round ratios "chorus.torch / ..." with
their median (below 1: chorus is faster). "CPU" is the CPU time of the whole process (all
threads) per tensor, averaged over the ranks: where the time goes when the ranks' threads
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


def bucket_views(shapes, names):
    """Parameters of `shapes` whose .grad are views into DistributedOptimizer's persistent
    buckets (chorus/torch/buckets.py, 25 MiB buckets)."""
    from chorus.torch.buckets import GradientBuckets
    params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    for p in params:
        p.grad = torch.zeros_like(p)
    return GradientBuckets(params, {p: n for p, n in zip(params, names)}, 25)


def allreduce_buckets(buckets):
    """One in-place allreduce per bucket (the gradients as views: no copy)."""
    handles = [hvd.allreduce_async_(b.flat, name=b.name, op=hvd.Sum) for b in buckets.buckets]
    for h in handles:
        hvd.synchronize(h)


def check_buckets(comm, buckets):
    """One bucket step on ones must give size everywhere; then zeros."""
    for b in buckets.buckets:
        b.flat.fill_(1.0)
    allreduce_buckets(buckets)
    assert all(float(b.flat[-1]) == comm.Get_size() for b in buckets.buckets)
    for b in buckets.buckets:
        b.flat.zero_()


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


class SmallCase:
    """N x `nbytes` float32 tensors: allreduce_async_ + synchronize of each through chorus.torch,
    against the same in-place comm.Allreduce calls in a Python loop (the same memory)."""

    def __init__(self, comm, count, nbytes):
        self.comm = comm
        self.count = count
        self.tensors = [torch.ones(nbytes // 4) for _ in range(count)]
        self.arrays = [t.numpy() for t in self.tensors]
        self.names = ["small.%d" % i for i in range(count)]
        self.buckets = bucket_views([t.shape for t in self.tensors], self.names)

    def chorus_step(self):
        handles = [hvd.allreduce_async_(t, name=nm, op=hvd.Sum)
                   for t, nm in zip(self.tensors, self.names)]
        for h in handles:
            hvd.synchronize(h)

    def bucket_step(self):
        allreduce_buckets(self.buckets)

    def raw_steps(self):
        def step():
            for a in self.arrays:
                self.comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)
        return [("mpi4py Allreduce loop", step)]

    def check_chorus(self):
        """One chorus step on ones must give size everywhere; then zeros (which stay finite)."""
        for t in self.tensors:
            t.fill_(1.0)
        self.chorus_step()
        assert all(float(t[0]) == self.comm.Get_size() for t in self.tensors)
        for t in self.tensors:
            t.zero_()
        check_buckets(self.comm, self.buckets)


# Raw MPI configurations for the ResNet-50 bytes: one Allreduce per piece of this many MiB
# (None: the whole buffer in one call). The fastest is chorus's baseline.
RAW_PIECES_MIB = (1, 4, 8, 16, None)
PER_TENSOR_LABEL = "mpi4py Allreduce per tensor (161, same tensors)"


class Resnet50Case:
    """The 161 gradients of ResNet-50: allreduce_async_ of each in reverse order (as backward
    produces them) through chorus.torch, against one contiguous buffer of the same bytes
    allreduced in pieces of RAW_PIECES_MIB, and against one Allreduce per tensor on the same
    161 tensors (what a per-tensor runtime without overhead would take: their separate
    allocations are slower to move than one buffer)."""

    def __init__(self, comm):
        self.comm = comm
        self.tensors = [torch.zeros(s) for s in resnet50_shapes()]
        self.total = sum(t.numel() for t in self.tensors)
        self.nbytes = self.total * 4
        self.flat = np.zeros(self.total, dtype=np.float32)
        self.names = ["resnet50.grad.%d" % i for i in range(len(self.tensors))]
        self.order = list(reversed(range(len(self.tensors))))
        self.buckets = bucket_views([t.shape for t in self.tensors], self.names)

    def chorus_step(self):
        handles = [hvd.allreduce_async_(self.tensors[i], name=self.names[i], op=hvd.Sum)
                   for i in self.order]
        for h in handles:
            hvd.synchronize(h)

    def bucket_step(self):
        """The gradients as views into buckets: one in-place allreduce per bucket."""
        allreduce_buckets(self.buckets)

    def raw_steps(self):
        arrays = [self.tensors[i].numpy() for i in self.order]

        def per_tensor():
            for a in arrays:
                self.comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)
        steps = [(PER_TENSOR_LABEL, per_tensor)]
        for mib in RAW_PIECES_MIB:
            piece = self.total if mib is None else mib * MIB // 4
            pieces = [self.flat[i:i + piece] for i in range(0, self.total, piece)]
            label = ("mpi4py one Allreduce, whole buffer" if mib is None else
                     "mpi4py Allreduce per %d MiB piece (%d)" % (mib, len(pieces)))

            def step(pieces=pieces):
                for p in pieces:
                    self.comm.Allreduce(MPI.IN_PLACE, p, op=MPI.SUM)
            steps.append((label, step))
        return steps

    def check_chorus(self):
        for t in self.tensors:
            t.fill_(1.0)
        self.chorus_step()
        assert all(float(t.reshape(-1)[0]) == self.comm.Get_size() for t in self.tensors)
        for t in self.tensors:
            t.zero_()
        check_buckets(self.comm, self.buckets)


def time_raw(comm, cases, steps, warmup):
    """{label: Timing} of every raw configuration of `cases` (alternating)."""
    labelled = [pair for case in cases for pair in case.raw_steps()]
    timings = timed(comm, [fn for _, fn in labelled], steps, warmup)
    return {label: t for (label, _), t in zip(labelled, timings)}


def faster(a, b):
    return a if a.wall <= b.wall else b


def median_ratio(ratios):
    """'m (lo-hi)' of per-round ratios."""
    return "%.2f (rounds: %s)" % (statistics.median(ratios),
                                  ", ".join("%.2f" % r for r in ratios))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of (chorus.init, chorus steps, chorus.shutdown) between "
                             "raw MPI phases; ratios are per round, their median reported")
    parser.add_argument("--small-count", type=int, default=1000, help="small tensors per step")
    parser.add_argument("--small-bytes", type=int, default=1024, help="bytes per small tensor")
    parser.add_argument("--skip-resnet50", action="store_true", help="only the small case")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 1 or args.warmup < 0:
        parser.error("--rounds and --steps must be positive, --warmup not negative")

    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        raise SystemExit("python_bench: MPI must provide MPI_THREAD_MULTIPLE for chorus")
    comm = MPI.COMM_WORLD
    root = comm.Get_rank() == 0

    def say(s):
        if root:
            print(s, flush=True)

    small = SmallCase(comm, args.small_count, args.small_bytes)
    cases = [small] if args.skip_resnet50 else [small, Resnet50Case(comm)]
    # The raw configurations run while chorus is not initialised (before each init and after
    # each shutdown), so that chorus's background thread competes with none of them; a round's
    # baseline is the faster of the raw phases around it. This machine's speed drifts over
    # seconds, so ratios are taken within a round.
    raws = [time_raw(comm, cases, args.steps, args.warmup)]
    chorus_rounds = []
    for _ in range(args.rounds):
        hvd.init()
        assert hvd.rank() == comm.Get_rank() and hvd.size() == comm.Get_size()
        for case in cases:
            case.check_chorus()
        # Per case: the per-tensor path, then the bucket views (steps[2k], steps[2k + 1]).
        steps = [step for case in cases for step in (case.chorus_step, case.bucket_step)]
        chorus_rounds.append(timed(comm, steps, args.steps, args.warmup))
        hvd.shutdown()
        raws.append(time_raw(comm, cases, args.steps, args.warmup))
    rounds = []  # (chorus timings, {label: raw timing}) per round
    for i, chorus in enumerate(chorus_rounds):
        before, after = raws[i], raws[i + 1]
        rounds.append((chorus, {label: faster(t, after[label]) for label, t in before.items()}))

    say("python_bench: %d ranks, %d rounds of %d timed steps (+%d warmup), medians of the "
        "slowest rank; raw MPI timed before chorus.init and after shutdown, the faster kept"
        % (comm.Get_size(), args.rounds, args.steps, args.warmup))
    n = args.small_count
    say("small: %d x %d B float32 allreduce per step (each line: the median round)"
        % (n, args.small_bytes))
    label = "mpi4py Allreduce loop"
    ratios = [chorus[0].wall / raw[label].wall for chorus, raw in rounds]
    chorus, raw = rounds[sorted(range(len(ratios)), key=ratios.__getitem__)[len(ratios) // 2]]
    t_c, t_m = chorus[0], raw[label]
    say("  chorus.torch allreduce_async_+synchronize: %8.3f ms/step  (%6.2f us/tensor; "
        "CPU %5.2f us/tensor/rank)" % (t_c.wall * 1e3, t_c.wall * 1e6 / n, t_c.cpu * 1e6 / n))
    say("  mpi4py Allreduce loop:                     %8.3f ms/step  (%6.2f us/tensor; "
        "CPU %5.2f us/tensor/rank)" % (t_m.wall * 1e3, t_m.wall * 1e6 / n, t_m.cpu * 1e6 / n))
    say("  chorus.torch / mpi4py loop = %s" % median_ratio(ratios))
    t_b = chorus[1]
    say("  chorus.torch, gradients as bucket views (%d bucket(s), in place): %8.3f ms/step  "
        "(%6.2f us/tensor)" % (len(small.buckets.buckets), t_b.wall * 1e3, t_b.wall * 1e6 / n))
    say("  bucket views / mpi4py loop = %s"
        % median_ratio([c[1].wall / raw[label].wall for c, raw in rounds]))

    if not args.skip_resnet50:
        resnet = cases[1]
        nbytes = resnet.nbytes
        labels = [label for label, _ in resnet.raw_steps()]
        fastest = [min(labels, key=lambda lb: raw[lb].wall) for _, raw in rounds]
        ratios = [chorus[2].wall / raw[best].wall for (chorus, raw), best in zip(rounds, fastest)]
        per_tensor = [chorus[2].wall / raw[PER_TENSOR_LABEL].wall for chorus, raw in rounds]
        mid = sorted(range(len(ratios)), key=ratios.__getitem__)[len(ratios) // 2]
        (chorus, raw), best = rounds[mid], fastest[mid]
        say("resnet50: %d gradient tensors, %.1f MiB float32 (each line: the median round)"
            % (len(resnet.tensors), nbytes / MIB))
        t_c = chorus[2]
        say("  chorus.torch allreduce_async_ (reverse order): %8.2f ms/step  (%6.2f GB/s)"
            % (t_c.wall * 1e3, nbytes / t_c.wall / 1e9))
        for lb in labels:
            say("  %-46s %8.2f ms/step  (%6.2f GB/s)" % (lb + ":", raw[lb].wall * 1e3,
                                                        nbytes / raw[lb].wall / 1e9))
        say("  chorus.torch / fastest raw (%s) = %s" % (best, median_ratio(ratios)))
        say("  chorus.torch / per-tensor raw on the same tensors = %s" % median_ratio(per_tensor))
        t_b = chorus[3]
        say("  chorus.torch, gradients as bucket views (%d buckets, in place): %8.2f ms/step  "
            "(%6.2f GB/s)" % (len(resnet.buckets.buckets), t_b.wall * 1e3, nbytes / t_b.wall / 1e9))
        views = [c[3].wall / c[2].wall for c, _ in rounds]
        say("  bucket views / copying path (per-tensor allreduce_async_) = %s"
            % median_ratio(views))
        best_views = [c[3].wall / raw[b].wall for (c, raw), b in zip(rounds, fastest)]
        say("  bucket views / fastest raw = %s" % median_ratio(best_views))


if __name__ == "__main__":
    main()
