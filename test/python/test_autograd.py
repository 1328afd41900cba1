"""Gradients of allreduce, allgather, broadcast, alltoall and reducescatter, and of their
grouped forms.

They follow horovod.torch's conventions, which are not all the plain derivative: the
gradients of allgather and broadcast average the incoming gradient over the process set, and
reducescatter's multiplies it by the set's size for Sum (and by the pre- and postscale
factors) before allgathering it.
"""

import pytest
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
    # Rank r weighs the output by (r + 1) * w: the average over ranks is mean(r + 1) * w.
    w = torch.arange(y.numel(), dtype=torch.float64).reshape(y.shape)
    (y * w * (rank + 1)).sum().backward()
    offset = sum(r + 1 for r in range(rank))
    mean_weight = (size + 1) / 2.0
    assert torch.allclose(x.grad, mean_weight * w[offset:offset + rank + 1])


def test_grouped_allgather_grad():
    size, rank = hvd.size(), hvd.rank()
    xs = [torch.full((rank + 1, 2), float(rank), dtype=torch.float64, requires_grad=True),
          torch.full((2, 3), 1.0, dtype=torch.float32, requires_grad=True)]
    ys = hvd.grouped_allgather(xs, name="grad_gag")
    assert isinstance(ys, list) and len(ys) == 2
    assert ys[1].shape == (2 * size, 3)
    weights = [torch.arange(y.numel(), dtype=y.dtype).reshape(y.shape) for y in ys]
    sum((y * w * (rank + 1)).sum() for y, w in zip(ys, weights)).backward()
    mean_weight = (size + 1) / 2.0
    offset = sum(r + 1 for r in range(rank))
    assert torch.allclose(xs[0].grad, mean_weight * weights[0][offset:offset + rank + 1])
    assert torch.allclose(xs[1].grad, mean_weight * weights[1][2 * rank:2 * rank + 2])


def test_grouped_allgather_of_one_tensor_returns_a_list():
    x = torch.ones(1, 2, requires_grad=True)
    ys = hvd.grouped_allgather([x], name="grad_gag1")
    assert isinstance(ys, list) and len(ys) == 1
    ys[0].sum().backward()
    assert torch.allclose(x.grad, torch.ones_like(x))


def test_broadcast_grad():
    size, rank = hvd.size(), hvd.rank()
    root = size - 1
    x = torch.full((3,), float(rank), dtype=torch.float64, requires_grad=True)
    y = hvd.broadcast(x, root, name="grad_bc")
    assert torch.allclose(y, torch.full((3,), float(root), dtype=torch.float64))
    (y * 2.0 * (rank + 1)).sum().backward()
    # The root gets the average over ranks of 2 * (r + 1); the others zeros.
    expected = 2.0 * (size + 1) / 2.0 if rank == root else 0.0
    assert torch.allclose(x.grad, torch.full((3,), expected, dtype=torch.float64))


def test_alltoall_grad():
    size = hvd.size()
    x = torch.ones(2 * size, 2, dtype=torch.float64, requires_grad=True)
    y = hvd.alltoall(x, name="grad_a2a")
    (y * 3.0).sum().backward()
    assert torch.allclose(x.grad, torch.full_like(x, 3.0))


@pytest.mark.parametrize("op,pre,post", [("Sum", 1.0, 1.0), ("Average", 1.0, 1.0),
                                          ("Sum", 0.5, 3.0), ("Average", 2.0, 1.0)])
def test_reducescatter_grad(op, pre, post):
    size, rank = hvd.size(), hvd.rank()
    x = torch.ones(2 * size, 3, dtype=torch.float64, requires_grad=True)
    y = hvd.reducescatter(x, op=getattr(hvd, op), prescale_factor=pre, postscale_factor=post,
                          name="grad_rs.%s.%s.%s" % (op, pre, post))
    reduced = pre * post * (size if op == "Sum" else 1)
    assert torch.allclose(y, torch.full((2, 3), float(reduced), dtype=torch.float64))
    (y * (rank + 1)).sum().backward()
    # Rank r's rows of the allgathered output gradient are r + 1, scaled by the set's size
    # for Sum and by both factors.
    scale = pre * post * (size if op == "Sum" else 1)
    expected = torch.cat([torch.full((2, 3), float(r + 1), dtype=torch.float64)
                          for r in range(size)]) * scale
    assert torch.allclose(x.grad, expected)


def test_grouped_reducescatter_grad():
    size, rank = hvd.size(), hvd.rank()
    xs = [torch.ones(2 * size, 3, dtype=torch.float64, requires_grad=True),
          torch.ones(size, dtype=torch.float32, requires_grad=True)]
    ys = hvd.grouped_reducescatter(xs, op=hvd.Sum, name="grad_grs")
    assert isinstance(ys, list) and [y.shape[0] for y in ys] == [2, 1]
    sum((y * (rank + 1)).sum() for y in ys).backward()
    rows = [2, 1]
    for x, n in zip(xs, rows):
        expected = torch.cat([torch.full((n,) + tuple(x.shape[1:]), float(r + 1), dtype=x.dtype)
                              for r in range(size)]) * size
        assert torch.allclose(x.grad, expected)
