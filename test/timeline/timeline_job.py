"""A small chorus training-like job for the timeline tests (run under mpirun).

Each step submits, in a rank-dependent order, SMALL small allreduces (fused into one response),
one large allreduce (reduced in place, in pipeline chunks), one allgather and one broadcast, and
checks every result. Tensor names carry the step ("s3.w1") so that tests can tell which steps a
trace covers.

--mode plain     record what CHORUS_TIMELINE says
--mode dynamic   steps 0 and 3+ unrecorded: start_timeline(PATH) before step 1, stop after step 2
--mode crash     rank 0 kills itself with SIGKILL after --steps steps (a crash mid-recording)
"""

import argparse
import os
import signal

import torch

import chorus.torch as hvd

SMALL = 4
LARGE_ELEMENTS = 300000  # 1.2 MB of float32: above the in-place threshold (256 KiB)


def step_names(step):
    return (["s%d.w%d" % (step, i) for i in range(SMALL)] + ["s%d.big" % step] +
            ["s%d.gather" % step, "s%d.bcast" % step])


def run_step(step, rank, size):
    tensors = [torch.full((10 * (i + 1),), float(rank + 1)) for i in range(SMALL)]
    tensors.append(torch.full((LARGE_ELEMENTS,), float(rank + 1)))
    names = step_names(step)
    order = list(range(SMALL + 1))
    if rank % 2 == 1:
        order.reverse()
    handles = {}
    for i in order:
        handles[i] = hvd.allreduce_async_(tensors[i], name=names[i], op=hvd.Sum)
    gathered = hvd.allgather(torch.full((rank + 1, 2), float(rank)), name=names[SMALL + 1])
    bcast = hvd.broadcast(torch.full((3,), float(rank + 7)), root_rank=0, name=names[SMALL + 2])
    expected = size * (size + 1) / 2
    for i in order:
        out = hvd.synchronize(handles[i])
        assert torch.all(out == expected), (names[i], out[:3])
    assert gathered.shape == (size * (size + 1) // 2, 2)
    row = 0
    for r in range(size):
        assert torch.all(gathered[row:row + r + 1] == float(r))
        row += r + 1
    assert torch.all(bcast == 7.0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--mode", choices=["plain", "dynamic", "crash"], default="plain")
    parser.add_argument("--path", default="")
    args = parser.parse_args()

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for step in range(args.steps):
        if args.mode == "dynamic" and step == 1:
            hvd.start_timeline(args.path)
        run_step(step, rank, size)
        if args.mode == "dynamic" and step == 2:
            hvd.stop_timeline()
    if args.mode == "crash":
        hvd.barrier()
        if rank == 0:
            os.kill(os.getpid(), signal.SIGKILL)
    print("timeline job done on rank %d" % rank, flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
