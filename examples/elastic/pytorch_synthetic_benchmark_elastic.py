"""Horovod's elastic synthetic benchmark pattern on chorus: images per second of a small
convolutional network on random data, under hvd.elastic.run, so that workers may come and go
while it measures.

    chorusrun -np 2 --host-discovery-script ./discover.sh \\
        python3 examples/elastic/pytorch_synthetic_benchmark_elastic.py

(discover.sh prints one "host:slots" line per available host; see README.md, "Elastic
training"). It also runs without the elastic flags (mpirun, chorusrun --gloo): then no host
update ever comes.

The TorchState holds the model, the optimizer, the iteration and the batch; the state is
committed every --batches-per-commit batches and host updates are checked every
--batches-per-host-check batches (each check is one small allreduce). After a reset the
iteration in progress starts over from the last commit and the rates are measured on the new
world. Rank 0 prints one line per iteration ("Iter #3: 1234.5 img/sec per rank, size 2") and a
summary; every rank prints the SHA-256 of its final parameters (identical on every rank).
"""

import argparse
import hashlib
import statistics
import timeit

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import chorus.torch as hvd


def make_parser():
    parser = argparse.ArgumentParser(description="Elastic PyTorch synthetic benchmark",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="compress gradients to float16 for the allreduce")
    parser.add_argument("--batch-size", type=int, default=32, help="input batch size per rank")
    parser.add_argument("--image-size", type=int, default=32, help="images are 3 x N x N")
    parser.add_argument("--num-warmup-batches", type=int, default=2,
                        help="batches before the first timed iteration")
    parser.add_argument("--num-batches-per-iter", type=int, default=5,
                        help="batches per benchmark iteration")
    parser.add_argument("--num-iters", type=int, default=10, help="benchmark iterations")
    parser.add_argument("--batches-per-commit", type=int, default=1,
                        help="commit the state every this many batches")
    parser.add_argument("--batches-per-host-check", type=int, default=1,
                        help="check for host updates every this many batches")
    parser.add_argument("--seed", type=int, default=42, help="random seed (model and data)")
    parser.add_argument("--no-cuda", action="store_true", help="run on the CPU")
    return parser


class ConvNet(nn.Module):
    """A small convolutional classifier for 3 x N x N images, 1000 classes."""

    def __init__(self, image_size):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * (image_size // 4) ** 2, 1000)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def parameter_digest(model):
    h = hashlib.sha256()
    for p in model.state_dict().values():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    args = make_parser().parse_args()
    hvd.init()
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(hvd.local_rank())
    device = torch.device("cuda" if use_cuda else "cpu")
    torch.manual_seed(args.seed)

    model = ConvNet(args.image_size).to(device)
    # The learning rate scales with the number of ranks (rescaled after every reset).
    optimizer = optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)

    # Fixed synthetic data: the same images every step (only the rate is measured).
    g = torch.Generator().manual_seed(args.seed)
    data = torch.rand(args.batch_size, 3, args.image_size, args.image_size, generator=g)
    target = torch.randint(0, 1000, (args.batch_size,), generator=g)
    data, target = data.to(device), target.to(device)

    def benchmark_step(state):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        state.batch += 1
        if state.batch % args.batches_per_commit == 0:
            state.commit()
        elif state.batch % args.batches_per_host_check == 0:
            state.check_host_updates()

    def log(text):
        if hvd.rank() == 0:
            print(text, flush=True)

    @hvd.elastic.run
    def run_benchmark(state):
        if not state.warm:
            log("Running warmup...")
            timeit.timeit(lambda: benchmark_step(state), number=args.num_warmup_batches)
            state.warm = True
            state.commit()
        log("Running benchmark...")
        for state.iter in range(state.iter, args.num_iters):
            seconds = timeit.timeit(lambda: benchmark_step(state),
                                    number=args.num_batches_per_iter)
            rate = args.batch_size * args.num_batches_per_iter / seconds
            log("Iter #%d: %.1f img/sec per rank, size %d" % (state.iter, rate, hvd.size()))
            state.rates.append((rate, hvd.size()))
        # The loop variable stops at num_iters - 1: record that the run is complete.
        state.iter = args.num_iters

    def on_reset():
        for group in optimizer.param_groups:
            group["lr"] = 0.01 * hvd.size()
        log("Reset: size now %d" % hvd.size())

    state = hvd.elastic.TorchState(model, optimizer, batch=0, iter=0, warm=False, rates=[])
    state.register_reset_callbacks([on_reset])
    run_benchmark(state)

    rates = [rate for rate, _ in state.rates]
    mean = statistics.mean(rates)
    spread = 1.96 * statistics.stdev(rates) if len(rates) > 1 else 0.0
    log("Img/sec per rank: %.1f +-%.1f over %d iterations" % (mean, spread, len(rates)))
    log("Total img/sec on %d rank(s): %.1f +-%.1f"
        % (hvd.size(), hvd.size() * mean, hvd.size() * spread))
    print("rank %d: parameters sha256 %s" % (hvd.rank(), parameter_digest(model)), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
