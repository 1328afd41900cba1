"""Horovod's elastic PyTorch MNIST pattern on chorus, with a synthetic MNIST-like data set made
in the script (no downloads; the same on every rank).

    mpirun -np 2 python3 examples/elastic/pytorch_mnist_elastic.py
    chorusrun -np 2 --gloo python3 examples/elastic/pytorch_mnist_elastic.py

The training function runs under hvd.elastic.run with a TorchState holding the model, the
optimizer, the ElasticSampler and the epoch; it commits every --batches-per-commit batches. A
failed collective rolls every rank back to the last commit; a host update interrupts every rank
at the next commit; in both cases chorus is reset, the state is synced from rank 0, the
learning rate is rescaled to the new size, and training goes on where the state says.

--simulate-host-update-at-batch N: the last rank notifies itself of an added host after N
batches of the first epoch, as the elastic driver will (chorus.elastic.notification_manager),
so that the run goes through one interrupt and one reset of chorus.

At the end every rank prints the SHA-256 of its parameters (they must be identical) and rank 0
prints the final loss on a held-out set, averaged over the ranks.
"""

import argparse
import hashlib
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data

import chorus.elastic
import chorus.torch as hvd


def make_parser():
    parser = argparse.ArgumentParser(description="Elastic PyTorch MNIST-style example",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=32, help="batch size per rank")
    parser.add_argument("--epochs", type=int, default=2, help="number of epochs to train")
    parser.add_argument("--lr", type=float, default=0.01, help="learning rate per rank")
    parser.add_argument("--momentum", type=float, default=0.5, help="SGD momentum")
    parser.add_argument("--seed", type=int, default=42, help="random seed (model init)")
    parser.add_argument("--data-seed", type=int, default=1234, help="synthetic data seed")
    parser.add_argument("--train-size", type=int, default=1024, help="training samples")
    parser.add_argument("--test-size", type=int, default=256, help="held-out samples")
    parser.add_argument("--batches-per-commit", type=int, default=4,
                        help="commit the state every this many batches")
    parser.add_argument("--log-interval", type=int, default=8,
                        help="batches between progress lines (0: none)")
    parser.add_argument("--simulate-host-update-at-batch", type=int, default=0,
                        help="notify the last rank of an added host after this many batches "
                             "of the first epoch (0: never)")
    return parser


def synthetic_mnist(n, seed, offset):
    """n (image, label) pairs of 28x28 images: a random prototype per class plus noise."""
    g = torch.Generator().manual_seed(seed)
    prototypes = (torch.rand(10, 1, 28, 28, generator=g) > 0.5).float()
    g_samples = torch.Generator().manual_seed(seed + offset)
    labels = torch.randint(0, 10, (n,), generator=g_samples)
    images = prototypes[labels] + 0.7 * torch.randn(n, 1, 28, 28, generator=g_samples)
    return torch.utils.data.TensorDataset((images - 0.5) / 0.5, labels)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(x.view(-1, 320)))
        return F.log_softmax(self.fc2(x), dim=1)


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value, dtype=torch.float64), name=name).item()


def parameter_digest(model):
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main(argv=None):
    args = make_parser().parse_args(argv)
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    train_dataset = synthetic_mnist(args.train_size, args.data_seed, offset=1)
    test_dataset = synthetic_mnist(args.test_size, args.data_seed, offset=2)
    train_sampler = hvd.elastic.ElasticSampler(train_dataset, shuffle=True, seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size,
                                               sampler=train_sampler)

    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    def on_state_reset():
        # The number of workers may have changed: rescale the learning rate.
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()

    state = hvd.elastic.TorchState(model=model, optimizer=optimizer,
                                   train_sampler=train_sampler, epoch=0, resets=0)
    state.register_reset_callbacks([on_state_reset])
    simulated = []

    @hvd.elastic.run
    def train(state):
        while state.epoch < args.epochs:
            state.model.train()
            for batch_idx, (data, target) in enumerate(train_loader):
                state.optimizer.zero_grad()
                loss = F.nll_loss(state.model(data), target)
                loss.backward()
                state.optimizer.step()
                state.train_sampler.record_batch(batch_idx, args.batch_size)
                done = state.train_sampler.processed_num // (args.batch_size * hvd.size())
                if args.log_interval and batch_idx % args.log_interval == 0 and hvd.rank() == 0:
                    print("Train epoch {} batch {} ({} of the epoch's samples done): loss "
                          "{:.6f}".format(state.epoch, batch_idx,
                                          state.train_sampler.processed_num, loss.item()),
                          flush=True)
                if (state.epoch == 0 and done == args.simulate_host_update_at_batch
                        and hvd.rank() == hvd.size() - 1 and not simulated):
                    simulated.append(True)
                    chorus.elastic.notification_manager.notify_hosts_updated(
                        time.time(), chorus.elastic.HostUpdateResult.added)
                if (batch_idx + 1) % args.batches_per_commit == 0:
                    state.commit()
            state.epoch += 1
            state.train_sampler.set_epoch(state.epoch)
            state.commit()

    train(state)
    resets = int(hvd.allreduce(torch.tensor(len(simulated)), op=hvd.Sum, name="resets"))

    model.eval()
    test_loss = 0.0
    with torch.no_grad():
        for data, target in torch.utils.data.DataLoader(test_dataset, batch_size=256):
            test_loss += F.nll_loss(model(data), target, reduction="sum").item()
    final_loss = metric_average(test_loss / len(test_dataset), "final_loss")
    print("rank {}: parameters sha256 {}".format(hvd.rank(), parameter_digest(model)),
          flush=True)
    if hvd.rank() == 0:
        print("size {}, epochs {}, simulated host updates {}: final loss {:.6f}".format(
            hvd.size(), state.epoch, resets, final_loss), flush=True)
    return final_loss


if __name__ == "__main__":
    main()
