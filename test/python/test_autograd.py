"""Gradients of allreduce, allgather, broadcast, alltoall and reducescatter."""

import torch

import chorus.torch as hvd


def test_allreduce_grad():
    size = hvd.size()
    x = torch.arange(4, dtype=torch.float64).requires_grad_()
    y = hvd.allreduce(x, op=hvd.Sum, name="grad_ar")
    (y * torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)).sum().backward()
    # d/dx_r of sum_k w_k * sum_r x_r = w on every rank, then allreduce(Sum) of w.
    assert torch.allclose(x.grad, torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64) * size)

    x2 = torch.ones(3, dtype=torch.float64, requires_grad=True)
    hvd.allreduce(x2, name="grad_ar_avg").sum().backward()  # Average
    assert torch.allclose(x2.grad, torch.ones(3, dtype=torch.float64))


def test_allgather_grad():
    size, rank = hvd.size(), hvd.rank()
    x = torch.full((rank + 1, 2), float(rank), dtype=torch.float64, requires_grad=True)
    y = hvd.allgather(x, name="grad_ag")
    assert y.shape[0] == sum(r + 1 for r in range(size))
    w = torch.arange(y.numel(), dtype=torch.float64).reshape(y.shape)
    (y * w).sum().backward()
    offset = sum(r + 1 for r in range(rank))
    # Every rank computes the same loss weights, so the summed gradient is size * w.
    assert torch.allclose(x.grad, size * w[offset:offset + rank + 1])


def test_broadcast_grad():
    size, rank = hvd.size(), hvd.rank()
    root = size - 1
    x = torch.full((3,), float(rank), dtype=torch.float64, requires_grad=True)
    y = hvd.broadcast(x, root, name="grad_bc")
    assert torch.allclose(y, torch.full((3,), float(root), dtype=torch.float64))
    (y * 2.0).sum().backward()
    expected = 2.0 * size if rank == root else 0.0
    assert torch.allclose(x.grad, torch.full((3,), expected, dtype=torch.float64))


def test_alltoall_grad():
    size = hvd.size()
    x = torch.ones(2 * size, 2, dtype=torch.float64, requires_grad=True)
    y = hvd.alltoall(x, name="grad_a2a")
    (y * 3.0).sum().backward()
    assert torch.allclose(x.grad, torch.full_like(x, 3.0))


def test_reducescatter_grad():
    size = hvd.size()
    x = torch.ones(2 * size, 3, dtype=torch.float64, requires_grad=True)
    y = hvd.reducescatter(x, op=hvd.Sum, name="grad_rs")
    assert torch.allclose(y, torch.full((2, 3), float(size), dtype=torch.float64))
    y.sum().backward()
    assert torch.allclose(x.grad, torch.ones_like(x))
