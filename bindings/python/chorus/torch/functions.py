"""Helpers built on the collectives: parameter, optimizer-state and object broadcast."""

import io
import pickle

import torch

from chorus import basics as _basics
from chorus.process_sets import global_process_set
from chorus.torch import mpi_ops
from chorus.torch.optimizer import is_distributed_optimizer


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites, in place, every parameter with root_rank's value.

    params: a state_dict / dict of name -> tensor, a list of (name, tensor) pairs (e.g.
    model.named_parameters()), or a list of tensors.
    """
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        try:
            params = list(params)
            params = [p if isinstance(p, tuple) else (None, p) for p in params]
        except TypeError:
            raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for name, p in params:
        if isinstance(p, torch.nn.Parameter):
            p = p.data
        handles.append(mpi_ops.broadcast_async_(p, root_rank, name, process_set=process_set))
    for h in handles:
        mpi_ops.synchronize(h)


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Makes every rank's optimizer state (state and param_groups) equal to root_rank's.

    As Horovod: an optimizer without state yet (never stepped) first gets it from one step of
    the wrapped torch optimizer on zero gradients (set on every parameter that requires grad;
    sparse for SparseAdam), so every rank holds the same state structure; that step may move
    the parameters (weight decay), identically on every rank. torch.optim.LBFGS is refused
    (ValueError), as in Horovod.
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    state_dict = optimizer.state_dict()
    if len(state_dict["state"]) == 0:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and id(p) not in state_dict["state"]:
                    p.grad = p.data.new(p.size()).zero_()
                    if isinstance(optimizer, torch.optim.SparseAdam):
                        p.grad = p.grad.to_sparse()
        # A DistributedOptimizer's own step() would allreduce (and so need every rank): step
        # the wrapped torch optimizer instead.
        if is_distributed_optimizer(optimizer):
            super(optimizer.__class__, optimizer).step()
        else:
            optimizer.step()
        state_dict = optimizer.state_dict()
    state = broadcast_object(state_dict, root_rank, name="optimizer_state",
                             process_set=process_set)
    if _basics.rank() != root_rank:
        optimizer.load_state_dict(state)


def _to_bytes(obj):
    buf = io.BytesIO()
    torch.save(obj, buf, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def _from_bytes(t):
    return torch.load(io.BytesIO(t.numpy().tobytes()))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's picklable `obj` on every rank of the process set.

    root_rank is a world rank (as in Horovod), which must belong to the process set.
    """
    name = name or type(obj).__name__
    if _basics.rank() == root_rank:
        data = _to_bytes(obj)
        sz = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        data = None
        sz = torch.zeros(1, dtype=torch.int64)
    mpi_ops.broadcast_(sz, root_rank, name + ".sz", process_set=process_set)
    if data is None:
        data = torch.zeros(int(sz.item()), dtype=torch.uint8)
    mpi_ops.broadcast_(data, root_rank, name + ".t", process_set=process_set)
    return obj if _basics.rank() == root_rank else _from_bytes(data)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's picklable `obj`, in rank order."""
    name = name or type(obj).__name__
    data = _to_bytes(obj)
    sizes = mpi_ops.allgather(torch.tensor([data.numel()], dtype=torch.int64),
                              name=name + ".sz", process_set=process_set)
    gathered = mpi_ops.allgather(data, name=name + ".t", process_set=process_set)
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(_from_bytes(gathered[offset:offset + n]))
        offset += n
    return out
