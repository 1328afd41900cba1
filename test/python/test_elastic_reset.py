"""chorus.elastic.reset outside an elastic job: the runtime is re-formed in place over the same
world (runtime/runtime.h, Note [Re-forming in place]). Every rank runs these tests in order.
"""

import torch

import chorus.torch as hvd
from chorus import _C, handles
from chorus.elastic.reset import reset


def test_a_reset_keeps_the_world_and_computes_again(world):
    rank, size = world
    before = hvd.allreduce(torch.full((3,), float(rank + 1)), op=hvd.Sum, name="reset.before")
    reset()
    assert hvd.is_initialized()
    assert (hvd.rank(), hvd.size()) == (rank, size)
    after = hvd.allreduce(torch.full((3,), float(rank + 1)), op=hvd.Sum, name="reset.before")
    assert torch.equal(before, after)
    assert after[0].item() == size * (size + 1) / 2


def test_a_handle_from_before_a_reset_stays_valid(world):
    # The op either completed before the loop stopped or failed with it: its handle survives the
    # reset either way (the runtime's handle table is kept).
    rank, size = world
    h = hvd.allreduce_async(torch.ones(5), op=hvd.Sum, name="reset.pending")
    # A reset stops the runtime on every rank at once: a rank submitting after another rank
    # has begun its reset is refused. The barrier returns once every rank has submitted.
    hvd.barrier()
    reset()
    try:
        out = hvd.synchronize(h)
        assert torch.equal(out, torch.full((5,), float(size)))
    except hvd.HorovodInternalError as e:
        assert "shut down" in str(e) or "re-forming" in str(e), str(e)


def test_a_reset_drops_process_sets_and_restarts_unnamed_ops(world):
    rank, size = world
    ps = hvd.add_process_set(list(range(size)))
    assert ps.process_set_id is not None
    hvd.allreduce(torch.ones(1))  # an unnamed op: the counter moves on
    reset()
    assert ps.process_set_id is None  # unregistered: add it again after a reset
    assert handles.op_name("allreduce", None, hvd.global_process_set) == "allreduce.noname.0"
    out = hvd.allreduce(torch.ones(2), op=hvd.Sum)  # "allreduce.noname.1" on every rank
    assert torch.equal(out, torch.full((2,), float(size)))
    again = hvd.add_process_set(list(range(size)))
    assert again.process_set_id == 1
    assert hvd.remove_process_set(again)


def test_suspended_chorus_refuses_ops_until_reformed(world):
    rank, size = world
    _C.suspend()
    assert hvd.is_initialized()
    try:
        hvd.allreduce(torch.ones(1), name="reset.refused")
        refused = None
    except (hvd.HorovodInternalError, ValueError) as e:
        refused = str(e)
    assert refused is not None and "suspended" in refused, refused
    reset()  # re-forms the suspended runtime
    out = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="reset.refused")
    assert out.item() == size
