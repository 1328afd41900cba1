"""SyncBatchNorm: batch normalization over the batch of every rank of a process set.

Semantics of horovod.torch.SyncBatchNorm (CPU tensors too): in training, the mean and the
(biased) variance used to normalize are those of the concatenation of every rank's batch,
and the running statistics are updated with them (unbiased variance), exactly as
torch.nn.BatchNorm*d on the full batch would. In eval mode, or on a single-rank set, it is a
plain batch norm. weight/bias gradients are this rank's share (DistributedOptimizer averages
them like any gradient); the input gradient accounts for the statistics' dependence on every
rank's input.

Collectives: one allgather in forward and one allreduce in backward per call, named after the
number of features, so every rank must call its SyncBatchNorm layers in the same order (they
do, running the same model). Calls are synchronous: two layers never have an op in flight at
once from one thread.
"""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from chorus.process_sets import global_process_set
from chorus.torch import mpi_ops


class SyncBatchNorm(_BatchNorm):
    """Applies synchronous batch normalization over inputs of shape (N, C, ...)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def _run_bn(self, input, average_factor):
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats, average_factor,
                            self.eps)

    @torch.jit.unused
    def _maybe_run_sync_bn(self, input, average_factor=0.0):
        if self.process_set.size() == 1:
            return self._run_bn(input, average_factor)
        return _SyncBatchNorm.apply(input, self.weight, self.bias, self.running_mean,
                                    self.running_var, self.eps, average_factor,
                                    self.process_set)

    def forward(self, input):
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked = self.num_batches_tracked + 1
            if self.momentum is None:
                average_factor = 1.0 / float(self.num_batches_tracked)
            else:
                average_factor = self.momentum
        else:
            average_factor = 0.0
        if not self.training:
            return self._run_bn(input, average_factor)
        return self._maybe_run_sync_bn(input, average_factor)


def _channel_view(t, like):
    """Reshapes the per-channel vector `t` to broadcast against `like` (N, C, ...)."""
    return t.view([1, -1] + [1] * (like.dim() - 2))


class _SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum,
                process_set):
        input = input.contiguous()
        c = input.size(1)
        dims = [0] + list(range(2, input.dim()))
        count = input.numel() // c if c else 0
        if count > 0:
            mean = input.mean(dim=dims)
            var = input.var(dim=dims, unbiased=False)
        else:
            mean = input.new_zeros(c)
            var = input.new_zeros(c)
        # One row per rank: [count, mean (c), biased var (c)], in the input's dtype.
        local = torch.cat([input.new_tensor([float(count)]), mean, var]).unsqueeze(0)
        rows = mpi_ops.synchronize(mpi_ops.allgather_async(
            local.detach(), name="sync_batch_norm.%d.stats" % c, process_set=process_set))
        counts = rows[:, 0]
        means = rows[:, 1:1 + c]
        vars_ = rows[:, 1 + c:]
        total = counts.sum()
        if total.item() <= 0:
            raise ValueError("SyncBatchNorm: every rank's batch is empty")
        w = (counts / total).unsqueeze(1)
        g_mean = (w * means).sum(0)
        g_var = (w * (vars_ + (means - g_mean) ** 2)).sum(0)
        invstd = torch.rsqrt(g_var + eps)

        if running_mean is not None and momentum != 0.0:
            n = total.item()
            unbiased = g_var * (n / (n - 1)) if n > 1 else g_var
            running_mean.mul_(1.0 - momentum).add_(g_mean.to(running_mean.dtype),
                                                   alpha=momentum)
            running_var.mul_(1.0 - momentum).add_(unbiased.to(running_var.dtype),
                                                  alpha=momentum)

        xhat = (input - _channel_view(g_mean, input)) * _channel_view(invstd, input)
        out = xhat
        if weight is not None:
            out = out * _channel_view(weight, input)
        if bias is not None:
            out = out + _channel_view(bias, input)
        ctx.save_for_backward(input, weight, g_mean, invstd, total)
        ctx.process_set = process_set
        ctx.has_bias = bias is not None
        return out

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, g_mean, invstd, total = ctx.saved_tensors
        grad_output = grad_output.contiguous()
        c = input.size(1)
        dims = [0] + list(range(2, input.dim()))
        xhat = (input - _channel_view(g_mean, input)) * _channel_view(invstd, input)
        sum_dy = grad_output.sum(dim=dims)
        sum_dy_xhat = (grad_output * xhat).sum(dim=dims)

        grad_input = grad_weight = grad_bias = None
        if weight is not None and ctx.needs_input_grad[1]:
            grad_weight = sum_dy_xhat.to(weight.dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = sum_dy.to(weight.dtype if weight is not None else sum_dy.dtype)
        if ctx.needs_input_grad[0]:
            both = torch.cat([sum_dy, sum_dy_xhat])
            both = mpi_ops.synchronize(mpi_ops.allreduce_async(
                both, name="sync_batch_norm.%d.grad" % c, op=mpi_ops.Sum,
                process_set=ctx.process_set))
            n = total.item()
            mean_dy = _channel_view(both[:c] / n, input)
            mean_dy_xhat = _channel_view(both[c:] / n, input)
            scale = invstd if weight is None else invstd * weight
            grad_input = (grad_output - mean_dy - xhat * mean_dy_xhat) * _channel_view(scale,
                                                                                    input)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None
