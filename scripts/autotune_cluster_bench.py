#!/usr/bin/python3
"""`chorus_bench autotune` on the namespace test cluster (test/cluster/): autotuned against
chorus's defaults and the best point of the exhaustive grid over the same knobs, in one MPI job
(chorusrun in MPI mode, i.e. mpirun across the hosts), 2 hosts x 2 ranks, every host link
limited to --rate (tbf), UCX_TLS=tcp,self so that the traffic between hosts crosses the links.
With 2 hosts of 2 ranks each, hierarchical allreduce is a knob of the search and of the grid.
chorus's collectives run on its UCX data plane (--controller ucx, CHORUS_CONTROLLER=ucx: MPI starts
the job and exchanges the UCX addresses); --controller mpi puts them on Open MPI, where this
benchmark does not finish on the namespace cluster (docs/autotune.md, "On the namespace
cluster").

    sudo PYTHONPATH=$PWD/build/python nice -n 5 scripts/autotune_cluster_bench.py \\
        --chorusrun build/launcher/chorusrun --chorus-bench build/bench/chorus_bench \\
        [--shape 2x2] [--rate 1gbit|none] [--controller ucx|mpi] [--timeout 1500] [--json FILE] \\
        -- [chorus_bench autotune options]

Everything after `--` goes to `chorus_bench autotune` (bench/autotune_bench.h), e.g.
`--tensor-set resnet50 --grid-warmup 0 --grid-steps 1 --rounds 3 --steps 4 --warmup 1`. Prints
chorus_bench's report as it comes, then one table row (Markdown) from its JSON.

Needs root and the cluster's requirements (test/cluster/README.md); prints SKIP and exits 77
otherwise. Timing is for comparison within the run: every rank shares this machine's cores.
"""
import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

from cluster_jobs import SHAPES, chorusrun_argv, cluster, job_env, shaped


def describe(point):
    if point is None:
        return "chorus's defaults"
    text = (f'fusion {point["fusion_threshold_bytes"] // 1024} KiB, chunk '
            f'{point["pipeline_chunk_bytes"] // 1024} KiB, in-place >= '
            f'{point["inplace_min_bytes"] // 1024} KiB, cycle {point["cycle_time_ms"]:g} ms')
    if 'hierarchical_allreduce' in point:
        text += ', hierarchical' if point['hierarchical_allreduce'] else ', flat'
    return text


def table(result, wall_s):
    """The Markdown header and row of one run, from chorus_bench's JSON."""
    by_key = {c['key']: c for c in result['comparison']}
    best = by_key[result['grid_best']]
    search = result['search']
    header = ('| defaults | autotuned | grid\'s best (of its top finalists, re-timed) | '
              'autotuned / defaults | autotuned / grid best | search | grid points | wall |\n'
              '| --- | --- | --- | --- | --- | --- | --- | --- |')
    row = (f'| {by_key["defaults"]["median_ms"]:.1f} ms '
           f'| {by_key["autotuned"]["median_ms"]:.1f} ms ({describe(search["choice"])}) '
           f'| {best["median_ms"]:.1f} ms ({describe(best["point"])}) '
           f'| {result["autotuned_over_defaults"]:.3f} | {result["autotuned_over_grid_best"]:.3f} '
           f'| {search["steps"]} steps, {search["seconds"]:.1f} s | {len(result["grid"])} '
           f'| {wall_s:.0f} s |')
    return header + '\n' + row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--chorusrun', required=True)
    parser.add_argument('--chorus-bench', required=True)
    parser.add_argument('--shape', default='2x2', choices=['2x2', '3x2'])
    parser.add_argument('--rate', default='1gbit',
                        help="tbf rate of every host link; 'none': links not limited")
    parser.add_argument('--controller', default='ucx', choices=['ucx', 'mpi'],
                        help="CHORUS_CONTROLLER of the ranks: chorus's data plane")
    parser.add_argument('--timeout', type=float, default=1500, help='seconds for the job')
    parser.add_argument('--json', help='also keep chorus_bench\'s JSON here')
    parser.add_argument('bench_args', nargs='*', help='chorus_bench autotune options (after --)')
    args = parser.parse_args()

    reason = cluster.unavailable_reason()
    if reason:
        print(f'SKIP: {reason}')
        return cluster.SKIP_STATUS
    with tempfile.TemporaryDirectory(prefix='autotune_cluster_') as tmp, \
            cluster.Cluster(len(SHAPES[args.shape])) as c, \
            (contextlib.nullcontext() if args.rate == 'none' else shaped(c, args.rate)):
        json_path = args.json and os.path.abspath(args.json) or os.path.join(tmp, 'result.json')
        command = [os.path.abspath(args.chorus_bench), 'autotune', '--json', json_path,
                   '--autotune-log', os.path.join(tmp, 'autotune.csv')] + args.bench_args
        argv = chorusrun_argv(c, os.path.abspath(args.chorusrun), args.shape, 'mpi', command)
        links = 'host links not limited' if args.rate == 'none' else \
            f'every host link at {args.rate} (tbf)'
        print(f'# {args.shape}, {links}, MPI mode, CHORUS_CONTROLLER={args.controller}, '
              f'UCX_TLS=tcp,self: {" ".join(command)}', flush=True)
        start = time.monotonic()
        job = subprocess.Popen(argv, env=job_env(c, [f'CHORUS_CONTROLLER={args.controller}']))
        try:
            status = job.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            job.terminate()  # chorusrun stops mpirun and the ranks
            job.wait()
            print(f'the job took more than {args.timeout:.0f} s (--timeout); stopped', flush=True)
            return 1
        wall = time.monotonic() - start
        if status != 0:
            print(f'chorus_bench autotune ended with status {status}', flush=True)
            return 1
        with open(json_path) as f:
            result = json.load(f)
    print(f'\n{table(result, wall)}', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
