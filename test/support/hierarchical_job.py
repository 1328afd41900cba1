#!/usr/bin/python3
"""Hierarchical allreduce and allgather against the flat ones, across real processes.

As a worker (started by chorusrun or mpirun):

    hierarchical_job.py run OUT_DIR

every rank allreduces, for every dtype and reduce op chorus.torch supports, tensors of sizes that
do not divide by the local size, submitted together (fused batches, some reduced in place in
several pipeline pieces), plus one 1-element tensor alone (a piece below the local size, which
runs flat), and allgathers tensors whose first dimension differs per rank (zero on some ranks),
alone and grouped; then saves everything it got in OUT_DIR/rank<r>.pt and prints one line
"HIERARCHICAL_JOB rank R of N: local L/LS cross C/CS".

As a library (the drivers: test/python/hierarchical_e2e.py, test/cluster/multihost_e2e.py):
compare(flat_dir, hierarchical_dir, size) returns the differences between a run with the flat
algorithms and one with the hierarchical ones: none allowed for integers, min and max (bit for
bit), allgathers (byte for byte); floating-point sums, averages and products may differ by the
summation-order bound of test/support/summation_bound.h (docs/hierarchical.md): the two
algorithms add the same numbers in a different order (each host first, then across hosts).
Every rank of a run must also hold the same bits as every other.
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


def compare(flat_dir, hierarchical_dir, size):
    """The differences (a list of strings; empty: none) between the two runs."""
    flat, hier = load(flat_dir, size), load(hierarchical_dir, size)
    problems = []
    for run_name, ranks in (('flat', flat), ('hierarchical', hier)):
        for r in range(1, size):
            for key, t in ranks[0].items():
                if not torch.equal(ranks[r][key], t):
                    problems.append(f'{run_name}: rank {r} differs from rank 0 in {key}')
    compared = 0
    for key, f in flat[0].items():
        h = hier[0][key]
        compared += 1
        parts = key.split('/')
        exact = (parts[0] != 'allreduce' or len(parts) < 4 or not f.dtype.is_floating_point or
                 parts[2] in ('Min', 'Max'))
        if exact:
            if not torch.equal(h, f):
                diff = (h != f).nonzero()
                problems.append(f'{key}: hierarchical != flat at {diff[:3].flatten().tolist()}')
            continue
        dtype = f.dtype
        op, index = parts[2], int(parts[3])
        inputs = torch.stack([value(r, dtype, op, index, f.numel()).double() for r in range(size)])
        magnitude = inputs.abs().prod(0) if op == 'Product' else inputs.abs().sum(0)
        delta = (h.double() - f.double()).abs()
        limit = bound(dtype, op, size, magnitude, f.double())
        outside = (delta > limit).nonzero()
        if outside.numel():
            i = outside[0].item()
            problems.append(f'{key}: element {i}: hierarchical {h[i].item()!r} vs flat '
                            f'{f[i].item()!r}, beyond the bound {limit[i].item():.3g}')
    # The integer sums against the exact result, so that both runs are right, not just equal.
    for key, f in flat[0].items():
        parts = key.split('/')
        if parts[0] != 'allreduce' or len(parts) < 4 or f.dtype.is_floating_point:
            continue
        if parts[2] != 'Sum':
            continue
        want = sum(value(r, f.dtype, 'Sum', int(parts[3]), f.numel()).long()
                   for r in range(size)).to(f.dtype)
        if not torch.equal(f, want):
            problems.append(f'{key}: the flat sum is wrong')
    if compared < len(DTYPES) * len(OPS) * len(SIZES):
        problems.append(f'only {compared} results compared')
    return problems


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == 'run':
        run(sys.argv[2])
    else:
        sys.exit('usage: hierarchical_job.py run OUT_DIR')
