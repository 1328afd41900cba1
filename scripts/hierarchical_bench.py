#!/usr/bin/python3
"""Hierarchical against flat collectives on the namespace test cluster (test/cluster/): link
bytes and step times, both launch modes, hosts of 2 ranks (2 x 2 and 3 x 2).

    sudo PYTHONPATH=$PWD/build/python scripts/hierarchical_bench.py \\
        --chorusrun build/launcher/chorusrun [--shapes 2x2,3x2] [--modes gloo,mpi] \\
        [--what bytes,resnet50,tiny,one,scalar] [--bytes 64M] [--rate 1gbit] [--delay-ms 2] \\
        [--steps 8] [--warmup 2] [--rounds 2] [--json FILE]

1. bytes: one job per (shape, mode, algorithm) allreduces one float32 tensor of --bytes S three
   times; the cluster's interface counters (test/cluster/cluster.py counters: the bridge port of
   each host) are read just before and after those three (the workers signal through files), so
   init and negotiation stay out. Printed per host link and per allreduce: bytes sent and
   received, next to the prediction of docs/hierarchical.md ("Link bytes"), and their ratio.
2. resnet50: the 161 gradient tensors of torchvision's ResNet-50 (25.6 M float32, 102 MB) per
   step, allreduce_async_ in reverse order then synchronize (as DistributedOptimizer does), with
   every host's link limited to --rate (tbf: this kernel has no netem). The median step time of
   each job (the slowest rank's), flat and hierarchical jobs alternating --rounds times; the
   ratio is taken within a round.
3. tiny: 1000 tensors of 1 KiB per step, with --delay-ms of one-way delay on every host's link
   (test/cluster/delay_line.c: tc netem is missing, so a user-space delay line forwards the
   traffic between the hosts after the delay) and no rate limit. Under the same delay, to take
   the step apart (--what ...,one,scalar): one: the same 1000 KiB as one tensor (one allreduce,
   nothing to fuse); scalar: one float32 per step, which runs flat in both jobs (fewer elements
   than ranks per host), so its step is the part both algorithms pay alike: negotiation and
   one latency-bound allreduce.

Needs root and the cluster's requirements (test/cluster/README.md); prints SKIP and exits 77
otherwise. Timing is for comparison on this machine only: 2 cores run every rank.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from cluster_jobs import (HIERARCHICAL_FLAGS, PYTHON, SHAPES, chorusrun_argv, hosts_of_ranks,
                          job_env, shaped)

REPEAT = 3  # allreduces of S measured per bytes job


# --- the worker (run by chorusrun on the cluster) ------------------------------------------

def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.005)


def worker(args):
    import torch
    import chorus.torch as hvd
    hvd.init()
    rank = hvd.rank()

    def barrier(tag):
        hvd.allreduce(torch.zeros(1), name=f'barrier.{tag}', op=hvd.Sum)

    if args.worker == 'bytes':
        t = torch.ones(args.bytes // 4)
        hvd.allreduce_(t, name='big', op=hvd.Sum)  # warm: negotiated once, cached afterwards
        barrier('warm')
        if rank == 0:
            open(os.path.join(args.signal_dir, 'ready'), 'w').close()
            wait_for(os.path.join(args.signal_dir, 'go'))
        barrier('go')  # everyone waits here for rank 0, i.e. for the counters
        for _ in range(REPEAT):
            hvd.allreduce_(t, name='big', op=hvd.Sum)
        barrier('done')
        if rank == 0:
            open(os.path.join(args.signal_dir, 'done'), 'w').close()
        hvd.shutdown()
        return

    if args.worker == 'resnet50':
        from torchvision import models
        grads = [torch.ones(p.shape) for p in models.resnet50().parameters()][::-1]
    elif args.worker == 'tiny':
        grads = [torch.ones(256) for _ in range(1000)]
    elif args.worker == 'one':  # the same bytes as one tensor (no fusion, one op to negotiate)
        grads = [torch.ones(256 * 1000)]
    else:  # scalar: one float32, flat in both jobs (fewer elements than ranks per host)
        grads = [torch.ones(1)]
    names = [f'grad.{i}' for i in range(len(grads))]
    times = []
    for step in range(args.warmup + args.steps):
        barrier('step')
        start = time.perf_counter()
        handles = [hvd.allreduce_async_(g, name=n, op=hvd.Average) for g, n in zip(grads, names)]
        for h in handles:
            hvd.synchronize(h)
        elapsed = torch.tensor([time.perf_counter() - start])
        slowest = hvd.allreduce(elapsed, name='elapsed', op=hvd.Max).item()
        if step >= args.warmup:
            times.append(slowest)
    if rank == 0:
        print('BENCH_STEPS ' + json.dumps(times), flush=True)
    hvd.shutdown()


# --- the driver ----------------------------------------------------------------------------

def parse_bytes(text):
    units = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}
    if text[-1].upper() in units:
        return int(float(text[:-1]) * units[text[-1].upper()])
    return int(text)


def ring_link_bytes(hosts, s):
    """A ring in rank order (chorus's flat UCX allreduce above 64 KiB: reduce-scatter then
    allgather, each rank sending (p - 1) / p of the data to the next): per host, the bytes its
    link carries out (to the next rank on another host) per direction."""
    p = len(hosts)
    out = {h: 0.0 for h in hosts}
    for r in range(p):
        if hosts[r] != hosts[(r + 1) % p]:
            out[hosts[r]] += 2 * (p - 1) / p * s
    return out


def rabenseifner_link_bytes(hosts, s):
    """Open MPI 4.1's reduce-scatter + allgather allreduce (coll_tuned_allreduce_algorithm 6,
    what its fixed decision picks for 4 and 6 ranks and 4 MiB: forcing it gives the same
    counters). Ranks beyond the largest power of two p2 first pair up (rank 2i + 1 hands its
    half to 2i and back: s / 2 each way; at the end it gets the whole result, s); the p2
    remaining ranks (virtual rank v: i for a pair, else rank - extra) halve the data at
    distance 1, 2, 4, ... and double it back in reverse order: s / 2, s / 4, ... each way."""
    p = len(hosts)
    p2 = 1 << (p.bit_length() - 1)
    extra = p - p2
    out = {h: 0.0 for h in hosts}

    def send(a, b, n):
        if hosts[a] != hosts[b]:
            out[hosts[a]] += n

    for i in range(extra):
        send(2 * i, 2 * i + 1, s / 2)
        send(2 * i + 1, 2 * i, s / 2 + s)  # its half, then the whole result back
    real = [2 * i for i in range(extra)] + list(range(2 * extra, p))  # by virtual rank
    size, distance = s, 1
    while distance < p2:
        size /= 2
        for v in range(p2):
            send(real[v], real[v ^ distance], 2 * size)  # halving, then doubling back
        distance *= 2
    return out


def predicted_bytes(shape, mode, algorithm, s):
    """Per host: the bytes its link carries per direction for one allreduce of s bytes in
    pieces that each split across the ranks (docs/hierarchical.md, "Link bytes"). Flat: the UCX
    ring in rank order, or Open MPI's Rabenseifner. Hierarchical: only the cross step leaves a
    host: each of its L members reduce-scatters and allgathers s / L among the H hosts, so its
    link carries L x 2 (H - 1) / H x s / L = 2 (H - 1) / H x s."""
    hosts = hosts_of_ranks(shape)
    h = len(SHAPES[shape])
    if algorithm == 'hierarchical':
        return {host: 2 * (h - 1) / h * s for host in hosts}
    if mode == 'gloo':
        return ring_link_bytes(hosts, s)
    return rabenseifner_link_bytes(hosts, s)


class Bench:
    def __init__(self, cluster, args):
        self.c = cluster
        self.args = args
        self.env = job_env(cluster, args.env)

    def argv(self, shape, mode, algorithm, worker_args):
        return chorusrun_argv(self.c, self.args.chorusrun, shape, mode,
                              [PYTHON, os.path.abspath(__file__), '--worker'] + worker_args,
                              HIERARCHICAL_FLAGS if algorithm == 'hierarchical' else [])

    def counters(self, shape):
        return {h: self.c.counters(h) for h, _ in SHAPES[shape]}

    def bytes_job(self, shape, mode, algorithm):
        with tempfile.TemporaryDirectory(prefix='hbench_') as signal_dir:
            p = subprocess.Popen(
                self.argv(shape, mode, algorithm, ['bytes', '--bytes', str(self.args.bytes),
                                                   '--signal-dir', signal_dir]),
                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                self.wait_file(p, os.path.join(signal_dir, 'ready'))
                before = self.counters(shape)
                open(os.path.join(signal_dir, 'go'), 'w').close()
                self.wait_file(p, os.path.join(signal_dir, 'done'))
                after = self.counters(shape)
            finally:
                out, _ = p.communicate(timeout=300)
            if p.returncode != 0:
                raise RuntimeError(f'{shape} {mode} {algorithm}: status {p.returncode}\n{out}')
        return {h: {k: (after[h][k] - before[h][k]) / REPEAT for k in ('sent', 'received')}
                for h in after}

    @staticmethod
    def wait_file(p, path, timeout=300):
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if p.poll() is not None:
                raise RuntimeError(f'the job ended before {os.path.basename(path)}:\n'
                                   f'{p.stdout.read()}')
            if time.monotonic() > deadline:
                p.kill()
                raise RuntimeError(f'no {os.path.basename(path)} after {timeout} s')
            time.sleep(0.01)

    def steps_job(self, shape, mode, algorithm, what):
        p = subprocess.run(
            self.argv(shape, mode, algorithm, [what, '--steps', str(self.args.steps),
                                               '--warmup', str(self.args.warmup)]),
            env=self.env, capture_output=True, text=True, timeout=1800)
        lines = [l for l in p.stdout.splitlines() if 'BENCH_STEPS ' in l]
        if p.returncode != 0 or not lines:
            raise RuntimeError(f'{shape} {mode} {algorithm}: status {p.returncode}\n'
                               f'{p.stdout[-3000:]}{p.stderr[-3000:]}')
        return json.loads(lines[0].split('BENCH_STEPS ', 1)[1])


def run_bytes(bench, args, results):
    print(f'\n== link bytes per allreduce of S = {args.bytes} bytes (float32), per host link; '
          'predicted: docs/hierarchical.md', flush=True)
    print(f'{"shape":5} {"mode":4} {"algorithm":12} {"host":4} {"sent":>12} {"received":>12} '
          f'{"predicted":>12} {"sent/pred":>9} {"recv/pred":>9}')
    for shape in args.shapes:
        for mode in args.modes:
            for algorithm in ('flat', 'hierarchical'):
                measured = bench.bytes_job(shape, mode, algorithm)
                want = predicted_bytes(shape, mode, algorithm, args.bytes)
                for host, m in measured.items():
                    print(f'{shape:5} {mode:4} {algorithm:12} {host:4} {m["sent"]:12.0f} '
                          f'{m["received"]:12.0f} {want[host]:12.0f} '
                          f'{m["sent"] / want[host]:9.3f} {m["received"] / want[host]:9.3f}',
                          flush=True)
                results.append({'what': 'bytes', 'shape': shape, 'mode': mode,
                                'algorithm': algorithm, 'bytes': args.bytes,
                                'predicted': want, 'per_host': measured})


def run_steps(bench, args, results, what):
    for shape in args.shapes:
        for mode in args.modes:
            rounds = []
            for r in range(args.rounds):
                medians = {}
                for algorithm in ('flat', 'hierarchical'):
                    times = bench.steps_job(shape, mode, algorithm, what)
                    medians[algorithm] = statistics.median(times)
                    results.append({'what': what, 'shape': shape, 'mode': mode,
                                    'algorithm': algorithm, 'round': r, 'step_times': times})
                rounds.append(medians)
                print(f'{what:8} {shape:5} {mode:4} round {r}: flat {medians["flat"] * 1e3:9.1f} '
                      f'ms  hierarchical {medians["hierarchical"] * 1e3:9.1f} ms  ratio '
                      f'{medians["hierarchical"] / medians["flat"]:.3f}', flush=True)
            ratios = [m['hierarchical'] / m['flat'] for m in rounds]
            print(f'{what:8} {shape:5} {mode:4} median ratio hierarchical / flat: '
                  f'{statistics.median(ratios):.3f}', flush=True)


def driver(args):
    import cluster as cl
    reason = cl.unavailable_reason()
    if reason:
        print(f'SKIP: {reason}')
        return cl.SKIP_STATUS
    results = []
    with cl.Cluster(3) as c:
        bench = Bench(c, args)
        if 'bytes' in args.what:
            run_bytes(bench, args, results)
        if 'resnet50' in args.what:
            print(f'\n== ResNet-50 gradients per step, every host link at {args.rate} (tbf)',
                  flush=True)
            with shaped(c, args.rate):
                run_steps(bench, args, results, 'resnet50')
        for what, title in (('tiny', '1000 x 1 KiB'), ('one', 'one tensor of 1000 KiB'),
                            ('scalar', 'one float32')):
            if what not in args.what:
                continue
            print(f'\n== {title} per step, {args.delay_ms} ms one-way delay between hosts '
                  '(user-space delay line: test/cluster/delay_line.py)', flush=True)
            import delay_line  # test/cluster/delay_line.py (on the path: cluster_jobs)
            with delay_line.DelayLine(c, args.delay_ms):
                run_steps(bench, args, results, what)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'args': {k: v for k, v in vars(args).items() if k != 'func'},
                       'results': results}, f, indent=1)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--worker', choices=['bytes', 'resnet50', 'tiny', 'one', 'scalar'])
    parser.add_argument('--signal-dir')
    parser.add_argument('--chorusrun')
    parser.add_argument('--shapes', default='2x2,3x2')
    parser.add_argument('--modes', default='gloo,mpi')
    parser.add_argument('--what', default='bytes,resnet50,tiny')
    parser.add_argument('--bytes', default='64M')
    parser.add_argument('--rate', default='1gbit')
    parser.add_argument('--delay-ms', type=float, default=2.0)
    parser.add_argument('--steps', type=int, default=8)
    parser.add_argument('--warmup', type=int, default=2)
    parser.add_argument('--rounds', type=int, default=2)
    parser.add_argument('--env', action='append', default=[], metavar='NAME=VALUE',
                        help='a variable for the jobs (e.g. CHORUS_TIMELINE=/tmp/t.json)')
    parser.add_argument('--json')
    args = parser.parse_args()
    args.bytes = parse_bytes(str(args.bytes))
    if args.worker:
        return worker(args)
    if not args.chorusrun:
        parser.error('--chorusrun is needed')
    args.chorusrun = os.path.abspath(args.chorusrun)
    args.shapes = args.shapes.split(',')
    args.modes = args.modes.split(',')
    args.what = args.what.split(',')
    return driver(args)


if __name__ == '__main__':
    sys.exit(main())
