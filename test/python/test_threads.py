"""synchronize() releases the GIL while it waits."""

import threading

import torch

import chorus.torch as hvd


def test_synchronize_releases_gil():
    # Op A completes only after every rank but 0 has finished op B. Rank 0 waits for A in a
    # second thread and runs B on the main thread meanwhile: if the waiting thread held the
    # GIL, rank 0 could never submit B and the job would hang.
    rank, size = hvd.rank(), hvd.size()
    a = torch.full((4,), float(rank))
    result = {}
    if rank == 0:
        h_a = hvd.allreduce_async(a, op=hvd.Sum, name="gil.a")
        t = threading.Thread(target=lambda: result.setdefault("a", hvd.synchronize(h_a)))
        t.start()
        b = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="gil.b")
        t.join()
    else:
        b = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="gil.b")
        result["a"] = hvd.allreduce(a, op=hvd.Sum, name="gil.a")
    assert b.tolist() == [float(size)] * 2
    assert result["a"].tolist() == [float(sum(range(size)))] * 4
