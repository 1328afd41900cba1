"""The C ABI codes the package uses come from the extension (one source: chorus/types.h).

The tables must name every type and op once, the package's public constants must be those
values, and a code that crosses the C boundary must come back as what it was: a tensor of every
dtype keeps its dtype and values through a collective, and every reduce op the fast path of
allreduce_ takes computes that op.
"""

import pytest
import torch

import chorus.numpy as hvd_np
import chorus.torch as hvd
from chorus import _C
from chorus import handles
from chorus.torch import mpi_ops


def test_tables_name_every_code_once():
    assert sorted(_C.OP_TYPES.values()) == list(range(9))
    assert sorted(_C.REDUCE_OPS.values()) == list(range(6))
    assert sorted(_C.DTYPES.values()) == list(range(10))
    assert set(_C.DTYPES) == {"uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                              "float32", "float64", "bool"}


def test_public_constants_are_the_exported_codes():
    for name, code in _C.REDUCE_OPS.items():
        assert getattr(hvd, name) == code
        assert getattr(hvd_np, name) == code
    assert handles.ALLREDUCE == _C.OP_TYPES["allreduce"]
    assert handles.REMOVE_PROCESS_SET == _C.OP_TYPES["remove_process_set"]
    assert {str(t).replace("torch.", ""): c for t, c in mpi_ops._DTYPES.items()} == _C.DTYPES


@pytest.mark.parametrize("name", sorted(_C.DTYPES))
def test_every_dtype_crosses_the_boundary(name):
    dtype = getattr(torch, name)
    root = hvd.size() - 1
    values = torch.arange(6).reshape(2, 3) % 2 + hvd.rank()
    out = hvd.broadcast(values.to(dtype), root_rank=root, name="constants.bcast." + name)
    assert out.dtype == dtype
    assert torch.equal(out, (torch.arange(6).reshape(2, 3) % 2 + root).to(dtype))


@pytest.mark.parametrize("op_name", ["Sum", "Average", "Min", "Max", "Product"])
def test_fast_path_reduce_ops(op_name):
    # A named, contiguous CPU tensor in place: the C fast path of allreduce_async_.
    size = hvd.size()
    tensor = torch.full((5,), float(hvd.rank() + 1), dtype=torch.float64)
    handle = hvd.allreduce_async_(tensor, name="constants.op." + op_name, op=getattr(hvd, op_name))
    hvd.synchronize(handle)
    contributions = torch.arange(1, size + 1, dtype=torch.float64)
    expected = {
        "Sum": contributions.sum(),
        "Average": contributions.mean(),
        "Min": contributions.min(),
        "Max": contributions.max(),
        "Product": contributions.prod(),
    }[op_name]
    assert torch.allclose(tensor, torch.full((5,), float(expected), dtype=torch.float64))
