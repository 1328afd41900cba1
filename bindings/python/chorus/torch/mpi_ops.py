"""Collective ops on torch tensors, with the names, arguments and defaults of horovod.torch.

Tensors cross to the runtime as (data_ptr, dtype, shape, device); runtime-allocated outputs
(allgather, alltoall, reducescatter) come back without a copy, through DLPack. Non-contiguous
inputs are copied to contiguous ones first (in-place variants copy the result back on
synchronize). Every tensor the runtime touches is kept alive by the handle table until
synchronize.

Errors: local argument errors raise ValueError at call time (ChorusValueError, also a
HorovodInternalError, when the runtime rejects the arguments); failures of the collective
itself (ranks disagree, shutdown, lost peer) raise HorovodInternalError at synchronize.
"""

import functools
import warnings

import torch
import torch.utils.dlpack as torch_dlpack

from chorus import _C
from chorus import basics as _basics
from chorus import handles as _handles
from chorus.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from chorus.process_sets import global_process_set
from chorus.torch.compression import Compression

Average = _basics.Average
Sum = _basics.Sum
Adasum = _basics.Adasum
Min = _basics.Min
Max = _basics.Max
Product = _basics.Product


# torch dtype -> chorus::DataType value (chorus/types.h): every type chorus has is a torch type
# of the same name.
_DTYPES = {getattr(torch, name): code for name, code in _C.DTYPES.items()}

_REDUCE_OPS = _basics.REDUCE_OPS

# The per-gradient fast path (bindings/python/src/torch_fast_path.cc): allreduce_async_ of a
# named, dense, contiguous CPU tensor and the synchronize of its handle run in C; every other
# call goes to the Python functions below (which bind the arguments and raise the errors).
# Where chorus.torch._fields was built (torch's C++ headers at build time), the tensor's fields
# are read in C++ rather than through five Python calls on it.
try:
    from chorus.torch import _fields
except ImportError:
    _fields = None


def _setup_fast_path(read_fields_in_cpp=True):
    """(Re)configures the fast path; the tests also run it with the fields read in Python."""
    reader = _fields.read if (read_fields_in_cpp and _fields is not None) else None
    _C.setup_torch_fast_path(_DTYPES, _handles._pending, _handles._next_handle,
                             (torch.Tensor, torch.nn.Parameter), reader)


_setup_fast_path()


def _front_door(kind, general, *extra):
    """`general` with its common case in C; it keeps general's name, doc and signature."""
    return functools.update_wrapper(_C.front_door(kind, general, *extra), general)

_op_name = _handles.op_name
_set_id = _handles.set_id


def _dtype_code(tensor):
    code = _DTYPES.get(tensor.dtype)
    if code is None:
        raise ValueError("Tensor type %s is not supported." % tensor.type())
    return code


def _device(tensor):
    if tensor.device.type == "cpu":
        return -1
    if tensor.device.type == "cuda":
        return tensor.device.index if tensor.device.index is not None else 0
    raise ValueError("tensors on device %s are not supported" % tensor.device)


def _spec(tensor):
    """The TensorSpec of a contiguous tensor."""
    return _C.TensorSpec(tensor.data_ptr(), _dtype_code(tensor), list(tensor.shape),
                         _device(tensor))


def _stream(tensor):
    """The stream a CUDA tensor is being produced on (torch's current stream of its device),
    as an integer cudaStream_t; 0 for host tensors. chorus reads the tensor only after the work
    queued on it so far."""
    if tensor.device.type != "cuda":
        return 0
    return torch.cuda.current_stream(tensor.device).cuda_stream


def _contiguous(tensor):
    if not isinstance(tensor, torch.Tensor):
        raise ValueError("expected a torch.Tensor, got %s" % type(tensor).__name__)
    _dtype_code(tensor)
    if tensor.is_sparse:
        raise ValueError("sparse tensors are not supported")
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def _new_op(op_type, name, process_set):
    spec = _C.OpSpec()
    spec.type = op_type
    spec.name = name
    spec.process_set_id = _set_id(process_set)
    return spec


def _output_tensor(result, dtype, device):
    """The runtime-allocated output of `result` as a tensor, without a copy: the tensor owns
    the runtime's buffer (through DLPack) and frees it when it goes. `result` is taken.

    bool crosses DLPack as uint8 (torch 1.13 exports and imports no DLPack bool). The output
    of an op on CUDA tensors is on the input's device, complete once the op's handle is done.
    """
    if dtype is torch.bool:
        return torch_dlpack.from_dlpack(_C.result_to_dlpack(result, 0)).view(torch.bool)
    return torch_dlpack.from_dlpack(_C.result_to_dlpack(result, _DTYPES[dtype]))


def _writeback(target, work):
    """Copies `work` into `target` unless they are the same tensor; returns target."""
    if work is not target:
        with torch.no_grad():
            target.copy_(work)
    return target


def handle_average_backwards_compatibility(op, average):
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of "
                             "them.")
        return op
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed in "
                      "v1.0", DeprecationWarning)
        return Average if average else Sum
    return Average


# ---------------------------------------------------------------------------------------------
# allreduce


def _reduction_spec(kind, tensor, name, op, process_set, prescale_factor, postscale_factor):
    """The op spec of a reduction (allreduce or reducescatter) of `tensor`, made contiguous;
    returns (spec, contiguous input)."""
    if op not in _REDUCE_OPS:
        raise ValueError("unknown reduction op %r" % (op,))
    work = _contiguous(tensor)
    spec = _new_op(kind, name, process_set)
    spec.input = _spec(work)
    spec.stream = _stream(work)
    spec.reduce_op = op
    spec.prescale_factor = float(prescale_factor)
    spec.postscale_factor = float(postscale_factor)
    return spec, work


def _allreduce_spec(tensor, output, name, op, prescale_factor, postscale_factor, process_set):
    """Builds the op for tensor -> output; returns (spec, work_in, work_out)."""
    spec, work_in = _reduction_spec(_handles.ALLREDUCE, tensor, name, op, process_set,
                                    prescale_factor, postscale_factor)
    if output is None:
        work_out = work_in  # in place
    else:
        work_out = output
        spec.output = _spec(work_out)
    return spec, work_in, work_out


def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, process_set,
                     kind="allreduce"):
    """output None: in place into `tensor`; else into the contiguous tensor `output`.

    The per-op hot path (DistributedOptimizer submits one per gradient): the checks of
    _allreduce_spec, in the same order, inlined, and one _C.enqueue_op call.
    """
    if name and type(name) is str:
        full_name = kind + "." + name
    else:
        full_name = _op_name(kind, name, process_set)
    if op not in _REDUCE_OPS:
        raise ValueError("unknown reduction op %r" % (op,))
    if not isinstance(tensor, torch.Tensor):
        raise ValueError("expected a torch.Tensor, got %s" % type(tensor).__name__)
    dtype = _DTYPES.get(tensor.dtype)
    if dtype is None:
        raise ValueError("Tensor type %s is not supported." % tensor.type())
    if tensor.is_sparse:
        raise ValueError("sparse tensors are not supported")
    work_in = tensor if tensor.is_contiguous() else tensor.contiguous()
    set_id = process_set.process_set_id
    if set_id is None:
        _set_id(process_set)  # raises
    device = -1 if work_in.is_cpu else _device(work_in)
    out_args = None
    if output is not None:
        out_args = (output.data_ptr(), _dtype_code(output), output.shape,
                    -1 if output.is_cpu else _device(output))
    if device < 0:
        c_handle = _C.enqueue_op(_handles.ALLREDUCE, full_name, work_in.data_ptr(), dtype,
                                 work_in.shape, device, op, prescale_factor, postscale_factor, 0,
                                 set_id, out_args)
    else:
        c_handle = _C.enqueue_op(_handles.ALLREDUCE, full_name, work_in.data_ptr(), dtype,
                                 work_in.shape, device, op, prescale_factor, postscale_factor, 0,
                                 set_id, out_args, _stream(work_in))
    if output is not None:
        return _handles.submit_op(c_handle, (tensor, work_in, output), lambda: output)
    if work_in is tensor:
        return _handles.submit_op(c_handle, tensor, None)
    return _handles.submit_op(c_handle, (tensor, work_in),
                              lambda: _writeback(tensor, work_in))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing `tensor` over the process set into a new tensor; returns a handle.

    The input is not modified. synchronize(handle) returns the result.
    """
    op = handle_average_backwards_compatibility(op, average)
    output = torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
    return _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor,
                            process_set)


class HorovodAllreduce(torch.autograd.Function):
    """Differentiable allreduce: the gradient is the same allreduce of the output gradient."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        handle = allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor,
                                 process_set)
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        return (allreduce(grad_output, average=ctx.average, op=ctx.op,
                          prescale_factor=ctx.prescale_factor,
                          postscale_factor=ctx.postscale_factor, process_set=ctx.process_set),
                None, None, None, None, None, None)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` over the process set (default op Average); returns a new tensor."""
    tensor_compressed, ctx = compression.compress(tensor)
    summed = HorovodAllreduce.apply(tensor_compressed, average, name, op, prescale_factor,
                                    postscale_factor, process_set)
    return compression.decompress(summed, ctx)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce_async: synchronize(handle) returns `tensor`, modified."""
    op = handle_average_backwards_compatibility(op, average)
    return _allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                            process_set)


allreduce_async_ = _front_door("allreduce_async_", allreduce_async_, Average)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns `tensor`, modified."""
    handle = allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor,
                              process_set)
    return synchronize(handle)


def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor,
                             process_set):
    if not tensors:
        raise ValueError("grouped_allreduce needs at least one tensor")
    base = _op_name("grouped_allreduce", name, process_set)
    specs, keep, works, targets = [], [], [], []
    for i, t in enumerate(tensors):
        out = None if outputs is None else outputs[i]
        spec, work_in, work_out = _allreduce_spec(t, out, "%s_%d" % (base, i), op,
                                                  prescale_factor, postscale_factor,
                                                  process_set)
        specs.append(spec)
        keep.append((t, work_in, work_out))
        works.append(work_out)
        targets.append(t if out is None else out)

    def finish(results):
        return [_writeback(tg, w) for tg, w in zip(targets, works)]

    return _handles.submit(specs, keep, finish, group=True)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors as one unit; synchronize returns a list of new tensors."""
    op = handle_average_backwards_compatibility(op, average)
    outputs = [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in tensors]
    return _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor,
                                    postscale_factor, process_set)


class HorovodGroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set,
                *tensors):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        handle = grouped_allreduce_async(list(tensors), average, name, op, prescale_factor,
                                         postscale_factor, process_set)
        return tuple(synchronize(handle))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce(list(grad_output), average=ctx.average, op=ctx.op,
                                  prescale_factor=ctx.prescale_factor,
                                  postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Reduces a list of tensors as one unit; returns a list of new tensors."""
    compressed = [compression.compress(t) for t in tensors]
    reduced = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor,
                                            postscale_factor, process_set,
                                            *[c[0] for c in compressed])
    return [compression.decompress(t, c[1]) for t, c in zip(reduced, compressed)]


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """In-place grouped allreduce_async: synchronize returns `tensors`, modified."""
    op = handle_average_backwards_compatibility(op, average)
    return _grouped_allreduce_async(tensors, None, name, op, prescale_factor, postscale_factor,
                                    process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    handle = grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                      postscale_factor, process_set)
    return synchronize(handle)


# ---------------------------------------------------------------------------------------------
# allgather


def _allgather_specs(tensors, base, process_set, grouped):
    specs, keep = [], []
    for i, t in enumerate(tensors):
        work = _contiguous(t)
        spec = _new_op(_handles.ALLGATHER, "%s_%d" % (base, i) if grouped else base,
                       process_set)
        spec.input = _spec(work)
        spec.stream = _stream(work)
        specs.append(spec)
        keep.append((t, work))
    return specs, keep


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating `tensor` of every rank along dim 0; synchronize returns it."""
    specs, keep = _allgather_specs([tensor], _op_name("allgather", name, process_set),
                                   process_set, grouped=False)
    dtype, device = tensor.dtype, tensor.device
    return _handles.submit(specs, keep,
                           lambda results: _output_tensor(results[0], dtype, device))


def _own_rows(grads, dims, process_set):
    """This rank's rows of each gathered gradient, given this rank's first dimensions."""
    counts = grouped_allgather([torch.IntTensor([d]) for d in dims], process_set=process_set)
    r = process_set.rank()
    offsets = [int(c[:r].sum().item()) for c in counts]
    return [g.narrow(0, offset, d) for g, offset, d in zip(grads, offsets, dims)]


class HorovodAllgather(torch.autograd.Function):
    """Differentiable allgather: the gradient is this rank's rows of the averaged gradient
    (Horovod's convention: the incoming gradients are averaged over the process set)."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.process_set = process_set
        handle = allgather_async(tensor, name, process_set)
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        return _own_rows([grad_reduced], [ctx.dim], ctx.process_set)[0], None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates `tensor` of every rank along dim 0 (dim 0 may differ between ranks)."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Allgathers a list of tensors as one unit; synchronize returns a list."""
    if not tensors:
        raise ValueError("grouped_allgather needs at least one tensor")
    specs, keep = _allgather_specs(tensors, _op_name("grouped_allgather", name, process_set),
                                   process_set, grouped=True)
    meta = [(t.dtype, t.device) for t in tensors]
    return _handles.submit(
        specs, keep,
        lambda results: [_output_tensor(r, d, dev) for r, (d, dev) in zip(results, meta)],
        group=True)


class HorovodGroupedAllgather(torch.autograd.Function):
    """Differentiable grouped allgather: each tensor's gradient as in HorovodAllgather."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        grad_reduced = grouped_allreduce(list(grad_output), op=Average,
                                         process_set=ctx.process_set)
        return (None, None, *_own_rows(grad_reduced, ctx.dims, ctx.process_set))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers a list of tensors as one unit; returns a list (differentiable)."""
    if not tensors:
        raise ValueError("grouped_allgather needs at least one tensor")
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# ---------------------------------------------------------------------------------------------
# broadcast


def _broadcast_async(tensor, target, root_rank, name, process_set):
    """Broadcasts in place into `target` (a contiguous copy when needed) from `root_rank`."""
    work = _contiguous(target)
    spec = _new_op(_handles.BROADCAST, _op_name("broadcast", name, process_set), process_set)
    spec.input = _spec(work)
    spec.stream = _stream(work)
    spec.root_rank = int(root_rank)
    return _handles.submit([spec], (tensor, target, work),
                           lambda results: _writeback(target, work))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts broadcasting root_rank's `tensor` into a new tensor; the input is unchanged."""
    output = tensor.detach().clone(memory_format=torch.contiguous_format)
    return _broadcast_async(tensor, output, root_rank, name, process_set)


class HorovodBroadcast(torch.autograd.Function):
    """Differentiable broadcast: the root gets the gradient averaged over the process set,
    other ranks zeros (Horovod's convention)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        handle = broadcast_async(tensor, root_rank, name, process_set)
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if _basics.rank() != ctx.root_rank:
            grad_reduced *= 0
        return grad_reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns a new tensor holding root_rank's `tensor`."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast_async: synchronize returns `tensor`, overwritten off the root."""
    return _broadcast_async(tensor, tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---------------------------------------------------------------------------------------------
# alltoall


def _splits_list(splits):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        if splits.dim() != 1:
            raise ValueError("splits must be a 1-D tensor or a list of integers")
        if splits.dtype.is_floating_point or splits.dtype == torch.bool:
            raise ValueError("splits must hold integers, got %s" % splits.dtype)
        return [int(s) for s in splits.tolist()]
    out = [int(s) for s in splits]
    if any(s < 0 for s in out):
        raise ValueError("splits must not be negative: %s" % out)
    return out


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts sending splits[i] rows of `tensor` to rank i (equal split when None).

    synchronize returns (output, received_splits) with received_splits an int32 tensor.
    """
    work = _contiguous(tensor)
    split_list = _splits_list(splits)
    spec = _new_op(_handles.ALLTOALL, _op_name("alltoall", name, process_set), process_set)
    spec.input = _spec(work)
    spec.stream = _stream(work)
    spec.splits = split_list
    dtype, device = tensor.dtype, tensor.device

    def finish(results):
        received = torch.tensor(results[0].received_splits, dtype=torch.int32)
        return _output_tensor(results[0], dtype, device), received

    return _handles.submit([spec], (tensor, work, splits), finish)


class HorovodAlltoall(torch.autograd.Function):
    """Differentiable alltoall: the gradient goes back along the received splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        handle = alltoall_async(tensor, splits, name, process_set)
        output, received_splits = synchronize(handle)
        ctx.process_set = process_set
        ctx.recvsplits = received_splits
        if splits is None:
            return output
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx, grad_output, *dead_gradients):
        grad, _ = alltoall(grad_output, splits=ctx.recvsplits, process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters rows of `tensor` to every rank and gathers theirs.

    Returns the output tensor, or (output, received_splits) when `splits` is given.
    """
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


# ---------------------------------------------------------------------------------------------
# reducescatter


def _reducescatter_spec(tensor, name, op, process_set, prescale_factor, postscale_factor):
    return _reduction_spec(_handles.REDUCESCATTER, tensor, name, op, process_set,
                           prescale_factor, postscale_factor)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing `tensor` and scattering dim-0 slices; synchronize returns this rank's."""
    spec, work = _reducescatter_spec(tensor, _op_name("reducescatter", name, process_set), op,
                                     process_set, prescale_factor, postscale_factor)
    dtype, device = tensor.dtype, tensor.device
    return _handles.submit([spec], (tensor, work),
                           lambda results: _output_tensor(results[0], dtype, device))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatters a list of tensors as one unit; synchronize returns a list."""
    if not tensors:
        raise ValueError("grouped_reducescatter needs at least one tensor")
    base = _op_name("grouped_reducescatter", name, process_set)
    specs, keep = [], []
    for i, t in enumerate(tensors):
        spec, work = _reducescatter_spec(t, "%s_%d" % (base, i), op, process_set,
                                         prescale_factor, postscale_factor)
        specs.append(spec)
        keep.append((t, work))
    meta = [(t.dtype, t.device) for t in tensors]
    return _handles.submit(
        specs, keep,
        lambda results: [_output_tensor(r, d, dev) for r, (d, dev) in zip(results, meta)],
        group=True)


def _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor):
    """What Horovod multiplies the output gradient by before allgathering it: the process
    set's size for Sum (1 for Average), times the pre- and postscale factors."""
    scale = process_set.size() if op == Sum else 1
    return scale * prescale_factor * postscale_factor


class HorovodReducescatter(torch.autograd.Function):
    """Differentiable reducescatter: the gradient is the allgather of the output gradient,
    scaled as Horovod scales it (_reducescatter_grad_scale)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.process_set = process_set
        ctx.scale = _reducescatter_grad_scale(op, process_set, prescale_factor,
                                              postscale_factor)
        handle = reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                     postscale_factor)
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        grad = grad_output * ctx.scale if ctx.scale != 1 else grad_output
        return allgather(grad, process_set=ctx.process_set), None, None, None, None, None


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Differentiable grouped reducescatter: each tensor's gradient as in
    HorovodReducescatter, gathered as one grouped allgather."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.process_set = process_set
        ctx.scale = _reducescatter_grad_scale(op, process_set, prescale_factor,
                                              postscale_factor)
        return tuple(synchronize(grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = [g * ctx.scale if ctx.scale != 1 else g for g in grad_output]
        return (None, None, None, None, None,
                *grouped_allgather(grads, process_set=ctx.process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatters a list of tensors as one unit; returns a list (differentiable)."""
    if not tensors:
        raise ValueError("grouped_reducescatter needs at least one tensor")
    compressed = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                             postscale_factor, *[c[0] for c in compressed])
    return [compression.decompress(o, c[1]) for o, c in zip(outs, compressed)]


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces `tensor` over the process set and returns this rank's dim-0 slice."""
    tensor_compressed, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(tensor_compressed, name, op, process_set, prescale_factor,
                                     postscale_factor)
    return compression.decompress(out, ctx)


# ---------------------------------------------------------------------------------------------
# barrier, join, poll, synchronize


def barrier(process_set=global_process_set):
    """Blocks until every rank of the process set has called barrier."""
    spec = _new_op(_handles.BARRIER, "", process_set)
    synchronize(_handles.submit([spec], None, lambda results: None))


def join(device=-1):
    """Signals that this rank has no more data; blocks until every rank has joined.

    While joined, this rank contributes zeros to the other ranks' collectives. Returns the
    rank that joined last.
    """
    spec = _new_op(_handles.JOIN, "", global_process_set)
    return synchronize(_handles.submit([spec], None,
                                       lambda results: results[0].last_joined_rank))


def poll(handle):
    """True when the op behind `handle` has completed (synchronize will not block)."""
    if isinstance(handle, _SparseHandle):
        return handle.poll()
    return _handles.poll(handle)


def synchronize(handle):
    """Waits for the op (releasing the GIL) and returns its result.

    Raises HorovodInternalError when the op failed.
    """
    if isinstance(handle, _SparseHandle):
        return handle()
    return _handles.synchronize(handle)


synchronize = _front_door("synchronize", synchronize)


# ---------------------------------------------------------------------------------------------
# sparse allreduce


class _SparseHandle:
    """The handle of sparse_allreduce_async: call it (or synchronize it) once for the result.

    Like Horovod's, it is a callable; chorus's synchronize and poll accept it too.
    """

    def __init__(self, tensor, indices_handle, values_handle, op, process_set):
        self._tensor = tensor
        self._indices_handle = indices_handle
        self._values_handle = values_handle
        self._op = op
        self._process_set = process_set

    def poll(self):
        return _handles.poll(self._values_handle) and _handles.poll(self._indices_handle)

    def __call__(self):
        t = self._tensor
        values = _handles.synchronize(self._values_handle)
        indices = _handles.synchronize(self._indices_handle)
        if self._op == Average:
            values = values / self._process_set.size()
        if indices.dim() == 0 or values.dim() == 0:
            return t.new().resize_as_(t)
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size())


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Starts reducing the sparse COO `tensor` (op Sum or Average) over the process set.

    Implemented like Horovod: an allgather of every rank's indices and one of its values, so
    the result is uncoalesced (duplicate indices add up when used or coalesced). Returns a
    callable handle; handle() or synchronize(handle) gives the reduced sparse tensor.
    """
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise ValueError("sparse_allreduce_async expects a sparse COO tensor")
    if op not in (Sum, Average):
        raise ValueError("sparse_allreduce_async supports op Sum and Average only")
    _dtype_code(tensor)
    indices = tensor._indices().transpose(0, 1).contiguous()
    values = tensor._values().contiguous()
    indices_handle = allgather_async(indices, name="%s.indices" % name,
                                     process_set=process_set)
    values_handle = allgather_async(values, name="%s.values" % name, process_set=process_set)
    return _SparseHandle(tensor, indices_handle, values_handle, op, process_set)

