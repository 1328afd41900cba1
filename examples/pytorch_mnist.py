"""Horovod's pytorch_mnist.py pattern on chorus, with a synthetic MNIST-like data set made in
the script (no downloads): 28x28 one-channel images, 10 classes, each class a fixed random
prototype plus noise (the same on every rank: generated from --data-seed).

    mpirun -np 2 python3 examples/pytorch_mnist.py --epochs 2

Data parallel as in Horovod: DistributedSampler shards the data, the learning rate is scaled
by hvd.size(), rank 0's initial parameters and optimizer state are broadcast, gradients are
averaged by DistributedOptimizer, metrics are averaged with allreduce, and rank 0 alone writes
a checkpoint per epoch into --checkpoint-dir (a new temporary directory by default). A run
resumes from the newest checkpoint found there by rank 0.
"""

import argparse
import os
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data
import torch.utils.data.distributed

import chorus.torch as hvd

CHECKPOINT_FORMAT = "checkpoint-{epoch}.pth.tar"


def make_parser():
    parser = argparse.ArgumentParser(description="PyTorch MNIST-style example (synthetic data)",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64,
                        help="input batch size for training (per rank)")
    parser.add_argument("--test-batch-size", type=int, default=256,
                        help="input batch size for testing (per rank)")
    parser.add_argument("--epochs", type=int, default=2, help="number of epochs to train")
    parser.add_argument("--lr", type=float, default=0.02, help="learning rate (per rank)")
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    parser.add_argument("--seed", type=int, default=42, help="random seed (model init)")
    parser.add_argument("--data-seed", type=int, default=1234,
                        help="seed of the synthetic data set (identical on every rank)")
    parser.add_argument("--train-size", type=int, default=2048, help="training samples")
    parser.add_argument("--test-size", type=int, default=512, help="test samples")
    parser.add_argument("--log-interval", type=int, default=10,
                        help="batches to wait before logging training status (0: never)")
    parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                        help="use fp16 compression during allreduce")
    parser.add_argument("--use-adasum", action="store_true", default=False,
                        help="use adasum algorithm to do reduction")
    parser.add_argument("--gradient-predivide-factor", type=float, default=1.0,
                        help="apply gradient predivide factor in optimizer")
    parser.add_argument("--checkpoint-dir", type=str, default=None,
                        help="where rank 0 writes checkpoints (default: a new temp dir)")
    return parser


def synthetic_mnist(n, seed, offset):
    """n (image, label) pairs: class prototypes shared by every call with the same seed."""
    g = torch.Generator().manual_seed(seed)
    prototypes = (torch.rand(10, 1, 28, 28, generator=g) > 0.5).float()
    g_samples = torch.Generator().manual_seed(seed + offset)
    labels = torch.randint(0, 10, (n,), generator=g_samples)
    images = prototypes[labels] + 0.7 * torch.randn(n, 1, 28, 28, generator=g_samples)
    images = (images - 0.5) / 0.5
    return torch.utils.data.TensorDataset(images, labels)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def metric_average(val, name):
    tensor = torch.tensor(val, dtype=torch.float64)
    avg_tensor = hvd.allreduce(tensor, name=name)
    return avg_tensor.item()


def log(s):
    if hvd.rank() == 0:
        print(s, flush=True)


def find_resume_epoch(checkpoint_dir, epochs):
    """Rank 0 looks for the newest checkpoint; every rank gets its epoch (0: none)."""
    resume_from_epoch = 0
    if hvd.rank() == 0:
        for try_epoch in range(epochs, 0, -1):
            path = os.path.join(checkpoint_dir, CHECKPOINT_FORMAT.format(epoch=try_epoch))
            if os.path.exists(path):
                resume_from_epoch = try_epoch
                break
    return int(hvd.broadcast(torch.tensor(resume_from_epoch), root_rank=0,
                             name="resume_from_epoch").item())


def main(argv=None):
    """Trains; returns a dict: train_loss and samples_per_sec (per epoch), test_loss,
    test_accuracy, checkpoint (rank 0's last path, None elsewhere), resumed_from, model."""
    args = make_parser().parse_args(argv)

    hvd.init()
    torch.manual_seed(args.seed)
    checkpoint_dir = args.checkpoint_dir or tempfile.mkdtemp(prefix="chorus_mnist_")
    if hvd.rank() == 0:
        os.makedirs(checkpoint_dir, exist_ok=True)

    train_dataset = synthetic_mnist(args.train_size, args.data_seed, offset=1)
    test_dataset = synthetic_mnist(args.test_size, args.data_seed, offset=2)
    # Horovod: use DistributedSampler to partition the training data.
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_dataset, num_replicas=hvd.size(), rank=hvd.rank())
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size,
                                               sampler=train_sampler)
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False)
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=args.test_batch_size,
                                              sampler=test_sampler)

    model = Net()
    # By default, Adasum doesn't need scaling up learning rate.
    lr_scaler = hvd.size() if not args.use_adasum else 1
    optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler, momentum=args.momentum)

    resume_from_epoch = find_resume_epoch(checkpoint_dir, args.epochs)
    if resume_from_epoch > 0 and hvd.rank() == 0:
        path = os.path.join(checkpoint_dir, CHECKPOINT_FORMAT.format(epoch=resume_from_epoch))
        checkpoint = torch.load(path)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])

    # Horovod: broadcast parameters & optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer,
                                         named_parameters=model.named_parameters(),
                                         compression=compression,
                                         op=hvd.Adasum if args.use_adasum else hvd.Average,
                                         gradient_predivide_factor=args.gradient_predivide_factor)

    result = {"train_loss": [], "samples_per_sec": [], "test_loss": None,
              "test_accuracy": None, "checkpoint": None, "resumed_from": resume_from_epoch,
              "model": model}
    for epoch in range(resume_from_epoch + 1, args.epochs + 1):
        model.train()
        train_sampler.set_epoch(epoch)
        loss_sum, samples = 0.0, 0
        start = time.perf_counter()
        for batch_idx, (data, target) in enumerate(train_loader):
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(data)
            samples += len(data)
            if args.log_interval and batch_idx % args.log_interval == 0:
                log("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                    epoch, batch_idx * len(data), len(train_sampler),
                    100.0 * batch_idx / len(train_loader), loss.item()))
        elapsed = time.perf_counter() - start
        # Horovod: average metrics across ranks (samples/sec: summed over ranks).
        train_loss = metric_average(loss_sum / max(samples, 1), "avg_train_loss")
        throughput = hvd.size() * metric_average(samples / elapsed, "avg_samples_per_sec")
        result["train_loss"].append(train_loss)
        result["samples_per_sec"].append(throughput)
        log("Epoch {}: train loss {:.4f}, {:.1f} samples/sec on {} rank(s)".format(
            epoch, train_loss, throughput, hvd.size()))
        if hvd.rank() == 0:
            path = os.path.join(checkpoint_dir, CHECKPOINT_FORMAT.format(epoch=epoch))
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
            result["checkpoint"] = path

    model.eval()
    test_loss, test_accuracy = 0.0, 0.0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1)
            test_accuracy += pred.eq(target).float().sum().item()
    # Horovod: use test_sampler to determine the number of examples in this worker's shard.
    test_loss = metric_average(test_loss / len(test_sampler), "avg_loss")
    test_accuracy = metric_average(test_accuracy / len(test_sampler), "avg_accuracy")
    result["test_loss"] = test_loss
    result["test_accuracy"] = test_accuracy
    log("Test set: Average loss: {:.4f}, Accuracy: {:.2f}%".format(test_loss,
                                                                   100.0 * test_accuracy))
    return result


if __name__ == "__main__":
    main()
