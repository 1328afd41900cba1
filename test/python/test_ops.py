"""Collectives on CPU tensors against values computed independently on every rank.

Rank r's input is a deterministic function of r, so each rank rebuilds every rank's input
locally and computes the expected result with plain torch.
"""

import os
import time
import warnings

import pytest
import torch

import chorus.torch as hvd

DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def rank_input(r, shape, dtype):
    """Small values (1..4) so that sums and products fit every dtype exactly."""
    n = 1
    for d in shape:
        n *= d
    vals = (torch.arange(n, dtype=torch.int64) * (r + 3) + r) % 4 + 1
    return vals.reshape(shape).to(dtype)


def all_inputs(shape, dtype):
    return [rank_input(r, shape, dtype) for r in range(hvd.size())]


def expected_reduce(inputs, op):
    wide = torch.stack([t.double() for t in inputs])
    if op == hvd.Sum:
        return wide.sum(0)
    if op == hvd.Average:
        return wide.sum(0) * (1.0 / len(inputs))
    if op == hvd.Min:
        return wide.min(0).values
    if op == hvd.Max:
        return wide.max(0).values
    if op == hvd.Product:
        return wide.prod(0)
    raise AssertionError(op)


def check_close(actual, expected_double, dtype):
    if dtype.is_floating_point:
        tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-6)
        assert torch.allclose(actual.double(), expected_double, rtol=tol, atol=tol), (
            actual, expected_double)
    else:
        assert torch.equal(actual.double(), expected_double.trunc()), (actual, expected_double)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product])
def test_allreduce_ops(dtype, op):
    shape = (3, 5)
    inputs = all_inputs(shape, dtype)
    mine = inputs[hvd.rank()].clone()
    out = hvd.allreduce(mine, op=op, name="ar.%s.%s" % (dtype, op))
    assert out.dtype == dtype and out.shape == shape
    assert torch.equal(mine, inputs[hvd.rank()])  # input unchanged
    check_close(out, expected_reduce(inputs, op), dtype)


def test_allreduce_default_is_average():
    inputs = all_inputs((4,), torch.float64)
    out = hvd.allreduce(inputs[hvd.rank()])
    assert torch.allclose(out, expected_reduce(inputs, hvd.Average))


def test_allreduce_integer_average_truncates():
    size = hvd.size()
    t = torch.tensor([hvd.rank() + 1, 7 * (hvd.rank() + 1), -(hvd.rank() + 2)],
                     dtype=torch.int32)
    out = hvd.allreduce(t, op=hvd.Average, name="int_avg")
    sums = [sum(r + 1 for r in range(size)), sum(7 * (r + 1) for r in range(size)),
            -sum(r + 2 for r in range(size))]
    assert out.tolist() == [int(s * (1.0 / size)) for s in sums]


def test_allreduce_deprecated_average_argument():
    inputs = all_inputs((6,), torch.float32)
    with pytest.warns(DeprecationWarning):
        summed = hvd.allreduce(inputs[hvd.rank()], average=False, name="dep_sum")
    assert torch.allclose(summed.double(), expected_reduce(inputs, hvd.Sum))
    with pytest.warns(DeprecationWarning):
        avg = hvd.allreduce(inputs[hvd.rank()], average=True, name="dep_avg")
    assert torch.allclose(avg.double(), expected_reduce(inputs, hvd.Average))
    with pytest.raises(ValueError, match="supersedes"):
        hvd.allreduce(inputs[hvd.rank()], average=True, op=hvd.Sum)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.float64])
def test_allreduce_pre_postscale(dtype):
    inputs = all_inputs((7,), dtype)
    out = hvd.allreduce(inputs[hvd.rank()], op=hvd.Sum, prescale_factor=2.0,
                        postscale_factor=3.0, name="scaled.%s" % dtype)
    check_close(out, expected_reduce(inputs, hvd.Sum) * 6.0, dtype)
    avg = hvd.allreduce(inputs[hvd.rank()], op=hvd.Average, postscale_factor=2.0,
                        name="scaled_avg.%s" % dtype)
    if dtype.is_floating_point:
        check_close(avg, expected_reduce(inputs, hvd.Average) * 2.0, dtype)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_allreduce_in_place(dtype):
    inputs = all_inputs((2, 3), dtype)
    t = inputs[hvd.rank()].clone()
    out = hvd.allreduce_(t, op=hvd.Sum, name="inplace.%s" % dtype)
    assert out is t
    check_close(t, expected_reduce(inputs, hvd.Sum), dtype)


def test_allreduce_non_contiguous():
    inputs = [x.t() for x in all_inputs((3, 4), torch.float32)]
    mine = inputs[hvd.rank()]
    assert not mine.is_contiguous()
    out = hvd.allreduce(mine, op=hvd.Sum, name="noncontig")
    assert torch.allclose(out.double(), expected_reduce(inputs, hvd.Sum))
    t = mine.clone().t().contiguous().t()  # non-contiguous copy
    assert not t.is_contiguous()
    res = hvd.allreduce_(t, op=hvd.Max, name="noncontig_inplace")
    assert res is t
    assert torch.allclose(t.double(), expected_reduce(inputs, hvd.Max))


def test_allreduce_async_poll_synchronize():
    inputs = all_inputs((1000,), torch.float32)
    handles = [hvd.allreduce_async(inputs[hvd.rank()] * (i + 1), op=hvd.Sum,
                                   name="async.%d" % i) for i in range(4)]
    inplace = inputs[hvd.rank()].clone()
    h2 = hvd.allreduce_async_(inplace, op=hvd.Sum, name="async_inplace")
    for h in handles + [h2]:
        assert hvd.poll(h) in (True, False)
    results = [hvd.synchronize(h) for h in handles]
    assert hvd.synchronize(h2) is inplace
    exp = expected_reduce(inputs, hvd.Sum)
    for i, r in enumerate(results):
        assert torch.allclose(r.double(), exp * (i + 1))
    assert torch.allclose(inplace.double(), exp)
    # A completed and released handle reads as done.
    assert hvd.poll(handles[0]) is True


def test_allreduce_unnamed_ops_match_across_ranks():
    inputs = all_inputs((5,), torch.float64)
    outs = [hvd.allreduce(inputs[hvd.rank()] + i, op=hvd.Sum) for i in range(3)]
    for i, o in enumerate(outs):
        assert torch.allclose(o, expected_reduce(inputs, hvd.Sum) + i * hvd.size())


def test_grouped_allreduce():
    a = all_inputs((3,), torch.float32)
    b = all_inputs((2, 2), torch.int32)
    outs = hvd.grouped_allreduce([a[hvd.rank()], b[hvd.rank()]], op=hvd.Sum, name="grp")
    assert torch.allclose(outs[0].double(), expected_reduce(a, hvd.Sum))
    assert torch.equal(outs[1].double(), expected_reduce(b, hvd.Sum))
    ta, tb = a[hvd.rank()].clone(), b[hvd.rank()].clone()
    res = hvd.grouped_allreduce_([ta, tb], op=hvd.Max, name="grp_inplace")
    assert res[0] is ta and res[1] is tb
    assert torch.allclose(ta.double(), expected_reduce(a, hvd.Max))
    assert torch.equal(tb.double(), expected_reduce(b, hvd.Max))
    h = hvd.grouped_allreduce_async([a[hvd.rank()]], name="grp_async")
    assert torch.allclose(hvd.synchronize(h)[0].double(), expected_reduce(a, hvd.Average))


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_allgather_variable_rows(dtype):
    inputs = [rank_input(r, (r + 1, 3), dtype) for r in range(hvd.size())]
    if dtype == torch.bool:
        inputs = [x > 2 for x in inputs]
    out = hvd.allgather(inputs[hvd.rank()], name="ag.%s" % dtype)
    assert out.dtype == inputs[0].dtype
    assert torch.equal(out, torch.cat(inputs, 0))


def test_allgather_async_and_grouped():
    inputs = [rank_input(r, (2, 2), torch.float32) for r in range(hvd.size())]
    h = hvd.allgather_async(inputs[hvd.rank()], name="ag_async")
    assert torch.equal(hvd.synchronize(h), torch.cat(inputs))
    ints = [torch.full((r + 2,), r, dtype=torch.int64) for r in range(hvd.size())]
    outs = hvd.grouped_allgather([inputs[hvd.rank()], ints[hvd.rank()]], name="ag_grp")
    assert torch.equal(outs[0], torch.cat(inputs))
    assert torch.equal(outs[1], torch.cat(ints))


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_runtime_outputs_are_owned_writable_and_freed():
    """allgather / alltoall / reducescatter hand the runtime's output buffer to the returned
    tensor (DLPack, no copy): it is writable, and it is freed when the tensor goes."""
    size, rank = hvd.size(), hvd.rank()
    rows = 6 << 13  # 1.5 MiB of float32 x 8 per rank; divides among 2 and 3 ranks
    mine = torch.full((rows, 8), float(rank))

    def round_():
        out = hvd.allgather(mine, name="free_ag")
        assert out.shape == (rows * size, 8) and float(out[-1, 0]) == size - 1
        out += 1  # the tensor owns its memory: writing to it is fine
        assert float(out[0, 0]) == 1.0
        out, received = hvd.alltoall(mine, splits=[rows // size] * size, name="free_a2a")
        assert out.shape == (rows, 8) and received.tolist() == [rows // size] * size
        out = hvd.reducescatter(mine, op=hvd.Sum, name="free_rs")
        assert float(out[0, 0]) == sum(range(size))

    for _ in range(4):
        round_()
    start = rss_bytes()
    iterations = 30
    for _ in range(iterations):
        round_()
    grown = rss_bytes() - start
    per_round = mine.numel() * 4 * (2 * size + 2)  # what one round would leak
    assert grown < per_round * iterations / 4, (grown, per_round)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int64, torch.float16, torch.float32,
                                   torch.bool])
def test_broadcast_every_root(dtype):
    for root in range(hvd.size()):
        inputs = [rank_input(r, (4, 3), dtype) for r in range(hvd.size())]
        if dtype == torch.bool:
            inputs = [x > 2 for x in inputs]
        mine = inputs[hvd.rank()].clone()
        out = hvd.broadcast(mine, root, name="bc.%s.%d" % (dtype, root))
        assert torch.equal(out, inputs[root])
        assert torch.equal(mine, inputs[hvd.rank()])  # input unchanged
        res = hvd.broadcast_(mine, root_rank=root, name="bc_.%s.%d" % (dtype, root))
        assert res is mine
        assert torch.equal(mine, inputs[root])


def test_broadcast_async_in_place_non_contiguous():
    inputs = [rank_input(r, (3, 5), torch.float64).t() for r in range(hvd.size())]
    mine = inputs[hvd.rank()].clone().t().contiguous().t()
    h = hvd.broadcast_async_(mine, 0, name="bc_async_nc")
    assert hvd.synchronize(h) is mine
    assert torch.equal(mine, inputs[0])
    h = hvd.broadcast_async(inputs[hvd.rank()], 0, name="bc_async")
    assert torch.equal(hvd.synchronize(h), inputs[0])


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.float64])
def test_alltoall_equal_split(dtype):
    size, rank = hvd.size(), hvd.rank()
    # Rank r sends row block j (2 rows) to rank j, valued 100*r + j.
    inputs = [torch.cat([torch.full((2, 3), 100 * r + j, dtype=dtype) for j in range(size)])
              for r in range(size)]
    out = hvd.alltoall(inputs[rank], name="a2a.%s" % dtype)
    assert isinstance(out, torch.Tensor)
    exp = torch.cat([torch.full((2, 3), 100 * r + rank, dtype=dtype) for r in range(size)])
    assert torch.equal(out, exp)


def test_alltoall_splits():
    size, rank = hvd.size(), hvd.rank()
    # Rank r sends (j + r) % 3 + 1 rows to rank j, valued 10*r + j.
    def splits_of(r):
        return [(j + r) % 3 + 1 for j in range(size)]
    def input_of(r):
        return torch.cat([torch.full((n, 2), 10.0 * r + j)
                          for j, n in enumerate(splits_of(r))])
    out, received = hvd.alltoall(input_of(rank), splits=splits_of(rank), name="a2av")
    exp_splits = [splits_of(r)[rank] for r in range(size)]
    assert received.dtype == torch.int32
    assert received.tolist() == exp_splits
    exp = torch.cat([torch.full((splits_of(r)[rank], 2), 10.0 * r + rank) for r in range(size)])
    assert torch.equal(out, exp)
    # splits as a tensor, async
    h = hvd.alltoall_async(input_of(rank), splits=torch.tensor(splits_of(rank)),
                           name="a2av_async")
    out2, received2 = hvd.synchronize(h)
    assert torch.equal(out2, exp) and received2.tolist() == exp_splits


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_reducescatter(op, dtype):
    size, rank = hvd.size(), hvd.rank()
    inputs = all_inputs((2 * size, 3), dtype)
    out = hvd.reducescatter(inputs[rank], op=op, name="rs.%s.%s" % (dtype, op))
    full = expected_reduce(inputs, op)
    check_close(out, full[2 * rank:2 * rank + 2], dtype)
    h = hvd.reducescatter_async(inputs[rank], op=hvd.Sum, name="rs_async.%s.%s" % (dtype, op))
    check_close(hvd.synchronize(h), expected_reduce(inputs, hvd.Sum)[2 * rank:2 * rank + 2],
                dtype)


def test_reducescatter_default_average():
    size, rank = hvd.size(), hvd.rank()
    inputs = all_inputs((size, 4), torch.float64)
    out = hvd.reducescatter(inputs[rank])
    assert torch.allclose(out, expected_reduce(inputs, hvd.Average)[rank:rank + 1])


def test_barrier_waits_for_every_rank(tmp_path_factory):
    # Every rank but 0 leaves a file behind late (after a pause), then enters the barrier;
    # rank 0 enters at once and, once out, must find every file. A barrier that let rank 0
    # through early would find some missing. (The ranks of these tests share one machine.)
    rank, size = hvd.rank(), hvd.size()
    shared = hvd.broadcast_object(str(tmp_path_factory.mktemp("barrier")) if rank == 0 else None,
                                  root_rank=0, name="barrier.dir")
    for round_ in range(3):
        if rank != 0:
            time.sleep(0.2)
            with open(os.path.join(shared, "%d.%d" % (round_, rank)), "w"):
                pass
        hvd.barrier()
        if rank == 0:
            missing = [r for r in range(1, size)
                       if not os.path.exists(os.path.join(shared, "%d.%d" % (round_, r)))]
            assert missing == [], "rank 0 left barrier %d before ranks %s reached it" % (
                round_, missing)


def test_join_returns_same_rank_everywhere():
    last = hvd.join()
    assert 0 <= last < hvd.size()
    everyone = hvd.allgather(torch.tensor([last]), name="join_check")
    assert everyone.tolist() == [last] * hvd.size()


def test_mismatched_shape_raises_on_every_rank():
    t = torch.ones(hvd.rank() + 1)
    with pytest.raises(hvd.HorovodInternalError, match="bad_shape_tensor"):
        hvd.allreduce(t, name="bad_shape_tensor")
    # The runtime keeps working afterwards.
    out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after_error")
    assert out.tolist() == [float(hvd.size())] * 2


def test_mismatched_dtype_raises_on_every_rank():
    t = torch.ones(3, dtype=torch.float32 if hvd.rank() == 0 else torch.float64)
    h = hvd.allreduce_async(t, name="bad_dtype_tensor")
    with pytest.raises(hvd.HorovodInternalError, match="bad_dtype_tensor"):
        hvd.synchronize(h)


def test_mismatched_inplace_op_raises_at_synchronize_with_code():
    """The in-place per-gradient path (submitted and synchronized in C) fails like the general
    one: HorovodInternalError at synchronize, naming the tensor, with the status code; the
    handle is gone afterwards and the tensor is untouched."""
    from chorus import handles
    t = torch.ones(hvd.rank() + 2)
    h = hvd.allreduce_async_(t, name="bad_shape_inplace", op=hvd.Sum)
    with pytest.raises(hvd.HorovodInternalError, match="bad_shape_inplace") as info:
        hvd.synchronize(h)
    assert info.value.code == 3  # InvalidArgument
    assert not handles.is_pending(h)
    assert hvd.synchronize(h) is None  # unknown handles synchronize to None, as before
    assert t.tolist() == [1.0] * (hvd.rank() + 2)


def test_unsupported_dtype_raises_valueerror():
    with pytest.raises(ValueError, match="not supported"):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))


def test_bool_allreduce_rejected_locally():
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2, dtype=torch.bool), name="bool_ar")


def test_synchronize_unknown_handle_returns_none():
    assert hvd.synchronize(987654321) is None


def test_grouped_reducescatter():
    size, rank = hvd.size(), hvd.rank()
    a = all_inputs((size, 2), torch.float32)
    b = all_inputs((2 * size,), torch.int32)
    outs = hvd.grouped_reducescatter([a[rank], b[rank]], op=hvd.Sum, name="rs_grp")
    check_close(outs[0], expected_reduce(a, hvd.Sum)[rank:rank + 1], torch.float32)
    check_close(outs[1], expected_reduce(b, hvd.Sum)[2 * rank:2 * rank + 2], torch.int32)


def test_duplicate_in_flight_name_rejected():
    # Rank 0's "dup_name" cannot complete before the check: the other ranks submit it only
    # after "dup_gate", which rank 0 submits after the check.
    if hvd.rank() == 0:
        h = hvd.allreduce_async(torch.ones(3), op=hvd.Sum, name="dup_name")
        if hvd.size() > 1:
            with pytest.raises(ValueError, match="dup_name"):
                hvd.allreduce_async(torch.ones(3), op=hvd.Sum, name="dup_name")
        hvd.allreduce(torch.ones(1), name="dup_gate")
    else:
        hvd.allreduce(torch.ones(1), name="dup_gate")
        h = hvd.allreduce_async(torch.ones(3), op=hvd.Sum, name="dup_name")
    assert hvd.synchronize(h).tolist() == [float(hvd.size())] * 3


def test_broadcast_bad_root_rejected():
    with pytest.raises(ValueError):
        hvd.broadcast(torch.ones(2), root_rank=hvd.size(), name="bad_root")


def test_alltoall_bad_splits_rejected():
    size = hvd.size()
    with pytest.raises(ValueError):
        hvd.alltoall(torch.ones(size, 2), splits=[1] * (size + 1), name="bad_splits_count")
    with pytest.raises(ValueError):
        hvd.alltoall(torch.ones(size, 2), splits=[2] * size, name="bad_splits_sum")


@pytest.fixture(params=["fields_cpp", "fields_python"])
def fast_path_fields(request):
    """The fast path reading the tensor's fields in C++ (chorus.torch._fields, where it was
    built) and through Python calls (where it was not)."""
    from chorus.torch import mpi_ops
    if request.param == "fields_cpp" and mpi_ops._fields is None:
        pytest.skip("chorus.torch._fields was not built (no torch C++ headers)")
    mpi_ops._setup_fast_path(read_fields_in_cpp=request.param == "fields_cpp")
    try:
        yield request.param
    finally:
        mpi_ops._setup_fast_path()


def test_torch_fields_reader_reads_what_chorus_torch_would():
    """chorus.torch._fields, built wherever torch's C++ headers are (scripts/setup.sh installs
    them), gives each tensor the fast path takes the dtype chorus.torch maps its dtype to, and
    refuses every tensor the fast path must leave to the general one."""
    from chorus.torch import mpi_ops
    if not os.path.exists("/usr/include/torch/csrc/autograd/python_variable.h"):
        pytest.skip("no torch C++ headers: chorus.torch._fields is not built")
    assert mpi_ops._fields is not None
    for dtype, code in mpi_ops._DTYPES.items():
        assert mpi_ops._fields.dtype_code(torch.zeros(2, 3, dtype=dtype)) == code, dtype
        assert mpi_ops._fields.dtype_code(torch.zeros(2, 3, dtype=dtype).t()) is None, dtype
    assert mpi_ops._fields.dtype_code(torch.nn.Parameter(torch.zeros(2))) == \
        mpi_ops._DTYPES[torch.float32]
    for refused in (torch.zeros(2, dtype=torch.complex64), torch.ones(3).to_sparse(),
                    torch.zeros(2, device="meta"), "not a tensor", None):
        assert mpi_ops._fields.dtype_code(refused) is None, refused


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_async_inplace_fast_and_general_paths_agree(dtype, fast_path_fields):
    """allreduce_async_ of a named dense contiguous CPU tensor is checked and submitted in C
    (chorus.torch's per-gradient fast path); every other call takes the Python path. Both give
    the same results, in place, for every op, dtype, scale and tensor kind, with the tensor's
    fields read in C++ or through Python."""
    from chorus import handles
    inputs = all_inputs((4, 3), dtype)
    for op in [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]:
        for kind in ("fast", "parameter", "noncontig", "unnamed", "int_scale"):
            t = inputs[hvd.rank()].clone()
            name = "fastpath.%s.%s.%s.%s" % (fast_path_fields, dtype, op, kind)
            if kind == "parameter" and dtype.is_floating_point:
                t = torch.nn.Parameter(t, requires_grad=False)
            if kind == "noncontig":
                t = t.t().contiguous().t()
            before = len(handles._pending)
            if kind == "unnamed":
                h = hvd.allreduce_async_(t, op=op)
            elif kind == "int_scale":
                h = hvd.allreduce_async_(t, name=name, op=op, prescale_factor=1,
                                         postscale_factor=1)
            else:
                h = hvd.allreduce_async_(t, name=name, op=op)
            assert handles.is_pending(h) and len(handles._pending) == before + 1
            assert hvd.poll(h) in (True, False)
            assert hvd.synchronize(h) is t
            assert not handles.is_pending(h)
            check_close(t, expected_reduce(inputs, op), dtype)


def test_allreduce_async_inplace_fast_path_errors_match_general_path(fast_path_fields):
    t = torch.ones(3)
    if hvd.rank() == 0:
        # The op cannot complete before the other ranks submit it (after the barrier), so its
        # name is in flight here for sure: the runtime refuses a second op of that name, on
        # the fast path as on the general one.
        h = hvd.allreduce_async_(t, name="fastpath.dup", op=hvd.Sum)
        with pytest.raises(ValueError, match="already in flight"):
            hvd.allreduce_async_(torch.ones(3), name="fastpath.dup", op=hvd.Sum)
        with pytest.raises(ValueError, match="already in flight"):
            hvd.allreduce_async_(torch.ones(3, 2).t(), name="fastpath.dup", op=hvd.Sum,
                                 prescale_factor=2)
        hvd.barrier()
    else:
        hvd.barrier()
        h = hvd.allreduce_async_(t, name="fastpath.dup", op=hvd.Sum)
    hvd.synchronize(h)
    assert t.tolist() == [float(hvd.size())] * 3
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvd.allreduce_async_(torch.ones(3), name="fastpath.badop", op=17)
    with pytest.raises(hvd.HorovodInternalError, match="Adasum is not implemented"):
        hvd.allreduce_async_(torch.ones(3), name="fastpath.adasum", op=hvd.Adasum)
    with pytest.raises(ValueError, match="not supported"):
        hvd.allreduce_async_(torch.ones(3, dtype=torch.complex64), name="fastpath.complex")
    with pytest.raises(ValueError, match="sparse"):
        hvd.allreduce_async_(torch.ones(3).to_sparse(), name="fastpath.sparse")


def _c_handle(h):
    from chorus import handles
    return handles._pending[h][0]


def test_allreduce_async_inplace_registers_a_name_used_again():
    """From its second submission on, a name's in-place allreduce runs as a registered op (its
    C handle names a slot: bit 62 set; Note [Registered ops]); other parameters under the same
    name register again, an unreleased handle leaves the op to the general path, and the
    general path shares the name. Every result is checked."""
    size = hvd.size()
    slot_bit = 1 << 62
    t = torch.zeros(6)
    kinds = []
    for step in range(6):
        t.fill_(float(hvd.rank() + step))
        h = hvd.allreduce_async_(t, name="registered.grad", op=hvd.Sum)
        kinds.append(_c_handle(h) & slot_bit != 0)
        assert hvd.synchronize(h) is t
        assert t.tolist() == [float(sum(range(size)) + size * step)] * 6
    assert kinds == [False] + [True] * 5, kinds
    # Another shape, then another op, under the same name: registered anew, right results.
    for shape, op in (((2, 5), hvd.Sum), ((2, 5), hvd.Max), ((6,), hvd.Sum)):
        u = torch.full(shape, float(hvd.rank() + 1))
        h = hvd.allreduce_async_(u, name="registered.grad", op=op)
        assert _c_handle(h) & slot_bit != 0
        hvd.synchronize(h)
        want = float(size) if op == hvd.Max else float(size * (size + 1) // 2)
        assert u.flatten().tolist() == [want] * u.numel(), (shape, op)
    # An op left unsynchronized until it completed: the next one of the name goes the general
    # way (the slot still holds the first one's result), and both results are right.
    a, b = torch.ones(6), torch.full((6,), 2.0)
    h1 = hvd.allreduce_async_(a, name="registered.grad", op=hvd.Sum)
    while not hvd.poll(h1):
        time.sleep(0.001)
    h2 = hvd.allreduce_async_(b, name="registered.grad", op=hvd.Sum)
    assert _c_handle(h2) & slot_bit == 0
    hvd.synchronize(h2)
    hvd.synchronize(h1)
    assert a.tolist() == [float(size)] * 6 and b.tolist() == [2.0 * size] * 6
    # The general path's allreduce of the name, between registered ones.
    c = hvd.allreduce(torch.full((6,), 3.0), name="registered.grad", op=hvd.Sum)
    assert c.tolist() == [3.0 * size] * 6
    h = hvd.allreduce_async_(t.fill_(1.0), name="registered.grad", op=hvd.Sum)
    hvd.synchronize(h)
    assert t.tolist() == [float(size)] * 6


def test_allreduce_async_inplace_front_door_binds_arguments_like_python():
    """allreduce_async_ and synchronize run their common case in C: every way of passing the
    arguments gives the result of the Python function they wrap, and a bad call raises
    Python's own TypeError; name, doc and signature are the wrapped function's."""
    import inspect
    n = float(hvd.size())
    r = float(hvd.rank() + 1)
    total = sum(range(1, hvd.size() + 1))
    ps = hvd.global_process_set
    calls = [
        # (args, kwargs, expected value of every element)
        ((), {"name": "door.kw", "op": hvd.Sum}, total),
        ((None, "door.pos", hvd.Sum, 2.0, 0.5), {}, total),
        ((None, "door.pos_set", hvd.Sum, 1.0, 3.0, ps), {}, 3.0 * total),
        ((), {"name": "door.default_op"}, total / n),  # op None: Average
        ((), {"name": "door.average_true", "average": True}, total / n),
        ((), {"name": "door.average_false", "average": False}, total),
        ((), {"process_set": ps, "postscale_factor": 2.0, "name": "door.kw_order",
              "op": hvd.Max}, 2.0 * n),
        ((), {"name": "door.int_scale", "op": hvd.Sum, "prescale_factor": 2}, 2.0 * total),
    ]
    for args, kwargs, expected in calls:
        t = torch.full((5,), r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            h = hvd.allreduce_async_(t, *args, **kwargs)
        assert hvd.synchronize(h) is t
        assert t.tolist() == [expected] * 5, (args, kwargs)
    t = torch.full((2,), r)
    assert hvd.synchronize(hvd.allreduce_async_(tensor=t, name="door.tensor_kw", op=hvd.Sum)) is t
    assert t.tolist() == [float(total)] * 2
    for args, kwargs, match in [
            ((), {"name": "door.bogus", "bogus": 1}, "unexpected keyword argument 'bogus'"),
            ((None, None, None, 1.0, 1.0, ps, 7), {}, "positional arguments but 8 were given"),
            ((None,), {"average": None}, "multiple values for argument 'average'")]:
        with pytest.raises(TypeError, match=match):
            hvd.allreduce_async_(torch.ones(2), *args, **kwargs)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'tensor'"):
        hvd.allreduce_async_()
    with pytest.raises(ValueError, match="supersedes average"):
        hvd.allreduce_async_(torch.ones(2), average=True, op=hvd.Sum, name="door.both")
    with pytest.raises(TypeError):
        hvd.synchronize()
    assert hvd.synchronize(10 ** 12) is None  # an unknown handle, as in Horovod
    assert hvd.allreduce_async_.__name__ == "allreduce_async_"
    assert hvd.synchronize.__name__ == "synchronize"
    assert "In-place" in hvd.allreduce_async_.__doc__
    params = inspect.signature(hvd.allreduce_async_).parameters
    assert list(params) == ["tensor", "average", "name", "op", "prescale_factor",
                            "postscale_factor", "process_set"]
    assert params["process_set"].default is hvd.global_process_set
    assert list(inspect.signature(hvd.synchronize).parameters) == ["handle"]
