"""DistributedOptimizer(gradient_as_bucket_view=True) against the copying path: every
gradient a view into a persistent bucket, each bucket reduced in place, and the parameters
after every step bit-equal to those of the per-tensor (copying) optimizer, in each case its
design must survive: several steps, zero_grad(set_to_none=True), gradient accumulation
(backward_passes_per_step), parameters without a gradient in a step, Compression.fp16, a
process set, a sparse gradient (which falls back, with a warning).

The model is a sum of linear layers applied to the input and the loss the sum of the output,
so each gradient is a sum of input rows (multiples of 1/8 in [-1, 1]): exact in float32 and in
float16, whatever order a reduction adds them in (the ranks' reductions may associate
differently for a whole bucket than for one tensor). A difference can only come from a gradient
put in the wrong place.
"""

import warnings

import pytest
import torch

import chorus.torch as hvd

STEPS = 4


class Model(torch.nn.Module):
    """Linear layers of several sizes, each applied to the input (one larger than the buckets'
    cap: a bucket of its own), one used on odd steps only (no gradient on even ones), and an
    optional sparse embedding."""

    def __init__(self, sparse=False):
        super().__init__()
        torch.manual_seed(7)
        self.a = torch.nn.Linear(6, 40)
        self.b = torch.nn.Linear(6, 1000)
        self.c = torch.nn.Linear(6, 5)
        self.side = torch.nn.Linear(6, 3)
        self.emb = torch.nn.Embedding(10, 5, sparse=True) if sparse else None

    def forward(self, x, step):
        y = self.a(x).sum() + self.b(x).sum() + self.c(x).sum()
        if step % 2 == 1:
            y = y + self.side(x).sum()
        if self.emb is not None:
            y = y + self.emb(torch.tensor([step % 10])).sum()
        return y


def batch(step):
    g = torch.Generator().manual_seed(100 * step + hvd.rank())
    return torch.randint(-8, 9, (3, 6), generator=g).float() / 8


def train(view, steps=STEPS, set_to_none=False, passes=1, compression=hvd.Compression.none,
          process_set=hvd.global_process_set, sparse=False, cap_mb=0.004):
    """Parameters after each step, and the optimizer."""
    model = Model(sparse=sparse)
    opt = torch.optim.SGD(model.parameters(), lr=1.0 / 16)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, compression=compression,
                                   process_set=process_set, gradient_as_bucket_view=view,
                                   bucket_cap_mb=cap_mb)
    history = []
    for step in range(steps):
        opt.zero_grad(set_to_none=set_to_none)
        for _ in range(passes):
            model(batch(step), step).backward()
        opt.step()
        history.append([p.detach().clone() for p in model.parameters()])
    return history, opt, model


def assert_bit_equal(a, b):
    for step, (pa, pb) in enumerate(zip(a, b)):
        for i, (x, y) in enumerate(zip(pa, pb)):
            assert torch.equal(x, y), "step %d parameter %d differs" % (step, i)


def assert_views(opt, model):
    """Every parameter's .grad is its bucket view (same memory as the bucket tensor)."""
    buckets = opt._buckets
    assert buckets is not None and len(buckets.buckets) > 1
    for p in model.parameters():
        if not buckets.holds(p):
            continue
        bucket = buckets.bucket_of[p]
        start = bucket.flat.data_ptr()
        end = start + bucket.flat.numel() * bucket.flat.element_size()
        assert p.grad is not None and start <= p.grad.data_ptr() < end
        assert p.grad.data_ptr() == bucket.views[p].data_ptr()


@pytest.mark.parametrize("set_to_none", [False, True])
def test_bucket_view_matches_copying_path(set_to_none):
    copied, _, _ = train(False, set_to_none=set_to_none)
    viewed, opt, model = train(True, set_to_none=set_to_none)
    assert_bit_equal(copied, viewed)
    assert_views(opt, model)  # after the steps, and after zero_grad(set_to_none=...) + step


def test_bucket_view_gradient_accumulation():
    copied, _, _ = train(False, passes=2)
    viewed, opt, model = train(True, passes=2)
    assert_bit_equal(copied, viewed)
    assert_views(opt, model)


def test_bucket_view_fp16_compression():
    copied, _, _ = train(False, compression=hvd.Compression.fp16)
    viewed, _, _ = train(True, compression=hvd.Compression.fp16)
    assert_bit_equal(copied, viewed)


def test_bucket_view_on_a_process_set():
    ranks = list(range(max(1, hvd.size() - 1)))
    ps = hvd.add_process_set(ranks)
    try:
        if hvd.rank() in ranks:
            copied, _, _ = train(False, process_set=ps)
            viewed, opt, model = train(True, process_set=ps)
            assert_bit_equal(copied, viewed)
            assert_views(opt, model)
    finally:
        hvd.remove_process_set(ps)


def test_bucket_view_sparse_gradient_falls_back_with_a_warning():
    copied, _, _ = train(False, sparse=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        viewed, opt, model = train(True, sparse=True)
    assert_bit_equal(copied, viewed)
    said = [str(w.message) for w in caught if "gradient_as_bucket_view" in str(w.message)]
    assert len(said) == 1 and "emb.weight is sparse" in said[0], said
    assert not opt._buckets.holds(model.emb.weight)
    assert model.emb.weight.grad.is_sparse


def test_bucket_view_is_one_registered_op_per_bucket():
    """Each bucket is one in-place allreduce, of the bucket tensor itself, registered from the
    second step on (its C handle names a slot)."""
    from chorus import handles
    _, opt, model = train(True, steps=1)
    seen = []
    original = hvd.mpi_ops.allreduce_async_

    def spy(tensor, *args, **kwargs):
        h = original(tensor, *args, **kwargs)
        seen.append((tensor.data_ptr(), handles._pending[h][0]))
        return h

    hvd.mpi_ops.allreduce_async_ = spy
    try:
        x = batch(1)
        opt.zero_grad()
        model(x, 1).backward()
        opt.step()
    finally:
        hvd.mpi_ops.allreduce_async_ = original
    flats = {b.flat.data_ptr() for b in opt._buckets.buckets}
    assert len(seen) == len(flats)
    assert {ptr for ptr, _ in seen} == flats
    assert all(c_handle & (1 << 62) for _, c_handle in seen)


def test_bucket_views_survive_an_elastic_reset():
    """An elastic run that fails mid-training (chorus re-formed, training rolled back to its
    last commit): the bucket views stay views, and the parameters end bit-equal to the copying
    path's run through the same failure."""
    ends = {}
    for view in (False, True):
        model = Model()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0 / 16),
                                       named_parameters=model.named_parameters(),
                                       gradient_as_bucket_view=view, bucket_cap_mb=0.004)
        state = hvd.elastic.TorchState(model, opt, step=0)
        failed = []

        @hvd.elastic.run
        def training(state):
            while state.step < 6:
                state.optimizer.zero_grad()
                state.model(batch(state.step), state.step).backward()
                state.optimizer.step()
                state.step += 1
                if state.step % 2 == 0:
                    state.commit()
                if state.step == 3 and not failed:
                    failed.append(state.step)
                    raise hvd.HorovodInternalError("injected failure at step 3")

        training(state)
        assert failed == [3]
        ends[view] = [[p.detach().clone() for p in model.parameters()]]
        if view:
            assert_views(opt, model)
    assert_bit_equal(ends[False], ends[True])
