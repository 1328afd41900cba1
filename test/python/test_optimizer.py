"""DistributedOptimizer and the broadcast helpers."""

import pytest
import torch

import chorus.torch as hvd

BATCH = 12  # divisible by 1, 2, 3 and 4 ranks
STEPS = 20


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 3)).double()


def full_batch():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(STEPS, BATCH, 5, generator=g, dtype=torch.float64)
    y = torch.randn(STEPS, BATCH, 3, generator=g, dtype=torch.float64)
    return x, y


def train_reference(make_opt):
    model = make_model(0)
    opt = make_opt(model.parameters())
    x, y = full_batch()
    for s in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[s]), y[s]).backward()
        opt.step()
    return model


def train_distributed(make_opt, compression=hvd.Compression.none, **kwargs):
    rank, size = hvd.rank(), hvd.size()
    model = make_model(100 + rank)  # different init per rank: broadcast_parameters fixes it
    if rank == 0:
        model.load_state_dict(make_model(0).state_dict())
    opt = make_opt(model.parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    groups = kwargs.pop("groups", None)
    if groups == "explicit":  # first and last layer together, the middle one alone
        params = list(model.parameters())
        groups = [[params[0], params[3]], [params[1], params[2]]]
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=compression, groups=groups, **kwargs)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    x, y = full_batch()
    shard = BATCH // size
    lo, hi = rank * shard, (rank + 1) * shard
    for s in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[s, lo:hi]), y[s, lo:hi]).backward()
        opt.step()
    return model


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_data_parallel_matches_single_process(name):
    ref = train_reference(OPTIMIZERS[name])
    dist = train_distributed(OPTIMIZERS[name])
    for (n, a), (_, b) in zip(ref.named_parameters(), dist.named_parameters()):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-10), n
    # Sanity: training moved the weights.
    assert not torch.allclose(make_model(0)[0].weight, dist[0].weight)


@pytest.mark.parametrize("groups", [1, 2, "explicit"])
def test_grouped_gradients_match_single_process(groups):
    ref = train_reference(OPTIMIZERS["momentum"])
    dist = train_distributed(OPTIMIZERS["momentum"], groups=groups)
    for (n, a), (_, b) in zip(ref.named_parameters(), dist.named_parameters()):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-10), n


def test_num_groups_deprecated_spelling():
    with pytest.warns(DeprecationWarning):
        dist = train_distributed(OPTIMIZERS["sgd"], num_groups=2)
    ref = train_reference(OPTIMIZERS["sgd"])
    for a, b in zip(ref.parameters(), dist.parameters()):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-10)


def test_backward_passes_per_step_accumulates_locally():
    # Two backward passes per step on halves of the shard equal one reference step whose
    # loss is the sum over the two micro-batches (each one the concatenation of every
    # rank's half).
    rank, size = hvd.rank(), hvd.size()
    shard = BATCH // size
    half = shard // 2
    x, y = full_batch()

    def micro(r, k):
        lo = r * shard + k * half
        return slice(lo, lo + half)

    ref = make_model(0)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for s in range(STEPS):
        ref_opt.zero_grad()
        for k in range(2):
            xs = torch.cat([x[s, micro(r, k)] for r in range(size)])
            ys = torch.cat([y[s, micro(r, k)] for r in range(size)])
            torch.nn.functional.mse_loss(ref(xs), ys).backward()
        ref_opt.step()

    model = make_model(0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2)
    for s in range(STEPS):
        opt.zero_grad()
        for k in range(2):
            loss = torch.nn.functional.mse_loss(model(x[s, micro(rank, k)]),
                                                y[s, micro(rank, k)])
            loss.backward()
        opt.step()
    for a, b in zip(ref.parameters(), model.parameters()):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-10)


def test_gradient_predivide_factor_and_sum():
    ones = torch.ones(2, 5, dtype=torch.float64)
    # The local gradient, computed on a copy without hooks (p.grad of the wrapped model is
    # being reduced in place as soon as backward produces it).
    plain = make_model(0)
    plain(ones * (hvd.rank() + 1)).sum().backward()
    local = [p.grad.clone() for p in plain.parameters()]
    model = make_model(0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0),
                                   named_parameters=model.named_parameters(),
                                   gradient_predivide_factor=2.0)
    model(ones * (hvd.rank() + 1)).sum().backward()
    opt.step()
    everyone = [hvd.allgather(g.unsqueeze(0), name="predivide.%d" % i)
                for i, g in enumerate(local)]
    for p, e in zip(model.parameters(), everyone):
        assert torch.allclose(p.grad, e.mean(0))
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Sum,
                                 gradient_predivide_factor=2.0)


def test_fp16_compression_close():
    ref = train_reference(OPTIMIZERS["sgd"])
    dist = train_distributed(OPTIMIZERS["sgd"], compression=hvd.Compression.fp16)
    for a, b in zip(ref.parameters(), dist.parameters()):
        assert torch.allclose(a, b, rtol=1e-2, atol=1e-2)


def test_optimizer_unnamed_parameters_and_zero_grad_guard():
    model = make_model(0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    assert isinstance(opt, torch.optim.SGD)
    model(torch.ones(2, 5, dtype=torch.float64)).sum().backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.step()
    opt.zero_grad()


def test_optimizer_rejects_duplicate_names():
    model = make_model(0)
    params = list(model.parameters())
    named = [("same", params[0]), ("same", params[1])] + [("p%d" % i, p)
                                                          for i, p in enumerate(params[2:])]
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1), named_parameters=named)


def test_broadcast_object():
    obj = {"rank": hvd.rank(), "data": list(range(hvd.rank() + 3))}
    out = hvd.broadcast_object(obj, root_rank=0)
    assert out == {"rank": 0, "data": [0, 1, 2]}
    if hvd.size() > 1:
        out = hvd.broadcast_object("from-%d" % hvd.rank(), root_rank=1, name="bo_str")
        assert out == "from-1"


def test_allgather_object():
    out = hvd.allgather_object(("r", hvd.rank(), "x" * hvd.rank()))
    assert out == [("r", r, "x" * r) for r in range(hvd.size())]


def test_broadcast_parameters_list_of_tensors():
    ts = [torch.full((2,), float(hvd.rank())), torch.full((3, 1), float(hvd.rank() + 1))]
    hvd.broadcast_parameters([("a", ts[0]), ("b", ts[1])], root_rank=0)
    assert ts[0].tolist() == [0.0, 0.0]
    assert ts[1].flatten().tolist() == [1.0, 1.0, 1.0]
