"""Collective ops on NumPy arrays: ``import chorus.numpy as hvdnp``.

Every op is synchronous and returns new arrays; inputs are never modified. Arrays cross to the
runtime through DLPack: inputs via ``__dlpack__`` and ``_C.tensor_from_dlpack`` (non-contiguous,
read-only or byte-swapped arrays are copied first), runtime-allocated outputs (allgather,
alltoall, reducescatter) via ``_C.result_to_dlpack`` and ``numpy.from_dlpack``, without a copy:
such an output is a writable view of the runtime's buffer, freed when the array goes.

Supported dtypes: uint8, int8, int16, int32, int64, float16, float32, float64 and bool (NumPy
has no bfloat16). Others raise ValueError naming the dtype.

Errors follow chorus.torch: local argument errors raise ValueError (ChorusValueError when the
runtime rejects the arguments); failures of the collective itself (ranks disagree, shutdown)
raise ChorusError (HorovodInternalError).

Ops without a name are named '<op>.noname.<n>', n counting the unnamed ops of the process set
(shared with chorus.torch), so every rank must submit its unnamed ops in the same order.
"""


import pickle

import numpy as np

from chorus import _C
from chorus import basics as _basics
from chorus import handles as _handles
from chorus.basics import (Adasum, Average, Max, Min, Product, Sum, cross_rank, cross_size,
                           init, is_initialized, local_rank, local_size, rank, shutdown, size)
from chorus.process_sets import (ProcessSet, add_process_set, global_process_set,
                                 remove_process_set)

HorovodInternalError = _C.ChorusError

# NumPy dtype -> chorus::DataType value (chorus/types.h): every type chorus has but bfloat16,
# which NumPy lacks, under the same name.
_DTYPES = {np.dtype(name): code for name, code in _C.DTYPES.items() if name != "bfloat16"}
_BOOL = _C.DTYPES["bool"]
_UINT8 = _C.DTYPES["uint8"]

_REDUCE_OPS = _basics.REDUCE_OPS
_op_name = _handles.op_name
_set_id = _handles.set_id


def _dtype_code(array):
    code = _DTYPES.get(array.dtype.newbyteorder("="))
    if code is None:
        raise ValueError("Array type %s is not supported." % array.dtype)
    return code


def _as_array(array):
    """`array` (an ndarray, or a NumPy scalar as a 0-d array) with a supported dtype."""
    if isinstance(array, np.generic):
        array = np.array(array)
    elif not isinstance(array, np.ndarray):
        raise ValueError("expected a numpy.ndarray, got %s" % type(array).__name__)
    _dtype_code(array)
    return array


def _checked(array):
    """`array` as a C-contiguous, writable, native-byte-order ndarray (a copy when needed)."""
    array = _as_array(array)
    if not array.dtype.isnative:
        return array.astype(array.dtype.newbyteorder("="), order="C")
    if not array.flags.c_contiguous or not array.flags.writeable:
        # NumPy exports no read-only array through DLPack. np.array keeps 0-d arrays 0-d
        # (np.ascontiguousarray would make them 1-d).
        return np.array(array, order="C", copy=True)
    return array


def _import(array):
    """(TensorSpec, keepalive) of the contiguous array `array`, through DLPack."""
    if array.dtype == np.bool_:  # NumPy 1.24 exports no bool: pass the bytes as uint8
        data, dtype, shape, device, keep = _C.tensor_from_dlpack(
            array.view(np.uint8).__dlpack__(), _BOOL)
    else:
        data, dtype, shape, device, keep = _C.tensor_from_dlpack(array.__dlpack__())
    return _C.TensorSpec(data, dtype, list(shape), device), keep


class _Exported:
    """Presents one capsule of result_to_dlpack to numpy.from_dlpack (which wants the
    __dlpack__ protocol, not a bare capsule)."""

    __slots__ = ("_capsule",)

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None):
        capsule, self._capsule = self._capsule, None
        return capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


class _Writable:
    """Presents the memory of a read-only numpy.from_dlpack view as writable, and keeps the view
    (so the runtime's buffer) alive. numpy.from_dlpack marks every import read-only, DLPack
    having no read-only flag; the runtime hands its output buffer over entirely, so writing to
    it is safe, as it is to the tensor torch.utils.dlpack.from_dlpack makes of it."""

    __slots__ = ("_view", "__array_interface__")

    def __init__(self, view):
        self._view = view
        interface = dict(view.__array_interface__)
        interface["data"] = (interface["data"][0], False)
        self.__array_interface__ = interface


def _output(result, dtype):
    """The runtime-allocated output of `result` (taken; do not use it afterwards) as a writable
    array of `dtype`, without a copy."""
    code = _DTYPES[dtype]
    # NumPy 1.24 imports no DLPack bool: bool crosses as uint8.
    capsule = _C.result_to_dlpack(result, _UINT8 if code == _BOOL else code)
    out = np.asarray(_Writable(np.from_dlpack(_Exported(capsule))))
    return out.view(np.bool_) if code == _BOOL else out


def _run(spec, keepalive, finish):
    """Submits `spec`, waits for it and returns finish(result)."""
    h = _handles.submit([spec], keepalive, lambda results: finish(results[0]))
    return _handles.synchronize(h)


def _new_op(op_type, kind, name, process_set, array):
    """(spec, keepalive, work) for `array` as the op's input."""
    work = _checked(array)
    spec = _C.OpSpec()
    spec.type = op_type
    spec.process_set_id = _set_id(process_set)
    spec.name = _op_name(kind, name, process_set)
    spec.input, keep = _import(work)
    return spec, [array, work, keep], work


def _reduction(op_type, kind, array, op, name, prescale_factor, postscale_factor, process_set):
    if op not in _REDUCE_OPS:
        raise ValueError("unknown reduction op %r" % (op,))
    spec, keep, work = _new_op(op_type, kind, name, process_set, array)
    spec.reduce_op = op
    spec.prescale_factor = float(prescale_factor)
    spec.postscale_factor = float(postscale_factor)
    return spec, keep, work


def allreduce(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """Reduces `array` over the process set (default op Average); returns a new array.

    Integer Average truncates, as in chorus.torch. bool cannot be reduced (ValueError).
    """
    spec, keep, work = _reduction(_handles.ALLREDUCE, "allreduce", array, op, name,
                                  prescale_factor, postscale_factor, process_set)
    out = np.empty(work.shape, dtype=work.dtype)
    spec.output, out_keep = _import(out)
    keep.append(out_keep)
    return _run(spec, keep, lambda result: out)


def allgather(array, name=None, process_set=global_process_set):
    """Concatenates `array` of every rank along dim 0 (dim 0 may differ between ranks)."""
    spec, keep, work = _new_op(_handles.ALLGATHER, "allgather", name, process_set, array)
    dtype = work.dtype
    return _run(spec, keep, lambda result: _output(result, dtype))


def broadcast(array, root_rank, name=None, process_set=global_process_set):
    """Returns a new array holding root_rank's `array` (root_rank: a world rank in the set)."""
    array = _as_array(array)
    out = np.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=True)
    spec, keep, _ = _new_op(_handles.BROADCAST, "broadcast", name, process_set, out)
    spec.root_rank = int(root_rank)
    return _run(spec, keep, lambda result: out)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's picklable `obj` on every rank of the process set (as
    chorus.torch.broadcast_object; two broadcasts named `name` + ".sz" and + ".data", `name`
    defaulting to the object's type name, so the names match on every rank)."""
    name = name or type(obj).__name__
    if _basics.rank() == root_rank:
        data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        size = np.array([data.size], dtype=np.int64)
    else:
        data, size = None, np.zeros(1, dtype=np.int64)
    size = broadcast(size, root_rank, name=name + ".sz", process_set=process_set)
    if data is None:
        data = np.zeros(int(size[0]), dtype=np.uint8)
    return pickle.loads(broadcast(data, root_rank, name=name + ".data",
                                  process_set=process_set).tobytes())


def _splits_list(splits):
    if splits is None:
        return []
    if isinstance(splits, np.ndarray):
        if splits.ndim != 1:
            raise ValueError("splits must be a 1-D array or a list of integers")
        if splits.dtype.kind not in "iu":
            raise ValueError("splits must hold integers, got %s" % splits.dtype)
        splits = splits.tolist()
    out = [int(s) for s in splits]
    if any(s < 0 for s in out):
        raise ValueError("splits must not be negative: %s" % out)
    return out


def alltoall(array, splits=None, name=None, process_set=global_process_set):
    """Sends splits[i] rows of `array` to rank i of the process set (an equal split when None).

    Returns (output, received_splits): the rows received, concatenated in rank order, and the
    number received from each rank (an int32 array).
    """
    split_list = _splits_list(splits)
    spec, keep, work = _new_op(_handles.ALLTOALL, "alltoall", name, process_set, array)
    spec.splits = split_list
    dtype = work.dtype

    def finish(result):
        received = np.array(result.received_splits, dtype=np.int32)
        return _output(result, dtype), received

    return _run(spec, keep, finish)


def reducescatter(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=global_process_set):
    """Reduces `array` over the process set and returns this rank's dim-0 slice (ranks get
    dim0 // size rows, the first dim0 % size ranks one more)."""
    spec, _keep, work = _reduction(_handles.REDUCESCATTER, "reducescatter", array, op, name,
                                   prescale_factor, postscale_factor, process_set)
    dtype = work.dtype
    return _run(spec, _keep, lambda result: _output(result, dtype))


__all__ = [
    "Adasum", "Average", "HorovodInternalError", "Max", "Min", "Product", "ProcessSet", "Sum",
    "add_process_set", "allgather", "allreduce", "alltoall", "broadcast", "broadcast_object",
    "cross_rank",
    "cross_size", "global_process_set", "init", "is_initialized", "local_rank", "local_size",
    "rank", "reducescatter", "remove_process_set", "shutdown", "size",
]
