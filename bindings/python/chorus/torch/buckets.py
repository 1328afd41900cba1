"""Persistent gradient buckets: DistributedOptimizer(gradient_as_bucket_view=True).

The parameters that need gradients are laid out, in the reverse of their order (the order
backward produces their gradients), in flat bucket tensors of at most `bucket_cap_mb` each,
one dtype and device per bucket (a parameter larger than the cap has a bucket of its own).
Each parameter's `.grad` is a view into its bucket, so backward accumulates straight into the
bucket; once every gradient of a bucket is ready, one in-place allreduce of the whole bucket
runs (a registered op from the second step on: Note [Registered ops]), and the reduced
gradients are where the optimizer reads them: no copy into a fusion buffer and none out.
This is DDP's gradient_as_bucket_view, which Horovod does not have.

A `.grad` that is not the view any more is copied into it (one copy) and replaced by the view
again when its gradient is ready: after zero_grad(set_to_none=True), which leaves `.grad`
None until backward makes a new one, or after the user assigned a tensor of the same shape.
A parameter whose gradient cannot live in its bucket (a sparse gradient; one of another shape)
is reduced on its own, as without buckets, from then on; one warning says which and why. Its
region of the bucket is reduced as zeros.

Every rank builds the same buckets (from the same parameters in the same order), so their names
and shapes agree.
"""

import warnings

import torch


class Bucket:
    """One flat tensor and the parameters whose gradients are views into it."""

    def __init__(self, index, params, names):
        first = params[0]
        self.params = params
        self.name = "bucket.%d.%s" % (index, names[first])
        total = sum(p.numel() for p in params)
        self.flat = torch.zeros(total, dtype=first.dtype, device=first.device)
        self.views = {}
        offset = 0
        for p in params:
            self.views[p] = self.flat[offset:offset + p.numel()].view(p.shape)
            offset += p.numel()
        self.ready = set()  # parameters whose gradient is in the bucket this step
        self.handle = None  # (handle, ctx) of the bucket's allreduce in flight


def is_view_of(tensor, view):
    """Whether `tensor` is `view` itself or shares its memory and layout (torch may hand back
    another Python object for the same view)."""
    if tensor is view:
        return True
    if tensor.layout != torch.strided or tensor.device != view.device:
        return False
    return (tensor.data_ptr() == view.data_ptr() and tensor.shape == view.shape and
            tensor.stride() == view.stride())


class GradientBuckets:
    """The buckets of one DistributedOptimizer. Not thread-safe: backward's hooks and step()
    run on the training thread."""

    def __init__(self, params, names, bucket_cap_mb):
        cap = max(1, int(bucket_cap_mb * 1024 * 1024))
        self.buckets = []
        self.bucket_of = {}
        self.fallen_back = set()  # parameters reduced on their own
        current, current_bytes = [], 0
        for p in reversed(params):
            nbytes = p.numel() * p.element_size()
            if current and (p.dtype != current[0].dtype or p.device != current[0].device or
                            current_bytes + nbytes > cap):
                self._add(current, names)
                current, current_bytes = [], 0
            current.append(p)
            current_bytes += nbytes
        if current:
            self._add(current, names)
        for bucket in self.buckets:
            for p in bucket.params:
                if p.grad is not None:
                    self._adopt(bucket, p)

    def _add(self, params, names):
        bucket = Bucket(len(self.buckets), params, names)
        self.buckets.append(bucket)
        for p in params:
            self.bucket_of[p] = bucket

    def holds(self, p):
        return p in self.bucket_of and p not in self.fallen_back

    def _fall_back(self, p, name, why):
        warnings.warn("chorus DistributedOptimizer(gradient_as_bucket_view=True): the gradient "
                      "of %s %s; it is reduced on its own from now on, not as a view into its "
                      "bucket" % (name, why), RuntimeWarning)
        self.fallen_back.add(p)
        self.bucket_of[p].views[p].zero_()

    def _adopt(self, bucket, p):
        """Makes p.grad its view (copying a gradient held elsewhere into it); False when it
        cannot be (the caller falls back)."""
        view = bucket.views[p]
        grad = p.grad
        if grad is None:
            view.zero_()
        elif not is_view_of(grad, view):
            if grad.is_sparse or grad.shape != view.shape:
                return False
            view.copy_(grad)
        p.grad = view
        return True

    def gradient_ready(self, p, name):
        """p's gradient for this step is final: put it in its bucket. Returns the bucket when
        every gradient of it is in, else None; None too (and p falls back) when p's gradient
        cannot be a view: the caller then reduces it on its own."""
        bucket = self.bucket_of[p]
        if not self._adopt(bucket, p):
            grad = p.grad
            self._fall_back(p, name, "is sparse" if grad.is_sparse else
                            "has shape %s, not the parameter's %s" % (tuple(grad.shape),
                                                                       tuple(p.shape)))
            return None
        bucket.ready.add(p)
        if len(bucket.ready) + self._fallen_back_in(bucket) == len(bucket.params):
            return bucket
        return None

    def _fallen_back_in(self, bucket):
        return sum(1 for p in bucket.params if p in self.fallen_back)

    def unready(self):
        """Buckets not submitted this step (some gradient never became ready)."""
        return [b for b in self.buckets if b.handle is None]

    def complete(self, bucket, names):
        """Puts the gradients that never became ready this step into the bucket (zeros where
        there is none, as Horovod submits them) so that it can be reduced. Returns the
        parameters whose gradient cannot be a view (they fall back: the caller reduces them on
        their own)."""
        fell_back = []
        for p in bucket.params:
            if p in bucket.ready or p in self.fallen_back:
                continue
            if self._adopt(bucket, p):
                bucket.ready.add(p)
            else:
                self._fall_back(p, names[p], "cannot be a view into its bucket")
                fell_back.append(p)
        return fell_back

    def reset(self):
        for bucket in self.buckets:
            bucket.ready.clear()
            bucket.handle = None
