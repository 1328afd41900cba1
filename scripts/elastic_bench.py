"""Cost of an elastic commit: hvd.elastic.TorchState.commit() of a CPU model, against copying the
same bytes, in one run.

    mpirun -np 2 /usr/bin/python3 scripts/elastic_bench.py [--state-mb 100] [--commits 20]

commit() is save() (a host copy of the model's state_dict and of the other attributes) plus
check_host_updates() (one small allreduce over every rank). The baselines are the same bytes
copied into buffers allocated once (`copy_`: the floor of an in-memory commit) and cloned into
new ones (`clone`: what a fresh copy per commit costs). Each figure is the median over the ranks'
slowest, commits separated by a barrier; the ratios "commit / ..." are per run.
"""

import argparse
import statistics
import time

import torch

import chorus.torch as hvd


def timed(fn, count):
    times = []
    for _ in range(count):
        hvd.barrier()
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        slowest = hvd.allreduce(torch.tensor([elapsed], dtype=torch.float64), op=hvd.Max,
                                name="elastic_bench.time")
        times.append(slowest.item())
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-mb", type=float, default=100.0,
                        help="model size in MiB of float32 parameters (default: 100)")
    parser.add_argument("--commits", type=int, default=20, help="timed commits (default: 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed commits first (default: 3)")
    args = parser.parse_args()
    if args.state_mb <= 0 or args.commits < 1 or args.warmup < 0:
        parser.error("--state-mb must be > 0, --commits >= 1, --warmup >= 0")

    hvd.init()
    # Square layers of 1024 x 1024 float32 (4 MiB each) up to the requested size.
    layers = max(1, round(args.state_mb / 4))
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024, bias=False) for _ in range(layers)])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, epoch=0, batch=0)
    params = [p.detach() for p in model.parameters()]
    nbytes = sum(p.numel() * p.element_size() for p in params)
    buffers = [torch.empty_like(p) for p in params]

    def copy_into_buffers():
        for b, p in zip(buffers, params):
            b.copy_(p)

    def clone_all():
        return [p.clone() for p in params]

    for _ in range(args.warmup):
        state.commit()
        copy_into_buffers()
        clone_all()
    commit_s = timed(state.commit, args.commits)
    copy_s = timed(copy_into_buffers, args.commits)
    clone_s = timed(clone_all, args.commits)
    if hvd.rank() == 0:
        print(f"elastic_bench: {hvd.size()} ranks, state {nbytes / 2**20:.1f} MiB "
              f"({layers} float32 tensors), {args.commits} commits, medians of the slowest rank")
        print(f"  TorchState.commit():            {commit_s * 1e3:8.2f} ms")
        print(f"  copy_ into preallocated buffers:{copy_s * 1e3:8.2f} ms")
        print(f"  clone into new tensors:         {clone_s * 1e3:8.2f} ms")
        print(f"  commit / copy_ = {commit_s / copy_s:.2f}, commit / clone = {commit_s / clone_s:.2f}")
    hvd.shutdown()


if __name__ == "__main__":
    main()
