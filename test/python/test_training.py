"""Training-loop behaviour: optimizer-state broadcast, join with uneven data, and the API
additions (sparse_allreduce_async, timeline, Adasum errors)."""

import os

import pytest
import torch

import chorus.torch as hvd


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(),
                               torch.nn.Linear(6, 2)).double()


def batch(step, rank, n=5):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return (torch.randn(n, 4, generator=g, dtype=torch.float64),
            torch.randn(n, 2, generator=g, dtype=torch.float64))


def loss_of(model, step, rank):
    x, y = batch(step, rank)
    return torch.nn.functional.mse_loss(model(x), y)


def flat_state(opt):
    """The optimizer state as a sorted list of (key, value) with tensors flattened."""
    sd = opt.state_dict()
    out = []
    for pid in sorted(sd["state"]):
        for k in sorted(sd["state"][pid]):
            v = sd["state"][pid][k]
            out.append(("%s.%s" % (pid, k), v.reshape(-1).tolist()
                        if torch.is_tensor(v) else v))
    for i, g in enumerate(sd["param_groups"]):
        out.append(("group%d" % i, sorted((k, v) for k, v in g.items() if k != "params")))
    return out


OPTIMIZERS = {
    "sgd_momentum": lambda p, rank: torch.optim.SGD(p, lr=0.1 + 0.01 * rank, momentum=0.9),
    "adam": lambda p, rank: torch.optim.Adam(p, lr=0.01 + 0.001 * rank),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_broadcast_optimizer_state_makes_states_identical(name):
    rank = hvd.rank()
    model = make_model(10 + rank)
    opt = OPTIMIZERS[name](model.parameters(), rank)
    # Rank-dependent local history (different momentum / moments / step counts), with a
    # plain (non-distributed) optimizer.
    for s in range(1 + rank):
        opt.zero_grad()
        loss_of(model, s, rank).backward()
        opt.step()
    assert len(opt.state) > 0
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    before = hvd.allgather_object(flat_state(opt), name="bos_before_" + name)
    assert all(b == before[0] for b in before)

    dist = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    dist.zero_grad()
    loss_of(model, 50, rank).backward()  # different data per rank: gradients are averaged
    dist.step()
    after = hvd.allgather_object(flat_state(dist), name="bos_after_" + name)
    assert all(a == after[0] for a in after)
    assert after[0] != before[0]  # the step changed the state
    params = hvd.allgather_object([p.detach().tolist() for p in model.parameters()],
                                  name="bos_params_" + name)
    assert all(p == params[0] for p in params)
    # The learning rate is root's, not this rank's.
    assert opt.param_groups[0]["lr"] == OPTIMIZERS[name]([torch.zeros(1)], 0).defaults["lr"]


def join_reference(size, lr, divide_by_active):
    """Parameters after each step of the uneven-join run, computed in one process."""
    ref = make_model(0)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=lr)
    after = []
    for s in range(3 + size - 1):
        active = [r for r in range(size) if s < 3 + r]
        grads = [torch.zeros_like(p) for p in ref.parameters()]
        for r in active:
            ref.zero_grad()
            loss_of(ref, s, r).backward()
            for g, p in zip(grads, ref.parameters()):
                g += p.grad
        for g, p in zip(grads, ref.parameters()):
            p.grad = g / (len(active) if divide_by_active else size)
        ref_opt.step()
        after.append([p.detach().clone() for p in ref.parameters()])
    return after


def test_join_with_uneven_batches_matches_reference():
    # Rank r runs 3 + r steps, then joins. While joined, a rank contributes zeros to the
    # allreduces of the ranks still training and the Average still divides by size: at step s
    # the applied gradient is sum over active ranks r (s < 3 + r) of grad_r / size.
    rank, size = hvd.rank(), hvd.size()
    lr = 0.1
    ref_after = join_reference(size, lr, divide_by_active=False)

    model = make_model(0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                   named_parameters=model.named_parameters())
    for s in range(3 + rank):
        opt.zero_grad()
        loss_of(model, s, rank).backward()
        opt.step()
    last = hvd.join()
    assert last == size - 1  # the rank with the most batches joins last
    for a, b in zip(model.parameters(), ref_after[2 + rank]):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
    if rank > 0:
        # Sanity: dividing by the number of active ranks would have given other weights.
        other = join_reference(size, lr, divide_by_active=True)[2 + rank]
        assert not all(torch.allclose(a, b) for a, b in zip(model.parameters(), other))
    # After join, every rank trains together again.
    out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after_uneven_join")
    assert out.tolist() == [float(size)] * 2


def test_join_zeros_divided_by_size_directly():
    # Rank 0 joins at once; the others reduce: the average divides by the full size.
    rank, size = hvd.rank(), hvd.size()
    if size == 1:
        pytest.skip("needs 2 ranks")
    if rank != 0:
        t = torch.full((3,), float(rank), dtype=torch.float64)
        out = hvd.allreduce(t, name="join_direct")
        assert torch.allclose(out, torch.full((3,), sum(range(1, size)) / size,
                                              dtype=torch.float64))
    assert hvd.join() in range(1, size)


def test_sparse_allreduce_async_sums_and_averages():
    rank, size = hvd.rank(), hvd.size()
    dense = torch.zeros(5, 3, dtype=torch.float64)
    dense[rank % 5] = float(rank + 1)
    dense[4, 1] = 10.0 * (rank + 1)
    sparse = dense.to_sparse()
    everyone = sum(  # the reference: every rank's dense tensor, added up
        _rank_dense(r) for r in range(size))
    h = hvd.sparse_allreduce_async(sparse, name="sparse_sum", op=hvd.Sum)
    while not hvd.poll(h):
        pass
    out = hvd.synchronize(h)
    assert out.is_sparse and out.shape == (5, 3)
    assert torch.allclose(out.to_dense(), everyone)
    h = hvd.sparse_allreduce_async(sparse, name="sparse_avg", op=hvd.Average)
    assert callable(h)  # Horovod's handle is a callable
    assert torch.allclose(h().to_dense(), everyone / size)
    # An embedding's sparse gradient, reduced like Horovod's optimizer would.
    emb = torch.nn.Embedding(6, 2, sparse=True).double()
    emb(torch.tensor([rank % 6, 5])).sum().backward()
    g = hvd.synchronize(hvd.sparse_allreduce_async(emb.weight.grad, name="emb", op=hvd.Sum))
    expected = torch.zeros(6, 2, dtype=torch.float64)
    for r in range(size):
        expected[r % 6] += 1.0
        expected[5] += 1.0
    assert torch.allclose(g.to_dense(), expected)
    with pytest.raises(ValueError, match="sparse"):
        hvd.sparse_allreduce_async(dense, name="not_sparse", op=hvd.Sum)


def _rank_dense(r):
    d = torch.zeros(5, 3, dtype=torch.float64)
    d[r % 5] = float(r + 1)
    d[4, 1] = 10.0 * (r + 1)
    return d


def test_start_timeline_needs_the_timeline_variable(tmp_path):
    # As in Horovod: without CHORUS_TIMELINE/HOROVOD_TIMELINE at init, start_timeline is refused
    # (the recording itself is tested in test/timeline with real jobs).
    assert "CHORUS_TIMELINE" not in os.environ and "HOROVOD_TIMELINE" not in os.environ
    with pytest.raises(ValueError, match="CHORUS_TIMELINE=DYNAMIC"):
        hvd.start_timeline(str(tmp_path / "t.json"))
    with pytest.raises(ValueError, match="CHORUS_TIMELINE=DYNAMIC"):
        hvd.start_timeline(str(tmp_path / "t.json"), mark_cycles=True)
    hvd.stop_timeline()  # nothing recorded: a no-op
    assert not (tmp_path / "t.json").exists()


def test_adasum_is_rejected_clearly():
    assert hvd.Adasum not in (hvd.Sum, hvd.Average)
    with pytest.raises(hvd.HorovodInternalError, match="Adasum is not implemented"):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum, name="adasum_check")
    model = make_model(0)
    with pytest.raises(ValueError, match="Adasum"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum)
    # The runtime keeps working afterwards.
    out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after_adasum")
    assert out.tolist() == [float(hvd.size())] * 2
