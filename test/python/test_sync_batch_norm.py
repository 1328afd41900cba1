"""SyncBatchNorm: each rank normalizes its shard exactly as torch's BatchNorm on the full batch."""

import pytest
import torch

import chorus.torch as hvd

C = 3


def shard_bounds(rank, size):
    """Uneven shards: rank r holds 2 + r rows of the full batch."""
    lo = sum(2 + r for r in range(rank))
    return lo, lo + 2 + rank


def full_inputs(size, spatial, seed):
    n = sum(2 + r for r in range(size))
    g = torch.Generator().manual_seed(seed)
    shape = [n, C] + list(spatial)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 3.0 + 1.5
    weights = torch.randn(shape, generator=g, dtype=torch.float64)  # loss = sum(out * weights)
    return x, weights


def make_pair(momentum, spatial):
    ref_cls = {0: torch.nn.BatchNorm1d, 1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm2d}
    ref = ref_cls[len(spatial)](C, momentum=momentum).double()
    sync = hvd.SyncBatchNorm(C, momentum=momentum).double()
    with torch.no_grad():
        for m in (ref, sync):
            m.weight.copy_(torch.tensor([0.5, -1.0, 2.0]))
            m.bias.copy_(torch.tensor([0.1, 0.2, -0.3]))
    return ref, sync


@pytest.mark.parametrize("spatial", [(), (4,), (2, 3)], ids=["NC", "NCL", "NCHW"])
@pytest.mark.parametrize("momentum", [0.1, None], ids=["m0.1", "cumulative"])
def test_matches_batch_norm_on_full_batch(spatial, momentum):
    rank, size = hvd.rank(), hvd.size()
    lo, hi = shard_bounds(rank, size)
    ref, sync = make_pair(momentum, spatial)
    local, _ = make_pair(momentum, spatial)  # plain batch norm of the shard alone
    for step in range(3):
        x, w = full_inputs(size, spatial, seed=10 + step)
        x_ref = x.clone().requires_grad_()
        out_ref = ref(x_ref)
        (out_ref * w).sum().backward()

        x_mine = x[lo:hi].clone().requires_grad_()
        out = sync(x_mine)
        local(x[lo:hi])
        (out * w[lo:hi]).sum().backward()

        assert torch.allclose(out, out_ref[lo:hi], rtol=1e-10, atol=1e-12), step
        assert torch.allclose(sync.running_mean, ref.running_mean, rtol=1e-10, atol=1e-12)
        assert torch.allclose(sync.running_var, ref.running_var, rtol=1e-10, atol=1e-12)
        assert int(sync.num_batches_tracked) == int(ref.num_batches_tracked) == step + 1
        assert torch.allclose(x_mine.grad, x_ref.grad[lo:hi], rtol=1e-9, atol=1e-11), step
        # weight/bias gradients are per-rank shares: their sum is the full-batch gradient.
        for p, p_ref in ((sync.weight, ref.weight), (sync.bias, ref.bias)):
            total = hvd.allreduce(p.grad, op=hvd.Sum, name="sbn_test.param_grad")
            assert torch.allclose(total, p_ref.grad, rtol=1e-9, atol=1e-11), step
            p.grad = None
            p_ref.grad = None
    # Sanity: the statistics are not those of the shard alone.
    assert not torch.allclose(sync.running_mean, local.running_mean)

    # Eval: running statistics, no communication, identical to torch.
    ref.eval()
    sync.eval()
    x, _ = full_inputs(size, spatial, seed=99)
    assert torch.allclose(sync(x[lo:hi]), ref(x)[lo:hi], rtol=1e-10, atol=1e-12)


def test_module_api():
    m = hvd.SyncBatchNorm(4)
    assert isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
    assert m.process_set is hvd.global_process_set
    with pytest.raises(ValueError, match="at least 2D"):
        m(torch.ones(4))
    # Drop-in as a torchvision norm_layer: every rank gets the full-batch statistics.
    m = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), hvd.SyncBatchNorm(4))
    torch.manual_seed(0)
    m(torch.randn(2, 2, 5, 5) + hvd.rank())
    bn = m[1]
    every = hvd.allgather(bn.running_mean.unsqueeze(0), name="sbn_test.running_mean")
    for r in range(hvd.size()):
        assert torch.allclose(every[r], bn.running_mean)


def test_without_running_stats_normalizes_with_global_batch_stats():
    size, rank = hvd.size(), hvd.rank()
    lo, hi = shard_bounds(rank, size)
    x, _ = full_inputs(size, (), seed=5)
    ref = torch.nn.BatchNorm1d(C, affine=False, track_running_stats=False).double()
    sync = hvd.SyncBatchNorm(C, affine=False, track_running_stats=False).double()
    assert torch.allclose(sync(x[lo:hi]), ref(x)[lo:hi], rtol=1e-10, atol=1e-12)


def test_process_set_normalizes_over_its_members_only():
    rank, size = hvd.rank(), hvd.size()
    if size < 2:
        pytest.skip("needs 2 ranks")
    members = [0, size - 1]
    ps = hvd.add_process_set(members)
    try:
        if ps.included():
            x, w = full_inputs(size, (4,), seed=21)
            rows = [shard_bounds(r, size) for r in members]
            x_set = torch.cat([x[lo:hi] for lo, hi in rows])
            w_set = torch.cat([w[lo:hi] for lo, hi in rows])
            ref = torch.nn.BatchNorm1d(C).double()
            sync = hvd.SyncBatchNorm(C, process_set=ps).double()
            x_ref = x_set.clone().requires_grad_()
            out_ref = ref(x_ref)
            (out_ref * w_set).sum().backward()
            lo, hi = shard_bounds(rank, size)
            x_mine = x[lo:hi].clone().requires_grad_()
            out = sync(x_mine)
            (out * w[lo:hi]).sum().backward()
            off = 0 if rank == members[0] else rows[0][1] - rows[0][0]
            n = hi - lo
            assert torch.allclose(out, out_ref[off:off + n], rtol=1e-10, atol=1e-12)
            assert torch.allclose(sync.running_mean, ref.running_mean, rtol=1e-10, atol=1e-12)
            assert torch.allclose(sync.running_var, ref.running_var, rtol=1e-10, atol=1e-12)
            assert torch.allclose(x_mine.grad, x_ref.grad[off:off + n], rtol=1e-9, atol=1e-11)
    finally:
        assert hvd.remove_process_set(ps) is True
