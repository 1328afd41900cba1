"""DistributedOptimizer: allreduces gradients as backward produces them (horovod.torch).

A hook on each parameter's gradient accumulator submits an in-place allreduce_async_ of the
gradient as soon as it is ready; step() (or synchronize()) waits for all of them and then
runs the wrapped optimizer's update. Every rank must produce the same parameters' gradients
(or none: missing ones are submitted as zeros at synchronize).
"""

import contextlib
import warnings

import torch

from chorus.exceptions import HorovodInternalError
from chorus.process_sets import global_process_set
from chorus.torch import mpi_ops
from chorus.torch.buckets import GradientBuckets
from chorus.torch.compression import Compression


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=mpi_ops.Average, gradient_predivide_factor=1.0, groups=None,
                 sparse_as_dense=False, process_set=global_process_set,
                 gradient_as_bucket_view=False, bucket_cap_mb=25):
        super(self.__class__, self).__init__(params)
        self._compression = compression

        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            # Unique across parameter groups, as Horovod names them.
            named_parameters = [("allreduce.noname.%d.%d" % (i, j), v)
                                for i, param_group in enumerate(self.param_groups)
                                for j, v in enumerate(param_group["params"])]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, "
                             "parameter), usually produced by model.named_parameters().")
        dups = _find_duplicates([k for k, _ in named_parameters])
        if dups:
            raise ValueError("Parameter names in named_parameters must be unique. Found "
                             "duplicates: %s" % ", ".join(dups))
        all_param_ids = {id(v) for param_group in self.param_groups
                         for v in param_group["params"]}
        named_param_ids = {id(v) for k, v in named_parameters}
        unnamed_param_ids = all_param_ids - named_param_ids
        if unnamed_param_ids:
            raise ValueError("named_parameters was specified, but one or more model "
                             "parameters were not named. Python object ids: %s"
                             % ", ".join(str(i) for i in unnamed_param_ids))

        self._parameter_names = {v: k for k, v in sorted(named_parameters)}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: self.backward_passes_per_step
                                 for _, v in sorted(named_parameters)}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}  # parameter or tuple of parameters (a group) -> (handle, ctx)
        self._p_to_group = {}
        self._group_counts = {}
        self._groups = self._make_groups(groups, named_parameters)
        for group in self._groups:
            for p in group:
                self._p_to_group[p] = group
            self._group_counts[group] = 0
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._buckets = None  # GradientBuckets (gradient_as_bucket_view)
        self._bucket_handles = {}  # Bucket -> (handle, ctx) of its allreduce in flight
        if gradient_as_bucket_view:
            if self._groups:
                warnings.warn("chorus DistributedOptimizer: gradient_as_bucket_view is ignored "
                              "with groups (each group is reduced as one grouped allreduce)",
                              RuntimeWarning)
            else:
                with_grad = [v for group in self.param_groups for v in group["params"]
                             if v.requires_grad]
                self._buckets = GradientBuckets(with_grad, self._parameter_names, bucket_cap_mb)
        if self.process_set.included():
            self._register_hooks()

    def _make_groups(self, groups, named_parameters):
        """Tuples of parameters whose gradients are reduced as one grouped allreduce."""
        if groups is None or groups == 0:
            return []
        if isinstance(groups, int):
            params = [v for _, v in named_parameters if v.requires_grad]
            n = min(groups, len(params))
            if n == 0:
                return []
            size, extra = divmod(len(params), n)
            out, start = [], 0
            for i in range(n):
                end = start + size + (1 if i < extra else 0)
                out.append(tuple(params[start:end]))
                start = end
            return [g for g in out if g]
        out = []
        for group in groups:
            group = tuple(p for p in group if p.requires_grad)
            for p in group:
                if p not in self._parameter_names:
                    raise ValueError("groups contains a tensor that is not a parameter of "
                                     "the optimizer")
            if group:
                out.append(group)
        return out

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step

    def _register_hooks(self):
        for param_group in self.param_groups:
            for p in param_group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    p_tmp = p.expand_as(p)
                    grad_acc = p_tmp.grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # Not computed here, but another rank may have: submit zeros.
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                # As Horovod: indices and values are allgathered (sparse_allreduce_async).
                return mpi_ops.sparse_allreduce_async(tensor, name=name, op=self.op,
                                                      process_set=self.process_set), None
            tensor = tensor.to_dense()  # reduced dense; p.grad stays sparse (synchronize)
        tensor_compressed, ctx = self._compression.compress(tensor)
        prescale_factor, postscale_factor = self._scale_factors()
        handle = mpi_ops.allreduce_async_(tensor_compressed, name=name, op=self.op,
                                          prescale_factor=prescale_factor,
                                          postscale_factor=postscale_factor,
                                          process_set=self.process_set)
        return handle, ctx

    def _scale_factors(self):
        """(prescale, postscale) of every gradient allreduce: with Average, the gradient is
        divided by gradient_predivide_factor before the sum and multiplied by it after (the
        runtime applies the 1/size of the average on top of postscale)."""
        if self.op == mpi_ops.Average:
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _grouped_allreduce_grad_async(self, group):
        """One grouped allreduce of the group's gradients, named after its first parameter."""
        tensors, ctxs = [], []
        for p in group:
            if p.grad is None:
                p.grad = p.data.new(p.size()).zero_()
            compressed, ctx = self._compression.compress(p.grad)
            tensors.append(compressed)
            ctxs.append(ctx)
        prescale_factor, postscale_factor = self._scale_factors()
        handle = mpi_ops.grouped_allreduce_async_(
            tensors, name="group." + self._parameter_names[group[0]], op=self.op,
            prescale_factor=prescale_factor, postscale_factor=postscale_factor,
            process_set=self.process_set)
        return handle, ctxs

    def _submit_bucket(self, bucket):
        """The in-place allreduce of a bucket whose gradients are all in (Note: buckets.py)."""
        compressed, ctx = self._compression.compress(bucket.flat)
        prescale_factor, postscale_factor = self._scale_factors()
        handle = mpi_ops.allreduce_async_(compressed, name=bucket.name, op=self.op,
                                          prescale_factor=prescale_factor,
                                          postscale_factor=postscale_factor,
                                          process_set=self.process_set)
        bucket.handle = handle
        self._bucket_handles[bucket] = (handle, ctx)

    def _make_hook(self, p):
        def hook(*ignore):
            in_bucket = self._buckets is not None and self._buckets.holds(p)
            if (in_bucket and p in self._buckets.bucket_of[p].ready) or (
                    p in self._handles and self._handles[p][0] is not None):
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times "
                        "before call to step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if in_bucket:
                if self._allreduce_delay[p] > 0:
                    return  # accumulating (backward_passes_per_step)
                bucket = self._buckets.gradient_ready(p, self._parameter_names.get(p))
                if bucket is not None:
                    self._submit_bucket(bucket)
                    return
                if self._buckets.holds(p):
                    return  # in its bucket; the bucket waits for its other gradients
                # p fell back: reduced on its own below.
            if self._allreduce_delay[p] == 0:
                group = self._p_to_group.get(p)
                if group is not None:
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        self._group_counts[group] = 0
                        for gp in group:
                            self._handles.pop(gp, None)
                        self._handles[group] = self._grouped_allreduce_grad_async(group)
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce and stores the results in p.grad."""
        if not self.process_set.included():
            self._synchronized = True
            return
        # Submit what the hooks did not: gradients not computed on this rank (zeros) and
        # groups and buckets not complete yet. Names make the order irrelevant across ranks.
        launched = set()
        if self._buckets is not None:
            for bucket in self._buckets.unready():
                for p in self._buckets.complete(bucket, self._parameter_names):
                    self._handles[p] = self._allreduce_grad_async(p)
                self._submit_bucket(bucket)
            for p in self._buckets.bucket_of:
                if self._buckets.holds(p):
                    launched.add(p)
        for key, (handle, _) in self._handles.items():
            if handle is not None:
                launched.update(key if isinstance(key, tuple) else (key,))
        for group in self._groups:
            if not set(group) <= launched:
                for gp in group:
                    self._handles.pop(gp, None)
                self._handles[group] = self._grouped_allreduce_grad_async(group)
                self._group_counts[group] = 0
                launched.update(group)
        for p in self._requires_update - launched:
            self._handles[p] = self._allreduce_grad_async(p)
        for bucket, (handle, ctx) in self._bucket_handles.items():
            output = self._synchronize_or_forget(handle)
            decompressed = self._compression.decompress(output, ctx)
            if decompressed is not bucket.flat:
                bucket.flat.copy_(decompressed)
            for p in bucket.params:
                if self._buckets.holds(p):
                    self._allreduce_delay[p] = self.backward_passes_per_step
        self._bucket_handles.clear()
        if self._buckets is not None:
            self._buckets.reset()
        for key, (handle, ctx) in self._handles.items():
            output = self._synchronize_or_forget(handle)
            if isinstance(key, tuple):
                params, outputs, ctxs = key, output, ctx
            else:
                params, outputs, ctxs = (key,), (output,), (ctx,)
            for p, out, c in zip(params, outputs, ctxs):
                self._allreduce_delay[p] = self.backward_passes_per_step
                decompressed = self._compression.decompress(out, c)
                if p.grad.is_sparse:
                    # A sparse gradient stays sparse (also with sparse_as_dense); a sparse
                    # tensor cannot be set_, so its contents are replaced.
                    if not decompressed.is_sparse:
                        decompressed = decompressed.to_sparse()
                    p.grad.zero_().add_(decompressed)
                    continue
                if decompressed is not p.grad:
                    p.grad.set_(decompressed)
        self._handles.clear()
        self._synchronized = True

    def _synchronize_or_forget(self, handle):
        """synchronize(handle); on a failed allreduce, forgets every handle first."""
        try:
            return mpi_ops.synchronize(handle)
        except HorovodInternalError:
            self._forget_handles()
            raise

    def _forget_handles(self):
        """After a failed allreduce (a lost rank: chorus is broken until the elastic loop resets
        it): waits out every other pending one (each fails at once) and starts the next backward
        pass afresh, so that the rolled-back training can call zero_grad() and step() again.
        (Horovod leaves the handles behind and zero_grad() then raises.)"""
        for handle, _ in list(self._handles.values()) + list(self._bucket_handles.values()):
            if handle is None:
                continue
            try:
                mpi_ops.synchronize(handle)
            except (HorovodInternalError, ValueError):
                pass
        self._handles.clear()
        self._bucket_handles.clear()
        if self._buckets is not None:
            self._buckets.reset()
        self._group_counts = {group: 0 for group in self._group_counts}
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Lets step() skip synchronize() after an explicit call to it."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                # Horovod's words: users' tests match on them.
                warnings.warn("optimizer.step() called without "
                              "optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles or self._bucket_handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def is_distributed_optimizer(optimizer):
    """True for an optimizer made by DistributedOptimizer (its class copies
    _DistributedOptimizer's methods rather than deriving from it)."""
    return type(optimizer).__dict__.get("synchronize") is _DistributedOptimizer.synchronize


def _find_duplicates(names):
    seen, dups = set(), set()
    for n in names:
        if n in seen:
            dups.add(n)
        seen.add(n)
    return sorted(dups)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=mpi_ops.Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=global_process_set,
                         gradient_as_bucket_view=False, bucket_cap_mb=25):
    """Wraps `optimizer` so that step() applies gradients averaged (op) over the process set.

    groups: a list of lists of parameters, or a number of groups to split the parameters
    into (num_groups is its deprecated spelling); each group's gradients are reduced by one
    grouped allreduce once all of them are ready.
    gradient_as_bucket_view (chorus; DDP's name): each parameter's .grad becomes a view into a
    persistent bucket of at most bucket_cap_mb MiB, and each bucket is reduced in place by
    one allreduce once its gradients are ready: no copy into or out of a fusion buffer
    (chorus/torch/buckets.py). Not with groups.
    """
    if gradient_predivide_factor != 1.0 and op != mpi_ops.Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == mpi_ops.Adasum:
        raise ValueError("op=Adasum is not supported by chorus yet")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be "
                      "removed in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None:
        if not (isinstance(groups, list) or (isinstance(groups, int) and groups > 0)):
            raise ValueError("groups should be a non-negative integer or a list of lists of "
                             "torch.Tensor")
        if isinstance(groups, list):
            if any(not isinstance(g, (list, tuple)) for g in groups):
                raise ValueError("groups should be a list of lists of torch.Tensor")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    if bucket_cap_mb <= 0:
        raise ValueError("bucket_cap_mb must be positive")
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense, process_set,
               gradient_as_bucket_view, bucket_cap_mb)
