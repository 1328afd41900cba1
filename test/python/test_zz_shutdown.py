"""Shutdown and re-init (runs last: the file name sorts after the others)."""

import pytest
import torch

import chorus.torch as hvd


def test_shutdown_then_reinit_with_process_sets():
    size = hvd.size()
    hvd.shutdown()
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="not been initialized"):
        hvd.rank()
    with pytest.raises(hvd.HorovodInternalError, match="not initialized"):
        hvd.allreduce(torch.ones(1))

    first = hvd.ProcessSet([0])
    hvd.init(process_sets=[first, list(range(size))])
    try:
        assert hvd.is_initialized() and hvd.size() == size
        assert first.process_set_id == 1
        if hvd.rank() == 0:
            out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="solo", process_set=first)
            assert out.tolist() == [1.0, 1.0]
        out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after_reinit")
        assert out.tolist() == [float(size)] * 2
    finally:
        if not hvd.is_initialized():
            hvd.init()


def test_registered_names_work_again_after_reinit():
    """A name the fast path registered in one runtime is registered again in the next (its
    old slot is unknown there: NotFound, never another op's), with the right results."""
    from chorus import handles
    size = hvd.size()
    t = torch.ones(4)
    for _ in range(3):  # registered from the second submission on
        hvd.synchronize(hvd.allreduce_async_(t.fill_(1.0), name="reinit.grad", op=hvd.Sum))
    hvd.shutdown()
    hvd.init()
    u = torch.ones(7)  # another name first: it may take the old name's slot index
    for _ in range(2):
        hvd.synchronize(hvd.allreduce_async_(u.fill_(2.0), name="reinit.other", op=hvd.Sum))
    for _ in range(2):
        h = hvd.allreduce_async_(t.fill_(1.0), name="reinit.grad", op=hvd.Sum)
        assert handles._pending[h][0] & (1 << 62)
        hvd.synchronize(h)
        assert t.tolist() == [float(size)] * 4
    assert u.tolist() == [2.0 * size] * 7
