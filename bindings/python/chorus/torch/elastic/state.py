"""TorchState (horovod.torch.elastic.TorchState): the state of a PyTorch training process.

Keyword arguments that are a torch.nn.Module, a torch.optim.Optimizer or an ElasticSampler get
a handler (registry below); every other one is a plain object handled by ObjectState.

Commit copies live in host memory: tensors (also GPU ones) are copied to CPU tensors at save();
restore() loads them back with load_state_dict, which copies into the existing parameters on
their devices (so references to the parameters, e.g. an optimizer's, stay valid). Horovod keeps
GPU tensors' copies in GPU memory; chorus frees that memory for training.

sync(): the model's state_dict with broadcast_parameters from rank 0, the optimizer with
broadcast_optimizer_state from rank 0, a sampler's state_dict with broadcast_object, then the
plain objects through ObjectState (broadcast_object). Collective.

Assigning a handled attribute (state.model = other) replaces the object and saves it, as Horovod
does.
"""

import copy

import torch

from chorus.basics import rank
from chorus.elastic.state import ObjectState
from chorus.torch.elastic.sampler import ElasticSampler
from chorus.torch.functions import (broadcast_object, broadcast_optimizer_state,
                                    broadcast_parameters)


def host_copy(obj):
    """A deep copy of `obj` with every tensor copied into host (CPU) memory."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        out = copy.copy(obj)  # keeps the dict's type (an OrderedDict state_dict, ...)
        for k, v in obj.items():
            out[k] = host_copy(v)
        return out
    if isinstance(obj, list):
        return [host_copy(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(host_copy(v) for v in obj)
    return copy.deepcopy(obj)


def host_copy_into(saved, obj):
    """host_copy(obj), reusing the tensors of `saved` (an earlier host_copy of the same
    structure) where shape and dtype still match, so that a commit copies into memory it already
    owns instead of allocating (and page-faulting) the whole state again. `saved` is private to
    its handler: load_state_dict copies out of it (Module) or deep-copies it (Optimizer), so
    overwriting its tensors later never changes what a restore handed out."""
    if isinstance(obj, torch.Tensor):
        if (isinstance(saved, torch.Tensor) and saved.shape == obj.shape
                and saved.dtype == obj.dtype and saved.device.type == "cpu"):
            return saved.copy_(obj.detach())
        return host_copy(obj)
    if isinstance(obj, dict) and isinstance(saved, dict):
        out = copy.copy(obj)
        for k, v in obj.items():
            out[k] = host_copy_into(saved.get(k), v)
        return out
    if type(obj) in (list, tuple) and type(saved) is type(obj) and len(saved) == len(obj):
        return type(obj)(host_copy_into(s, v) for s, v in zip(saved, obj))
    return host_copy(obj)


class TorchState(ObjectState):
    """State of model, optimizer and any other keyword arguments, exposed as attributes.

    model: an optional torch.nn.Module. optimizer: an optional torch.optim.Optimizer. kwargs:
    more attributes; modules, optimizers and ElasticSamplers among them are handled as above.
    """

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(dict(model=model, optimizer=optimizer))
        self._handlers, kwargs = _get_handlers(kwargs)
        for name, handler in self._handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **kwargs)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def reset(self):
        """After a reset: samplers re-partition over the new size at once, also when the
        following sync is skipped."""
        for handler in self._handlers.values():
            handler.reset()

    def __setattr__(self, name, value):
        if hasattr(self, name) and name in self._handlers:
            self._handlers[name].set_value(value)
        super().__setattr__(name, value)


class StateHandler:
    """Saves, restores and syncs one object of a TorchState."""

    def __init__(self, value):
        self.value = value

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def reset(self):
        """Called after a reset event, before the sync (nothing by default)."""

    def set_value(self, value):
        self.value = value
        self.save()


class ModelStateHandler(StateHandler):
    def __init__(self, model):
        super().__init__(model)
        self._saved_model_state = host_copy(self.value.state_dict())

    def save(self):
        self._saved_model_state = host_copy_into(self._saved_model_state, self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved_model_state)

    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(StateHandler):
    def __init__(self, optimizer):
        super().__init__(optimizer)
        self._saved_optimizer_state = host_copy(self.value.state_dict())

    def save(self):
        self._saved_optimizer_state = host_copy_into(self._saved_optimizer_state,
                                                     self.value.state_dict())

    def restore(self):
        # A failure may have hit a backward pass half-way (an allreduce hook, synchronize): a
        # DistributedOptimizer forgets what it had in flight, so training can step again.
        forget = getattr(self.value, "_forget_handles", None)
        if forget is not None:
            forget()
        # load_state_dict casts the saved state to each parameter's device and dtype.
        self.value.load_state_dict(self._saved_optimizer_state)

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(StateHandler):
    def __init__(self, sampler):
        super().__init__(sampler)
        self._saved_sampler_state = copy.deepcopy(self.value.state_dict())

    def save(self):
        self._saved_sampler_state = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved_sampler_state)

    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict()))

    def reset(self):
        self.value.reset()


# (type, handler class), first match wins; get_handler_registry/set_handler_registry as Horovod.
_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _get_handler(value):
    for handler_type, handler_cls in _handler_registry:
        if isinstance(value, handler_type):
            return handler_cls(value)
    return None


def _get_handlers(kwargs):
    handlers, remainder = {}, {}
    for name, value in kwargs.items():
        handler = _get_handler(value)
        if handler:
            handlers[name] = handler
        else:
            remainder[name] = value
    return handlers, remainder
