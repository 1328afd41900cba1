"""The runtime's own cost per tensor from Python: the twin of `chorus_bench overhead`.

For each count n of tensors (1, 10, 100, 1000, 10000 by default), each of --bytes bytes
(float32), a step calls chorus.torch's allreduce_async_ on each (named, in-place Average, last
tensor first, as DistributedOptimizer's hooks do) and then synchronize on every handle. On one
rank an allreduce moves nothing, so every microsecond measured is chorus's (and Python's):
the binding's fast path, which submits a name's registered op from its second step on
(Note [Registered ops] in runtime/submit/op_slots.h), the background loop's cycle and the wake-ups.

Reported per tensor, as medians over the timed steps: the allreduce_async_ calls (first call to
last return, / n), the synchronize calls, and the whole step.

    python3 scripts/overhead_bench.py [--counts 1 10 100 1000 10000] [--bytes 1024]
                                      [--steps 200] [--warmup 10] [--json FILE]

Runs on any number of ranks under mpirun or chorusrun (then bytes do move); the host cost is
what one rank shows.
"""

import argparse
import json
import os
import statistics
import time

import torch

import chorus.torch as hvd


def step(tensors, names):
    """One step; (submit seconds, synchronize seconds)."""
    start = time.perf_counter()
    handles = [hvd.allreduce_async_(t, name=nm) for t, nm in zip(tensors, names)]
    submitted = time.perf_counter()
    for h in handles:
        hvd.synchronize(h)
    return submitted - start, time.perf_counter() - submitted


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 10, 100, 1000, 10000],
                        help="numbers of tensors per step")
    parser.add_argument("--bytes", type=int, default=1024, help="bytes per tensor (float32)")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per count")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if (args.steps < 1 or args.warmup < 0 or args.bytes < 4 or args.bytes % 4
            or any(c < 1 for c in args.counts)):
        parser.error("need --steps >= 1, --warmup >= 0, --bytes a positive multiple of 4 and "
                     "positive --counts")

    # The response cache holds every tensor of the largest step (unless the caller says
    # otherwise), as a job with that many gradients would configure it.
    os.environ.setdefault("CHORUS_CACHE_CAPACITY", str(max(4096, max(args.counts) + 16)))
    hvd.init()
    root = hvd.rank() == 0
    ranks = hvd.size()
    rows = []
    if root:
        print("# overhead_bench.py: %d rank(s), in-place float32 Average allreduce_async_ of "
              "%d bytes, %d steps (+%d warmup) per count" % (hvd.size(), args.bytes, args.steps,
                                                             args.warmup), flush=True)
        print("# %8s  %18s  %18s  %16s  %10s" % ("tensors", "async ns/tensor",
                                                   "synchronize ns/t", "step ns/tensor",
                                                   "step us"), flush=True)
    for n in args.counts:
        tensors = [torch.full((args.bytes // 4,), float(hvd.rank() + 1)) for _ in range(n)]
        names = ["overhead.%d" % k for k in range(n)]
        order = list(reversed(range(n)))
        tensors = [tensors[k] for k in order]
        names = [names[k] for k in order]
        step(tensors, names)  # checked: the average of rank + 1 over the ranks
        want = (hvd.size() + 1) / 2.0
        if any(float(t[0]) != want or float(t[-1]) != want for t in tensors):
            raise SystemExit("overhead_bench: wrong average (expected %g)" % want)
        for _ in range(args.warmup):
            step(tensors, names)
        submits, syncs, steps = [], [], []
        for _ in range(args.steps):
            hvd.allreduce(torch.zeros(1), name="overhead.barrier", op=hvd.Sum)
            sub, syn = step(tensors, names)
            submits.append(sub)
            syncs.append(syn)
            steps.append(sub + syn)
        sub, syn, st = (statistics.median(x) for x in (submits, syncs, steps))
        row = {"tensors": n, "async_ns_per_tensor": sub * 1e9 / n,
               "synchronize_ns_per_tensor": syn * 1e9 / n, "step_ns_per_tensor": st * 1e9 / n,
               "step_us": st * 1e6}
        rows.append(row)
        if root:
            print("  %8d  %18.1f  %18.1f  %16.1f  %10.1f" % (
                n, row["async_ns_per_tensor"], row["synchronize_ns_per_tensor"],
                row["step_ns_per_tensor"], row["step_us"]), flush=True)
    hvd.shutdown()
    if root and args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "overhead_python", "ranks": ranks,
                       "bytes_per_tensor": args.bytes, "steps": args.steps,
                       "warmup": args.warmup, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
