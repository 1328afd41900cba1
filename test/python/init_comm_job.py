"""init(comm=...) across real processes (run with 3 ranks: ctest python_init_comm).

Not a pytest file: each phase initialises chorus on a different communicator, which the
session-wide init of the pytest suite does not allow. Exits non-zero on any mismatch.

1. comm = an mpi4py communicator: world ranks {0, 1} and {2} split into two communicators;
   each runs its own chorus world (sizes 2 and 1), and an allreduce sums within it only.
2. comm = [0, 1], a list of world ranks: ranks 0 and 1 form a world of size 2; rank 2 is not
   in the list and gets ValueError naming it (instead of Horovod's fallback to MPI_COMM_WORLD,
   whose collectives would wait forever for ranks 0 and 1).
3. Bad comm values raise ValueError before anything starts.
"""

import sys

from mpi4py import MPI  # first: MPI (MPI_THREAD_MULTIPLE) is initialised here

import torch

import chorus.torch as hvd


def check(cond, what):
    if not cond:
        print("init_comm_job: rank %d: FAILED: %s" % (MPI.COMM_WORLD.Get_rank(), what),
              flush=True)
        sys.exit(1)


def main():
    world = MPI.COMM_WORLD
    wrank, wsize = world.Get_rank(), world.Get_size()
    check(wsize == 3, "run me with 3 ranks, not %d" % wsize)

    # 1. An mpi4py communicator.
    color = 0 if wrank < 2 else 1
    sub = world.Split(color, wrank)
    hvd.init(comm=sub)
    expected_size = 2 if color == 0 else 1
    check(hvd.size() == expected_size and hvd.rank() == sub.Get_rank(),
          "topology on the split communicator: size %d rank %d" % (hvd.size(), hvd.rank()))
    out = hvd.allreduce(torch.tensor([float(wrank + 1)]), op=hvd.Sum, name="comm_sum")
    expected = 1.0 + 2.0 if color == 0 else 3.0
    check(float(out) == expected, "sum within the communicator: %s != %s" % (out, expected))
    hvd.shutdown()
    world.Barrier()

    # 2. A list of world ranks.
    if wrank < 2:
        hvd.init(comm=[0, 1])
        check(hvd.size() == 2 and hvd.rank() == wrank, "topology of comm=[0, 1]")
        out = hvd.allgather(torch.tensor([wrank]), name="list_gather")
        check(out.tolist() == [0, 1], "allgather over comm=[0, 1]: %s" % out.tolist())
        hvd.shutdown()
    else:
        try:
            hvd.init(comm=[0, 1])
        except ValueError as e:
            check("rank 2) is not in the list" in str(e), "message names the rank: %s" % e)
        else:
            check(False, "rank 2 outside comm=[0, 1] did not raise")
        check(not hvd.is_initialized(), "rank 2 left initialised")
    world.Barrier()

    # 3. Bad values.
    for bad in ([], [0, 7], "world", 3.5):
        try:
            hvd.init(comm=bad)
        except ValueError as e:
            check("comm" in str(e), "message names comm: %s" % e)
        else:
            check(False, "init(comm=%r) did not raise" % (bad,))
        check(not hvd.is_initialized(), "init(comm=%r) left chorus initialised" % (bad,))
    world.Barrier()
    if wrank == 0:
        print("init_comm_job: PASS", flush=True)


if __name__ == "__main__":
    main()
