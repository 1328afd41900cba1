"""chorus.numpy and the DLPack crossing (chorus._C.tensor_from_dlpack / result_to_dlpack).

Rank r's input is a deterministic function of r, so each rank rebuilds every rank's input and
computes the expected result with plain NumPy. Every rank runs every collective (error cases
included), in the same order.
"""

import sys

import numpy as np
import pytest
import torch
import torch.utils.dlpack

import chorus.numpy as hvdnp
from chorus import _C
from chorus import basics
from chorus import handles

DTYPES = [np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]
ALL_DTYPES = DTYPES + [np.bool_]


def rank_input(r, shape, dtype):
    """Small values (1..4; 0/1 for bool) so that sums and products fit every dtype exactly."""
    n = int(np.prod(shape, dtype=np.int64))
    vals = (np.arange(n, dtype=np.int64) * (r + 3) + r) % 4 + 1
    if dtype == np.bool_:
        vals = vals % 2
    return vals.reshape(shape).astype(dtype)


def all_inputs(shape, dtype):
    return [rank_input(r, shape, dtype) for r in range(hvdnp.size())]


def expected_reduce(inputs, op):
    wide = np.stack([a.astype(np.float64) for a in inputs])
    if op == hvdnp.Sum:
        return wide.sum(0)
    if op == hvdnp.Average:
        return wide.sum(0) * (1.0 / len(inputs))
    if op == hvdnp.Min:
        return wide.min(0)
    if op == hvdnp.Max:
        return wide.max(0)
    if op == hvdnp.Product:
        return wide.prod(0)
    raise AssertionError(op)


def check_close(actual, expected, dtype):
    assert actual.dtype == np.dtype(dtype) and actual.shape == expected.shape
    if np.issubdtype(dtype, np.floating):
        tol = 1e-2 if dtype == np.float16 else 1e-6
        np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(actual.astype(np.float64), np.trunc(expected))


def is_zero_copy(array):
    """True when `array` views memory NumPy did not allocate (the runtime's buffer)."""
    a = array
    while isinstance(a, np.ndarray):
        if a.flags.owndata:
            return False
        a = a.base
    return a is not None


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_reexports():
    assert hvdnp.init is basics.init and hvdnp.shutdown is basics.shutdown
    assert hvdnp.rank() == basics.rank() and hvdnp.size() == basics.size()
    assert hvdnp.global_process_set.process_set_id == 0


# ---------------------------------------------------------------------------------------------
# allreduce


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [hvdnp.Sum, hvdnp.Average, hvdnp.Min, hvdnp.Max, hvdnp.Product])
def test_allreduce_ops(dtype, op):
    inputs = all_inputs((3, 5), dtype)
    mine = inputs[hvdnp.rank()].copy()
    out = hvdnp.allreduce(mine, op=op, name="np_ar.%s.%s" % (np.dtype(dtype), op))
    np.testing.assert_array_equal(mine, inputs[hvdnp.rank()])  # input unchanged
    check_close(out, expected_reduce(inputs, op), dtype)


def test_allreduce_default_average_and_scaling():
    inputs = all_inputs((4,), np.float64)
    out = hvdnp.allreduce(inputs[hvdnp.rank()], name="np_ar_default")
    check_close(out, expected_reduce(inputs, hvdnp.Average), np.float64)
    out = hvdnp.allreduce(inputs[hvdnp.rank()], op=hvdnp.Sum, name="np_ar_scaled",
                          prescale_factor=2.0, postscale_factor=0.25)
    check_close(out, expected_reduce(inputs, hvdnp.Sum) * 0.5, np.float64)


def test_allreduce_integer_average_truncates():
    size = hvdnp.size()
    a = np.array([hvdnp.rank() + 1, -(hvdnp.rank() + 2)], dtype=np.int32)
    out = hvdnp.allreduce(a, op=hvdnp.Average, name="np_int_avg")
    sums = [sum(r + 1 for r in range(size)), -sum(r + 2 for r in range(size))]
    assert out.tolist() == [int(s * (1.0 / size)) for s in sums]


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.float64])
def test_allreduce_non_contiguous(dtype):
    rank = hvdnp.rank()
    full = [rank_input(r, (4, 6), dtype) for r in range(hvdnp.size())]
    views = [f[:, ::2].T for f in full]
    mine = full[rank].copy()
    view = mine[:, ::2].T
    assert not view.flags.c_contiguous
    out = hvdnp.allreduce(view, op=hvdnp.Sum, name="np_ar_nc.%s" % np.dtype(dtype))
    assert out.flags.c_contiguous and out.shape == (3, 4)
    check_close(out, expected_reduce(views, hvdnp.Sum), dtype)
    np.testing.assert_array_equal(mine, full[rank])


def test_allreduce_scalar_and_empty():
    size, rank = hvdnp.size(), hvdnp.rank()
    out = hvdnp.allreduce(np.array(rank + 1.0), op=hvdnp.Sum, name="np_ar_0d")
    assert out.shape == () and out.dtype == np.float64
    assert float(out) == size * (size + 1) / 2
    out = hvdnp.allreduce(np.float32(rank), op=hvdnp.Max, name="np_ar_0d_max")  # a scalar
    assert out.shape == () and out.dtype == np.float32 and float(out) == size - 1
    out = hvdnp.allreduce(np.zeros((0, 3), dtype=np.int64), op=hvdnp.Sum, name="np_ar_empty")
    assert out.shape == (0, 3) and out.dtype == np.int64


def test_allreduce_byteswapped_and_readonly_inputs():
    inputs = all_inputs((5,), np.float64)
    swapped = inputs[hvdnp.rank()].astype(">f8")
    out = hvdnp.allreduce(swapped, op=hvdnp.Sum, name="np_ar_swapped")
    assert out.dtype.isnative
    check_close(out, expected_reduce(inputs, hvdnp.Sum), np.float64)
    ro = inputs[hvdnp.rank()].copy()
    ro.setflags(write=False)
    out = hvdnp.allreduce(ro, op=hvdnp.Sum, name="np_ar_readonly")
    check_close(out, expected_reduce(inputs, hvdnp.Sum), np.float64)


def test_allreduce_process_set():
    if hvdnp.size() < 2:
        pytest.skip("needs 2 ranks")  # every rank skips alike
    ps = hvdnp.add_process_set([0, 1])
    try:
        if ps.included():
            out = hvdnp.allreduce(np.array([1.0, hvdnp.rank()]), op=hvdnp.Sum,
                                  name="np_ar_set", process_set=ps)
            assert out.tolist() == [2.0, 1.0]
            out = hvdnp.allgather(np.array([hvdnp.rank()]), process_set=ps)
            assert out.tolist() == [0, 1]
    finally:
        hvdnp.remove_process_set(ps)


# ---------------------------------------------------------------------------------------------
# allgather


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_allgather_variable_rows(dtype):
    size, rank = hvdnp.size(), hvdnp.rank()
    inputs = [rank_input(r, (r + 1, 2), dtype) for r in range(size)]
    out = hvdnp.allgather(inputs[rank], name="np_ag.%s" % np.dtype(dtype))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.concatenate(inputs))
    # The output views the runtime's buffer, and is writable.
    assert is_zero_copy(out)
    assert out.flags.writeable
    out[...] = inputs[0][0, 0]
    assert (out == inputs[0][0, 0]).all()


def test_allgather_non_contiguous_and_3d():
    size, rank = hvdnp.size(), hvdnp.rank()
    full = [rank_input(r, (3, 2, 4), np.int32) for r in range(size)]
    views = [f.transpose(2, 1, 0)[:, :, ::2] for f in full]
    out = hvdnp.allgather(views[rank], name="np_ag_nc")
    np.testing.assert_array_equal(out, np.concatenate(views))


def test_allgather_empty():
    size, rank = hvdnp.size(), hvdnp.rank()
    # Rank 0 contributes no rows.
    inputs = [rank_input(r, (r, 3), np.float32) for r in range(size)]
    out = hvdnp.allgather(inputs[rank], name="np_ag_some_empty")
    np.testing.assert_array_equal(out, np.concatenate(inputs))
    # Nobody contributes rows: an empty output.
    out = hvdnp.allgather(np.zeros((0, 3), dtype=np.float32), name="np_ag_all_empty")
    assert out.shape == (0, 3) and out.dtype == np.float32


def test_allgather_scalar_rejected():
    with pytest.raises(ValueError, match="scalar"):
        hvdnp.allgather(np.array(1.0), name="np_ag_0d")


# ---------------------------------------------------------------------------------------------
# broadcast


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_broadcast_every_root(dtype):
    size, rank = hvdnp.size(), hvdnp.rank()
    for root in range(size):
        mine = rank_input(rank, (2, 3), dtype) if dtype != np.bool_ else \
            np.full((2, 3), rank % 2 == 1)
        expected = rank_input(root, (2, 3), dtype) if dtype != np.bool_ else \
            np.full((2, 3), root % 2 == 1)
        before = mine.copy()
        out = hvdnp.broadcast(mine, root, name="np_bc.%s.%d" % (np.dtype(dtype), root))
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(mine, before)  # input unchanged


def test_broadcast_scalar_non_contiguous_and_empty():
    size, rank = hvdnp.size(), hvdnp.rank()
    root = size - 1
    out = hvdnp.broadcast(np.array(rank * 10, dtype=np.int16), root, name="np_bc_0d")
    assert out.shape == () and int(out) == root * 10
    full = rank_input(rank, (4, 4), np.float64)
    out = hvdnp.broadcast(full[::2, 1:], root, name="np_bc_nc")
    np.testing.assert_array_equal(out, rank_input(root, (4, 4), np.float64)[::2, 1:])
    out = hvdnp.broadcast(np.zeros((0,), dtype=np.uint8), root, name="np_bc_empty")
    assert out.shape == (0,)


def test_broadcast_object_from_every_root():
    for root in range(hvdnp.size()):
        mine = {"rank": hvdnp.rank(), "payload": list(range(hvdnp.rank() * 100))}
        out = hvdnp.broadcast_object(mine, root, name="np_bco.%d" % root)
        assert out == {"rank": root, "payload": list(range(root * 100))}
    # The default name is the type's: the same on every rank whatever the value.
    assert hvdnp.broadcast_object("x" * (hvdnp.rank() + 1)) == "x"


def test_broadcast_bad_root_rejected():
    with pytest.raises(ValueError):
        hvdnp.broadcast(np.ones(2), hvdnp.size(), name="np_bc_bad_root")


# ---------------------------------------------------------------------------------------------
# alltoall


def alltoall_input(r, rows, dtype):
    """Row i of rank r holds 100 * r + i (mod 128 for small dtypes), in 2 columns."""
    vals = (np.arange(rows, dtype=np.int64) + 100 * r) % 128
    return np.repeat(vals[:, None], 2, axis=1).astype(dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_alltoall_equal_split(dtype):
    size, rank = hvdnp.size(), hvdnp.rank()
    inputs = [alltoall_input(r, 2 * size, dtype) for r in range(size)]
    out, received = hvdnp.alltoall(inputs[rank], name="np_a2a.%s" % np.dtype(dtype))
    expected = np.concatenate([inputs[r][2 * rank:2 * rank + 2] for r in range(size)])
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.dtype(dtype) and is_zero_copy(out)
    assert received.dtype == np.int32 and received.tolist() == [2] * size


def test_alltoall_splits():
    size, rank = hvdnp.size(), hvdnp.rank()

    def splits_of(r):
        return [(r + i) % 3 for i in range(size)]  # zeros included

    inputs = [alltoall_input(r, sum(splits_of(r)), np.float32) for r in range(size)]
    expected_rows, expected_splits = [], []
    for r in range(size):
        s = splits_of(r)
        start = sum(s[:rank])
        expected_rows.append(inputs[r][start:start + s[rank]])
        expected_splits.append(s[rank])
    expected = np.concatenate(expected_rows)
    out, received = hvdnp.alltoall(inputs[rank], splits=splits_of(rank), name="np_a2av")
    np.testing.assert_array_equal(out, expected)
    assert received.tolist() == expected_splits
    # splits as an array, input non-contiguous
    wide = np.ascontiguousarray(np.repeat(inputs[rank], 2, axis=1))
    out, received = hvdnp.alltoall(wide[:, ::2], splits=np.array(splits_of(rank)),
                                   name="np_a2av_array")
    np.testing.assert_array_equal(out, expected)
    assert received.tolist() == expected_splits


def test_alltoall_empty_and_bad_arguments():
    size = hvdnp.size()
    out, received = hvdnp.alltoall(np.zeros((0, 2), dtype=np.int64), splits=[0] * size,
                                   name="np_a2a_empty")
    assert out.shape == (0, 2) and received.tolist() == [0] * size
    with pytest.raises(ValueError):
        hvdnp.alltoall(np.ones((size, 2)), splits=[1] * (size + 1), name="np_a2a_bad_count")
    with pytest.raises(ValueError, match="negative"):
        hvdnp.alltoall(np.ones((size, 2)), splits=[-1] * size, name="np_a2a_negative")
    with pytest.raises(ValueError, match="integers"):
        hvdnp.alltoall(np.ones((size, 2)), splits=np.ones(size), name="np_a2a_float")
    with pytest.raises(ValueError, match="scalar"):
        hvdnp.alltoall(np.array(1.0), name="np_a2a_0d")


# ---------------------------------------------------------------------------------------------
# reducescatter


@pytest.mark.parametrize("op", [hvdnp.Sum, hvdnp.Average, hvdnp.Max])
@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.float16, np.uint8])
def test_reducescatter(op, dtype):
    size, rank = hvdnp.size(), hvdnp.rank()
    dim0 = 2 * size + 1  # the first rank gets one more row
    inputs = all_inputs((dim0, 3), dtype)
    out = hvdnp.reducescatter(inputs[rank], op=op, name="np_rs.%s.%s" % (np.dtype(dtype), op))
    rows = [dim0 // size + (1 if r < dim0 % size else 0) for r in range(size)]
    start = sum(rows[:rank])
    check_close(out, expected_reduce(inputs, op)[start:start + rows[rank]], dtype)
    assert is_zero_copy(out)


def test_reducescatter_default_average_scaling_non_contiguous():
    size, rank = hvdnp.size(), hvdnp.rank()
    full = all_inputs((3, 2 * size), np.float64)
    views = [f.T for f in full]
    out = hvdnp.reducescatter(views[rank], name="np_rs_default", postscale_factor=3.0)
    check_close(out, expected_reduce(views, hvdnp.Average)[2 * rank:2 * rank + 2] * 3.0,
                np.float64)


# ---------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("bad", [np.ones(2, dtype=np.complex64), np.array(["a", "b"]),
                                 np.array([object(), 1], dtype=object)])
def test_unsupported_dtype_raises_valueerror(bad):
    name = str(bad.dtype)
    for call in (lambda: hvdnp.allreduce(bad), lambda: hvdnp.allgather(bad),
                 lambda: hvdnp.broadcast(bad, 0), lambda: hvdnp.alltoall(bad),
                 lambda: hvdnp.reducescatter(bad)):
        with pytest.raises(ValueError, match="Array type %s is not supported" % name):
            call()


def test_non_array_and_bad_op_rejected():
    with pytest.raises(ValueError, match="numpy.ndarray"):
        hvdnp.allreduce([1.0, 2.0])
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvdnp.allreduce(np.ones(2), op=42)
    with pytest.raises(ValueError):
        hvdnp.allreduce(np.ones(2, dtype=np.bool_), name="np_bool_ar")


def test_mismatched_shape_raises_on_every_rank():
    with pytest.raises(hvdnp.HorovodInternalError, match="np_bad_shape"):
        hvdnp.allreduce(np.ones(hvdnp.rank() + 1), name="np_bad_shape")
    out = hvdnp.allreduce(np.ones(2), op=hvdnp.Sum, name="np_after_error")
    assert out.tolist() == [float(hvdnp.size())] * 2


# ---------------------------------------------------------------------------------------------
# DLPack


def test_tensor_from_dlpack_torch_round_trip():
    base = torch.arange(12, dtype=torch.float32) * (hvdnp.rank() + 1)
    t = base[2:8].view(2, 3)  # storage offset: DLPack byte_offset or data, either way
    data, dtype, shape, device, keep = _C.tensor_from_dlpack(torch.utils.dlpack.to_dlpack(t))
    assert (data, dtype, shape, device) == (t.data_ptr(), 7, (2, 3), -1)
    # Allreduce in place through the imported description; the tensor sees the result.
    spec = _C.OpSpec()
    spec.type = handles.ALLREDUCE
    spec.name = "np_dlpack_torch_inplace"
    spec.input = _C.TensorSpec(data, dtype, list(shape), device)
    spec.reduce_op = hvdnp.Sum
    handles.synchronize(handles.submit([spec], (t, keep), lambda results: None))
    scale = sum(r + 1 for r in range(hvdnp.size()))
    assert torch.equal(t, torch.arange(2, 8, dtype=torch.float32).view(2, 3) * scale)
    # And back: an allgather output wrapped by torch without a copy.
    spec = _C.OpSpec()
    spec.type = handles.ALLGATHER
    spec.name = "np_dlpack_torch_gather"
    spec.input = _C.TensorSpec(data, dtype, list(shape), device)

    def finish(results):
        out = torch.utils.dlpack.from_dlpack(_C.result_to_dlpack(results[0], 7))
        assert results[0].take() == 0  # the capsule owns the result now
        with pytest.raises(ValueError, match="already taken"):
            _C.result_to_dlpack(results[0], 7)
        return out

    out = handles.synchronize(handles.submit([spec], (t, keep), finish))
    assert out.dtype == torch.float32 and out.shape == (2 * hvdnp.size(), 3)
    assert torch.equal(out, torch.cat([t] * hvdnp.size()))
    del keep


def test_tensor_from_dlpack_dtypes():
    expected = {torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4,
                torch.float16: 5, torch.bfloat16: 6, torch.float32: 7, torch.float64: 8}
    for torch_dtype, code in expected.items():
        t = torch.zeros(2, 2, dtype=torch_dtype)
        assert _C.tensor_from_dlpack(t.__dlpack__())[1] == code
    for np_dtype, code in [(np.uint8, 0), (np.int8, 1), (np.int16, 2), (np.int32, 3),
                           (np.int64, 4), (np.float16, 5), (np.float32, 7), (np.float64, 8)]:
        a = np.zeros(3, dtype=np_dtype)
        assert _C.tensor_from_dlpack(a.__dlpack__())[:4] == (a.ctypes.data, code, (3,), -1)
    b = np.zeros(3, dtype=np.bool_)
    assert _C.tensor_from_dlpack(b.view(np.uint8).__dlpack__(), 9)[1] == 9
    a0 = np.array(5.0)
    assert _C.tensor_from_dlpack(a0.__dlpack__())[2] == ()


def test_tensor_from_dlpack_errors():
    t = torch.arange(6.0).view(2, 3).t()
    capsule = torch.utils.dlpack.to_dlpack(t)
    with pytest.raises(ValueError, match="not contiguous"):
        _C.tensor_from_dlpack(capsule)
    # A rejected capsule is not consumed: another consumer can still take it.
    assert torch.equal(torch.utils.dlpack.from_dlpack(capsule), t)
    with pytest.raises(ValueError, match="already consumed"):
        _C.tensor_from_dlpack(capsule)
    with pytest.raises(ValueError, match="complex64 is not supported"):
        _C.tensor_from_dlpack(torch.zeros(2, dtype=torch.complex64).__dlpack__())
    with pytest.raises(ValueError, match="element size"):
        _C.tensor_from_dlpack(np.zeros(2, dtype=np.int32).__dlpack__(), 9)
    with pytest.raises(ValueError, match="unknown chorus dtype"):
        _C.tensor_from_dlpack(np.zeros(2, dtype=np.int32).__dlpack__(), 10)
    with pytest.raises(TypeError, match="DLPack capsule"):
        _C.tensor_from_dlpack(np.zeros(2))
    # Size-1 dimensions may have any stride.
    odd = np.zeros((3, 1, 4))[:, :, :]
    odd = np.lib.stride_tricks.as_strided(odd, strides=(32, 8, 8))
    assert _C.tensor_from_dlpack(odd.__dlpack__())[2] == (3, 1, 4)


def test_keepalive_releases_the_producer():
    a = np.arange(4.0)
    before = sys.getrefcount(a)
    keep = _C.tensor_from_dlpack(a.__dlpack__())[4]
    assert isinstance(keep, _C.DlpackTensor)
    assert sys.getrefcount(a) == before + 1  # NumPy's tensor holds the array
    del keep
    assert sys.getrefcount(a) == before


def test_result_to_dlpack_bad_arguments():
    spec = _C.OpSpec()
    spec.type = handles.ALLREDUCE
    spec.name = "np_r2d_no_output"
    a = np.ones(2)
    spec.input = _C.TensorSpec(a.ctypes.data, 8, [2], -1)
    spec.reduce_op = hvdnp.Sum

    def finish(results):
        with pytest.raises(ValueError, match="unknown chorus dtype"):
            _C.result_to_dlpack(results[0], 11)
        assert results[0].code == 0  # untouched
        with pytest.raises(ValueError, match="no runtime-allocated output"):
            _C.result_to_dlpack(results[0], 8)
        return results[0].take()  # taken (and freed) by the failed call

    assert handles.synchronize(handles.submit([spec], a, finish)) == 0

    spec = _C.OpSpec()
    spec.type = handles.ALLGATHER
    spec.name = "np_r2d_wrong_dtype"
    spec.input = _C.TensorSpec(a.ctypes.data, 8, [2], -1)

    with pytest.raises(TypeError, match="chorus._C.Result"):
        _C.result_to_dlpack(object(), 7)

    def finish_wrong(results):
        with pytest.raises(ValueError, match="bytes"):
            _C.result_to_dlpack(results[0], 3)  # 4-byte elements: 2x too few bytes

    handles.synchronize(handles.submit([spec], a, finish_wrong))


def test_outputs_are_freed():
    """Runtime outputs handed out through DLPack are freed: consumed or not, RSS stays flat."""
    size, rank = hvdnp.size(), hvdnp.rank()
    rows = 6 << 13  # 1.5 MiB of float32 x 8 per rank; divides among 2 and 3 ranks
    mine = np.full((rows, 8), rank, dtype=np.float32)

    def round_(i):
        out = hvdnp.allgather(mine, name="np_free_ag")
        assert out.shape == (rows * size, 8) and out[-1, 0] == size - 1
        out, _ = hvdnp.alltoall(mine, name="np_free_a2a")
        assert out.shape == (rows, 8)
        out = hvdnp.reducescatter(mine, op=hvdnp.Sum, name="np_free_rs")
        assert out[0, 0] == sum(range(size))
        # A capsule nobody consumes frees the result when it goes.
        spec = _C.OpSpec()
        spec.type = handles.ALLGATHER
        spec.name = "np_free_unconsumed"
        spec.input = _C.TensorSpec(mine.ctypes.data, 7, [rows, 8], -1)
        handles.synchronize(handles.submit(
            [spec], mine, lambda results: _C.result_to_dlpack(results[0], 7)))

    for i in range(4):
        round_(i)
    start = rss_bytes()
    iterations = 40
    for i in range(iterations):
        round_(i)
    grown = rss_bytes() - start
    per_round = mine.nbytes * (2 * size + 2)  # what one round would leak
    assert grown < per_round * iterations / 4, (grown, per_round)
