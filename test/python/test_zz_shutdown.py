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
