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
    # What broadcast_optimizer_state does to a fresh optimizer (as Horovod's): one step on
    # zero gradients, which creates the state (and counts a step for Adam).
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
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


def test_requires_grad_switched_per_step():
    """Two models, each with its own DistributedOptimizer, trained in alternating steps by
    switching requires_grad (a GAN's generator and discriminator): a parameter gets a non-zero
    gradient exactly when it is trained, and after each step the parameters are the same on
    every rank even though each rank has its own input."""
    torch.manual_seed(7)
    gen = torch.nn.Linear(3, 4).double()
    disc = torch.nn.Linear(4, 1).double()
    hvd.broadcast_parameters(gen.state_dict(), root_rank=0)
    hvd.broadcast_parameters(disc.state_dict(), root_rank=0)
    gen_opt = hvd.DistributedOptimizer(torch.optim.SGD(gen.parameters(), lr=0.1),
                                       named_parameters=gen.named_parameters())
    disc_opt = hvd.DistributedOptimizer(torch.optim.SGD(disc.parameters(), lr=0.1),
                                        named_parameters=disc.named_parameters())
    inp = torch.full((2, 3), float(hvd.rank() + 1), dtype=torch.float64)

    def trained(p):
        return p.grad is not None and bool(p.grad.abs().max() > 0)

    for step in range(6):
        train_gen = step % 2 == 0
        for p in gen.parameters():
            p.requires_grad_(train_gen)
        for p in disc.parameters():
            p.requires_grad_(not train_gen)
        gen_opt.zero_grad()
        disc_opt.zero_grad()
        disc(gen(inp)).sum().backward()
        assert all(trained(p) == train_gen for p in gen.parameters())
        assert all(trained(p) != train_gen for p in disc.parameters())
        (gen_opt if train_gen else disc_opt).step()
        for p in list(gen.parameters()) + list(disc.parameters()):
            gathered = hvd.allgather(p.detach().reshape(1, -1), name="rg.%d" % step)
            assert torch.equal(gathered, gathered[:1].expand_as(gathered))


@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: torch.optim.Adam(ps, lr=0.01),
], ids=["sgd_momentum", "adam"])
@pytest.mark.parametrize("distributed", [False, True])
def test_broadcast_optimizer_state_of_a_fresh_optimizer(make_opt, distributed):
    """A never-stepped optimizer gets its state from one step on zero gradients (as Horovod),
    then root's state: every rank ends with the same state tensors; a parameter that does not
    require grad keeps grad None; parameters that do get zero gradients."""
    torch.manual_seed(11 + hvd.rank())  # different on every rank until broadcast
    frozen = torch.nn.Parameter(torch.randn(2, dtype=torch.float64), requires_grad=False)
    trained = torch.nn.Parameter(torch.randn(3, dtype=torch.float64))
    hvd.broadcast_parameters([frozen, trained], root_rank=0)
    opt = make_opt([frozen, trained])
    if distributed:
        opt = hvd.DistributedOptimizer(opt, named_parameters=[("frozen", frozen),
                                                              ("trained", trained)])
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert frozen.grad is None
    assert trained.grad is not None and not trained.grad.any()
    state = opt.state_dict()["state"]
    assert len(state) == 1  # the trained parameter's
    for value in state[next(iter(state))].values():
        if torch.is_tensor(value):
            gathered = hvd.allgather(value.reshape(1, -1).double(), name="fresh_state")
            assert torch.equal(gathered, gathered[:1].expand_as(gathered))
    gathered = hvd.allgather(trained.detach().reshape(1, -1), name="fresh_param")
    assert torch.equal(gathered, gathered[:1].expand_as(gathered))


def test_broadcast_optimizer_state_refuses_lbfgs():
    p = torch.nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match="LBFGS"):
        hvd.broadcast_optimizer_state(torch.optim.LBFGS([p]), root_rank=0)


def test_step_after_explicit_synchronize():
    """step() after synchronize() warns (with Horovod's message) unless inside
    skip_synchronize(), which applies the already reduced gradients once."""
    import warnings
    model = torch.nn.Linear(2, 1).double()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters())
    x = torch.full((1, 2), float(hvd.rank() + 1), dtype=torch.float64)
    for skip in (False, True):
        opt.zero_grad()
        model(x).sum().backward()
        opt.synchronize()
        mean_grad = sum(r + 1 for r in range(hvd.size())) / hvd.size()
        assert torch.allclose(model.weight.grad, torch.full((1, 2), mean_grad).double())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if skip:
                with opt.skip_synchronize():
                    opt.step()
            else:
                opt.step()
        messages = [str(w.message) for w in caught]
        if skip:
            assert messages == []
        else:
            assert len(messages) == 1
            assert "optimizer.step() called without optimizer.skip_synchronize()" in messages[0]


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_embedding_gradients(sparse_as_dense):
    """nn.Embedding(sparse=True) gradients: allgathered as indices + values (or densified with
    sparse_as_dense) and averaged; every rank ends with the same embedding, equal to one SGD
    step on the mean of the ranks' gradients."""
    size, rank = hvd.size(), hvd.rank()
    torch.manual_seed(3)
    emb = torch.nn.Embedding(6, 2, sparse=True).double()
    hvd.broadcast_parameters(emb.state_dict(), root_rank=0)
    start = emb.weight.detach().clone()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=0.5),
                                   named_parameters=emb.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    rows = [[r % 6, (2 * r + 1) % 6] for r in range(size)]  # rank r looks up these rows
    opt.zero_grad()
    emb(torch.tensor(rows[rank])).sum().backward()
    opt.step()
    assert emb.weight.grad.is_sparse  # also with sparse_as_dense, as in Horovod
    mean_grad = torch.zeros(6, 2, dtype=torch.float64)
    for r in range(size):
        for i in rows[r]:
            mean_grad[i] += 1.0 / size
    assert torch.allclose(emb.weight.detach(), start - 0.5 * mean_grad)


def test_optimizer_unnamed_parameters_of_several_groups():
    # Horovod names unnamed parameters allreduce.noname.<group>.<index>: unique across groups.
    rank, size = hvd.rank(), hvd.size()
    a = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    b = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([{"params": [a]}, {"params": [b]}], lr=1.0))
    ((a * (rank + 1)).sum() + (b * 2 * (rank + 1)).sum()).backward()
    opt.step()
    mean = (size + 1) / 2.0  # the average over ranks of rank + 1
    assert torch.allclose(a, torch.full((2,), -mean, dtype=torch.float64))
    assert torch.allclose(b, torch.full((3,), -2 * mean, dtype=torch.float64))
