"""A training loop under chorusrun --autotune (run by check_autotune.py, not by pytest).

Each step reduces six named float32 gradients (4 bytes to 4 MB, so that the fusion threshold,
the pipeline chunk and the in-place minimum all matter) with allreduce_async_ and checks every
result; between steps it sleeps 2 ms (the forward and backward passes). It runs until rank 0's
autotune log (argv[1]) holds the line of the choice ("best"), which rank 0 tells the others with
one more allreduce per step, or gives up after MAX_STEPS. Every rank then prints
"autotune_job: rank R: PASS after N steps".
"""

import sys
import time

import torch

import chorus.torch as hvd

SIZES = [1, 1000, 30000, 100000, 300000, 1000000]
MAX_STEPS = 3000


def fail(what):
    print("autotune_job: rank %d: FAILED: %s" % (hvd.rank(), what), flush=True)
    sys.exit(1)


def chosen(log_path):
    try:
        with open(log_path) as f:
            return any(",best," in line for line in f)
    except FileNotFoundError:
        return False


def main():
    log_path = sys.argv[1]
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    grads = [torch.empty(n) for n in SIZES]
    for step in range(MAX_STEPS):
        for g in grads:
            g.fill_(rank + 1 + step)
        handles = [hvd.allreduce_async_(g, name="grad.%d" % i, op=hvd.Sum)
                   for i, g in enumerate(grads)]
        for h in handles:
            hvd.synchronize(h)
        expected = size * (size + 1) / 2 + size * step
        for i, g in enumerate(grads):
            if g[0].item() != expected or g[-1].item() != expected:
                fail("step %d: grad.%d is %g, expected %g" % (step, i, g[0].item(), expected))
        done = torch.tensor([1.0 if rank == 0 and chosen(log_path) else 0.0])
        if hvd.allreduce(done, name="done", op=hvd.Sum).item() > 0:
            print("autotune_job: rank %d: PASS after %d steps" % (rank, step + 1), flush=True)
            hvd.shutdown()
            return
        time.sleep(0.002)
    fail("no choice in the autotune log after %d steps" % MAX_STEPS)


if __name__ == "__main__":
    main()
