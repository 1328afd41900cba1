#!/usr/bin/python3
"""Hierarchical allreduce and allgather across real processes, against the exact results.

As a worker (started by chorusrun or mpirun):

    hierarchical_job.py run OUT_DIR

every rank allreduces, for every dtype and reduce op chorus.torch supports, tensors of sizes that
do not divide by the local size, submitted together (fused batches, some reduced in place in
several pipeline pieces), plus one 1-element tensor alone (a piece below the local size, which
runs flat), and allgathers tensors whose first dimension differs per rank (zero on some ranks),
alone and grouped; then saves everything it got in OUT_DIR/rank<r>.pt and prints one line
"HIERARCHICAL_JOB rank R of N: local L/LS cross C/CS".

As a library (the drivers: test/python/hierarchical_e2e.py, test/cluster/multihost_e2e.py):
check(out_dir, size) returns the problems of a run's results: every rank must hold the same bits
as every other, and those must be the exact results, computed here from the inputs: integers,
min, max and allgathers bit for bit (an integer average as chorus computes it: the sum times
1/size, truncated); floating-point sums, averages and products within the summation-order bound
of test/support/summation_bound.h (docs/hierarchical.md) around the exact value (the bound two
orders of the additions stay within of each other: twice what one order, the flat algorithm's or
each host first and then across hosts, may be off by).
"""
import os
import sys
import zlib

import torch

SIZES = [1, 3, 7, 1000, 1001, 4099, 70001]  # none a multiple of 2 or 3 beyond the first
LARGE = 300001  # float32 and int32 only: many pipeline pieces
DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
OPS = ['Sum', 'Average', 'Min', 'Max', 'Product']
# Unit roundoff as chorus reduces each float dtype (16-bit types in float32, rounded per step).
UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11 + 2.0 ** -24, torch.bfloat16: 2.0 ** -8 + 2.0 ** -24,
                 torch.float32: 2.0 ** -24, torch.float64: 2.0 ** -53}


def sizes_of(dtype):
    return SIZES + ([LARGE] if dtype in (torch.float32, torch.int32) else [])


def value(rank, dtype, op, index, count):
    """Rank `rank`'s input for tensor `index` of (dtype, op): no integer overflow on 6 ranks."""
    g = torch.Generator().manual_seed(zlib.crc32(f'{rank}/{dtype}/{op}/{index}'.encode()))
    if not dtype.is_floating_point:
        if op == 'Product':
            return torch.randint(1, 3, (count,), generator=g).to(dtype)
        low = 0 if dtype == torch.uint8 else -20
        return torch.randint(low, low + 41, (count,), generator=g).to(dtype)
    x = torch.rand(count, generator=g, dtype=torch.float64) * 2 - 1
    if op == 'Product':
        x = torch.sign(x + 1e-12) * (0.5 + x.abs())
    return x.to(dtype)


def gather_rows(rank, size):
    return (rank * 3) % (size + 1)  # zero on some ranks


def run(out_dir):
    import chorus.torch as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    results = {}
    handles = []
    for dtype in DTYPES:
        for op in OPS:
            for i, n in enumerate(sizes_of(dtype)):
                key = f'allreduce/{dtype}/{op}/{i}'
                handles.append((key, hvd.allreduce_async(value(rank, dtype, op, i, n), name=key,
                                                         op=getattr(hvd, op))))
    for key, h in handles:
        results[key] = hvd.synchronize(h)
    # One element alone: below the local size, so it runs flat even when hierarchy is on.
    results['allreduce/alone'] = hvd.allreduce(torch.tensor([rank + 1], dtype=torch.int64),
                                               name='alone', op=hvd.Sum)
    for dtype in (torch.uint8, torch.int64, torch.bfloat16, torch.float32):
        rows = gather_rows(rank, size)
        t = (torch.arange(rows * 5) + 1000 * rank).reshape(rows, 5).to(dtype)
        results[f'allgather/{dtype}'] = hvd.allgather(t, name=f'allgather/{dtype}')
    group = [torch.full((gather_rows(rank, size) + k, 3), rank * 10 + k, dtype=torch.int32)
             for k in range(3)]
    for k, t in enumerate(hvd.grouped_allgather(group, name='grouped')):
        results[f'allgather/grouped/{k}'] = t
    print(f'HIERARCHICAL_JOB rank {rank} of {size}: local {hvd.local_rank()}/{hvd.local_size()} '
          f'cross {hvd.cross_rank()}/{hvd.cross_size()}', flush=True)
    torch.save(results, os.path.join(out_dir, f'rank{rank}.pt'))
    hvd.shutdown()


def load(directory, size):
    return [torch.load(os.path.join(directory, f'rank{r}.pt')) for r in range(size)]


def bound(dtype, op, size, magnitude, result):
    """The summation-order bound (test/support/summation_bound.h)."""
    u = UNIT_ROUNDOFF[dtype]
    k = size - 1
    gamma = k * u / (1 - k * u)
    scaled = op == 'Average'
    return 2 * gamma * magnitude + (2 * u * result.abs() if scaled else 0)


def expected(key, size):
    """What every rank of a run of `size` ranks must hold for result `key`: the exact value
    (integers, min, max, allgathers; compared bit for bit), or, for a floating-point sum, average
    or product, (the reference computed in float64, the summation-order bound around it)."""
    parts = key.split('/')
    if key == 'allreduce/alone':
        return torch.tensor([size * (size + 1) // 2], dtype=torch.int64)
    if parts[0] == 'allgather' and parts[1] == 'grouped':
        k = int(parts[2])
        return torch.cat([torch.full((gather_rows(r, size) + k, 3), r * 10 + k, dtype=torch.int32)
                          for r in range(size)])
    if parts[0] == 'allgather':
        dtype = getattr(torch, parts[1].split('.')[1])
        return torch.cat([(torch.arange(gather_rows(r, size) * 5) + 1000 * r)
                          .reshape(gather_rows(r, size), 5).to(dtype) for r in range(size)])
    dtype, op, index = getattr(torch, parts[1].split('.')[1]), parts[2], int(parts[3])
    count = sizes_of(dtype)[index]
    inputs = [value(r, dtype, op, index, count) for r in range(size)]
    if op in ('Min', 'Max'):
        reduce = torch.minimum if op == 'Min' else torch.maximum
        out = inputs[0]
        for x in inputs[1:]:
            out = reduce(out, x)
        return out
    if not dtype.is_floating_point:
        wide = torch.stack([x.long() for x in inputs])
        if op == 'Product':
            return wide.prod(0).to(dtype)
        total = wide.sum(0)
        if op == 'Sum':
            return total.to(dtype)
        # Average of integers: the sum times 1/size in double, truncated (ops/cpu, ScaleInt).
        return torch.trunc(total.double() * (1.0 / size)).to(dtype)
    wide = torch.stack([x.double() for x in inputs])
    if op == 'Product':
        return wide.prod(0), bound(dtype, op, size, wide.abs().prod(0), wide.prod(0))
    reference = wide.sum(0) / (size if op == 'Average' else 1)
    return reference, bound(dtype, op, size, wide.abs().sum(0), reference)


def check(directory, size):
    """The problems (a list of strings; empty: none) of a run's results in `directory`: every rank
    must hold the same bits, and those must be the exact results (integers, min, max and
    allgathers bit for bit; floating-point sums, averages and products within the
    summation-order bound of the exact ones, test/support/summation_bound.h)."""
    ranks = load(directory, size)
    problems = []
    for r in range(1, size):
        for key, t in ranks[0].items():
            if not torch.equal(ranks[r][key], t):
                problems.append(f'rank {r} differs from rank 0 in {key}')
    want_keys = {f'allreduce/{dtype}/{op}/{i}' for dtype in DTYPES for op in OPS
                 for i in range(len(sizes_of(dtype)))}
    want_keys |= {'allreduce/alone'} | {f'allgather/grouped/{k}' for k in range(3)}
    want_keys |= {f'allgather/{dtype}' for dtype in (torch.uint8, torch.int64, torch.bfloat16,
                                                     torch.float32)}
    if set(ranks[0]) != want_keys:
        problems.append(f'results {sorted(set(ranks[0]) ^ want_keys)[:5]} missing or unexpected')
    for key in sorted(want_keys & set(ranks[0])):
        got, want = ranks[0][key], expected(key, size)
        if isinstance(want, tuple):
            reference, limit = want
            if got.dtype != getattr(torch, key.split('/')[1].split('.')[1]):
                problems.append(f'{key}: dtype {got.dtype}')
                continue
            outside = ((got.double() - reference).abs() > limit).nonzero()
            if outside.numel():
                i = outside[0].item()
                problems.append(f'{key}: element {i}: {got[i].item()!r} vs the exact '
                                f'{reference[i].item()!r}, beyond the bound {limit[i].item():.3g}')
        elif got.dtype != want.dtype or got.shape != want.shape:
            problems.append(f'{key}: {got.dtype} {tuple(got.shape)}, expected {want.dtype} '
                            f'{tuple(want.shape)}')
        elif not torch.equal(got, want):
            at = (got != want).nonzero()[:3].flatten().tolist()
            problems.append(f'{key}: not the exact result (at {at})')
    return problems


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == 'run':
        run(sys.argv[2])
    else:
        sys.exit('usage: hierarchical_job.py run OUT_DIR')
