"""Broadcasts restricted to a process set: the root is a world rank (as in horovod.torch).

The set used here, {1, ..., size-1}, leaves rank 0 out, so a root's world rank differs from
its rank within the set on every member: a root read as a set rank would pick the wrong data
or be refused.
"""

import pytest
import torch

import chorus.torch as hvd


@pytest.fixture
def upper_set():
    if hvd.size() < 2:
        pytest.skip("needs at least 2 ranks")
    ps = hvd.add_process_set(list(range(1, hvd.size())))
    yield ps
    assert hvd.remove_process_set(ps) is True


def test_broadcast_root_is_a_world_rank(upper_set):
    rank, size = hvd.rank(), hvd.size()
    if not upper_set.included():
        return
    for root in range(1, size):
        mine = torch.full((4, 2), float(rank), dtype=torch.float64)
        out = hvd.broadcast(mine, root, name="ps.bc.%d" % root, process_set=upper_set)
        assert torch.equal(out, torch.full((4, 2), float(root), dtype=torch.float64))
        assert torch.equal(mine, torch.full((4, 2), float(rank), dtype=torch.float64))
        inplace = torch.full((3,), rank, dtype=torch.int32)
        hvd.broadcast_(inplace, root, name="ps.bc_.%d" % root, process_set=upper_set)
        assert inplace.tolist() == [root] * 3
        obj = hvd.broadcast_object({"from": rank}, root_rank=root, name="ps.bo.%d" % root,
                                   process_set=upper_set)
        assert obj == {"from": root}


def test_broadcast_grad_in_a_set_goes_to_the_world_root(upper_set):
    rank, size = hvd.rank(), hvd.size()
    if not upper_set.included():
        return
    root = size - 1
    x = torch.full((3,), float(rank), dtype=torch.float64, requires_grad=True)
    y = hvd.broadcast(x, root, name="ps.bc.grad", process_set=upper_set)
    (y * 4.0).sum().backward()
    expected = 4.0 if rank == root else 0.0  # the average over the set of 4.0
    assert torch.equal(x.grad, torch.full((3,), expected, dtype=torch.float64))


def test_root_outside_the_set_raises_on_every_member(upper_set):
    rank = hvd.rank()
    if not upper_set.included():
        return
    # Rank 0 is a valid world rank but not in the set: every member refuses it locally, so no
    # member is left waiting for the others.
    with pytest.raises(ValueError, match=r"root rank 0 is not in process set %d"
                       % upper_set.process_set_id):
        hvd.broadcast(torch.ones(2), 0, name="ps.bc.outside", process_set=upper_set)
    with pytest.raises(ValueError, match="root rank 0 is not in process set"):
        hvd.broadcast_object("x", root_rank=0, name="ps.bo.outside", process_set=upper_set)
    # The set still works afterwards.
    out = hvd.allreduce(torch.tensor([float(rank)]), op=hvd.Sum, name="ps.after_outside",
                        process_set=upper_set)
    assert out.item() == sum(range(1, hvd.size()))
