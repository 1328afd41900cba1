"""Horovod's PyTorch synthetic benchmark (examples/pytorch/pytorch_synthetic_benchmark.py),
run on chorus: the only change to the Horovod script is the import of chorus.torch as hvd,
plus --image-size (224 in Horovod) so that it runs on CPUs, and a main(argv) entry point.

    mpirun -np 2 python3 examples/pytorch_synthetic_benchmark.py --image-size 32 \
        --batch-size 8 --num-iters 5

Every step trains the model (SyncBatchNorm layers, SGD wrapped in DistributedOptimizer) on
one fixed random batch; rank 0 prints the images/sec per process and in total.
"""

import argparse
import timeit

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed
from torchvision import models

import chorus.torch as hvd


def make_parser():
    parser = argparse.ArgumentParser(description="PyTorch Synthetic Benchmark",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                        help="use fp16 compression during allreduce")
    parser.add_argument("--model", type=str, default="resnet50", help="model to benchmark")
    parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
    parser.add_argument("--image-size", type=int, default=224,
                        help="height and width of the synthetic images (e.g. 32 on CPUs)")
    parser.add_argument("--num-warmup-batches", type=int, default=10,
                        help="number of warm-up batches that don't count towards benchmark")
    parser.add_argument("--num-batches-per-iter", type=int, default=10,
                        help="number of batches per benchmark iteration")
    parser.add_argument("--num-iters", type=int, default=10,
                        help="number of benchmark iterations")
    parser.add_argument("--no-cuda", action="store_true", default=False,
                        help="disables CUDA training")
    parser.add_argument("--use-adasum", action="store_true", default=False,
                        help="use adasum algorithm to do reduction")
    return parser


def main(argv=None):
    """Runs the benchmark; returns the list of per-iteration img/sec of this rank."""
    args = make_parser().parse_args(argv)
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    hvd.init()

    if args.cuda:
        # Horovod: pin GPU to local rank.
        torch.cuda.set_device(hvd.local_rank())

    cudnn.benchmark = True

    # Set up standard model.
    model = getattr(models, args.model)(norm_layer=hvd.SyncBatchNorm)

    # By default, Adasum doesn't need scaling up learning rate.
    lr_scaler = hvd.size() if not args.use_adasum else 1

    if args.cuda:
        # Move model to GPU.
        model.cuda()
        # If using GPU Adasum allreduce, scale learning rate by local_size.
        if args.use_adasum and hvd.nccl_built():
            lr_scaler = hvd.local_size()

    optimizer = optim.SGD(model.parameters(), lr=0.01 * lr_scaler)

    # Horovod: (optional) compression algorithm.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    # Horovod: wrap optimizer with DistributedOptimizer.
    optimizer = hvd.DistributedOptimizer(optimizer,
                                         named_parameters=model.named_parameters(),
                                         compression=compression,
                                         op=hvd.Adasum if args.use_adasum else hvd.Average)

    # Horovod: broadcast parameters & optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # Set up fixed fake data
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.LongTensor(args.batch_size).random_() % 1000
    if args.cuda:
        data, target = data.cuda(), target.cuda()

    def benchmark_step():
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()

    def log(s, nl=True):
        if hvd.rank() != 0:
            return
        print(s, end="\n" if nl else "", flush=True)

    log("Model: %s" % args.model)
    log("Batch size: %d" % args.batch_size)
    device = "GPU" if args.cuda else "CPU"
    log("Number of %ss: %d" % (device, hvd.size()))

    # Warm-up
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)

    # Benchmark
    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log("Iter #%d: %.1f img/sec per %s" % (x, img_sec, device))
        img_secs.append(img_sec)

    # Results
    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log("Img/sec per %s: %.1f +-%.1f" % (device, img_sec_mean, img_sec_conf))
    log("Total img/sec on %d %s(s): %.1f +-%.1f" %
        (hvd.size(), device, hvd.size() * img_sec_mean, hvd.size() * img_sec_conf))
    return img_secs


if __name__ == "__main__":
    main()
