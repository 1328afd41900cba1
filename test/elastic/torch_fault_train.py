#!/usr/bin/python3
"""Elastic PyTorch training under a fault schedule, for torch_fault_e2e.py (the shape of
Horovod's test/integration elastic tests).

A small classifier on synthetic data, trained with hvd.DistributedOptimizer under
hvd.elastic.run with a TorchState (model, optimizer, ElasticSampler, epoch); it commits every
--batches-per-commit batches and at the end of each epoch.

--hosts-schedule JSON: {"EPOCH": [SIZE, "HOSTS FILE TEXT"]}: at the start of that epoch, while
the world is not SIZE ranks, rank 0 writes the text to --hosts-file (which the discovery script
reads) and every rank checks for host updates until chorusrun's change arrives (a collective
HostsUpdatedInterrupt, then the reset): hosts come and go at known points of the training.

--exit-schedule JSON: {"EPOCH,BATCH": [START_RANK, ...]}: the processes whose rank at start was
START_RANK end themselves when they reach that batch of that epoch (before its step), in the way
--exit-mode says: "exception" (an uncaught RuntimeError: exit status 1) or "kill" (SIGKILL).
Only processes of the first generation follow it (replacements never do).

Logs one JSON line per epoch and process on stdout, prefixed "EPOCH ": epoch, batches this
process ran in it (counted from its last commit on, so a rollback shows), samples the epoch
processed over all ranks (from the sampler), the sample indices trained on over all ranks
(seen_total, and seen_unique distinct ones), commits, hostname, start rank, rank, size, resets.
At the end each rank prints "DIGEST <rank> <sha256 of its parameters>".
"""

import argparse
import hashlib
import json
import os
import signal
import time

import torch
import torch.nn.functional as F
import torch.utils.data

import chorus.torch as hvd
from discovery_file import replace_file

parser = argparse.ArgumentParser()
parser.add_argument('--epochs', type=int, default=3)
parser.add_argument('--batch-size', type=int, default=16)
parser.add_argument('--train-size', type=int, default=512)
parser.add_argument('--batches-per-commit', type=int, default=4)
parser.add_argument('--exit-schedule', default='{}')
parser.add_argument('--exit-mode', choices=['exception', 'kill'], default='exception')
parser.add_argument('--hosts-schedule', default='{}')
parser.add_argument('--hosts-file')
parser.add_argument('--batch-sleep', type=float, default=0.0, help='seconds per batch')
args = parser.parse_args()

schedule = {tuple(int(x) for x in key.split(',')): ranks
            for key, ranks in json.loads(args.exit_schedule).items()}
hosts_schedule = {int(epoch): change for epoch, change in json.loads(args.hosts_schedule).items()}


def change_hosts(state):
    if state.epoch not in hosts_schedule or hvd.size() == hosts_schedule[state.epoch][0]:
        return
    if hvd.rank() == 0:
        replace_file(args.hosts_file, hosts_schedule[state.epoch][1])
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        state.check_host_updates()  # raises HostsUpdatedInterrupt on every rank together
        time.sleep(0.02)
    raise RuntimeError(f'no host update from chorusrun within 60 s at epoch {state.epoch}')

hvd.init()
# This process's rank and generation when it first joined (a worker that joins a running job
# learns them at init).
START_RANK = hvd.rank()
FIRST_GENERATION = os.environ.get('CHORUS_ELASTIC_GENERATION', '0') == '0'
torch.manual_seed(7)
torch.set_num_threads(1)
g = torch.Generator().manual_seed(11)
features = torch.randn(args.train_size, 32, generator=g)
labels = (features[:, :4].sum(dim=1) > 0).long() + 2 * (features[:, 4] > 0).long()
dataset = torch.utils.data.TensorDataset(features, labels, torch.arange(args.train_size))
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=5)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                     named_parameters=model.named_parameters())
# seen: the sample indices the epoch trained on, over all ranks (gathered every batch, so the
# same list on every rank); replaced, never mutated, so a commit keeps its own version.
state = hvd.elastic.TorchState(model=model, optimizer=optimizer, train_sampler=sampler, epoch=0,
                               commits=0, seen=[])
resets = 0  # this process's, not part of the state (a sync would overwrite it)


def on_reset():
    global resets
    resets += 1


state.register_reset_callbacks([on_reset])


def commit():
    state.commits += 1
    state.commit()


@hvd.elastic.run
def train(state):
    while state.epoch < args.epochs:
        change_hosts(state)
        ran = 0
        for batch_idx, (data, target, index) in enumerate(loader):
            if FIRST_GENERATION and START_RANK in schedule.get((state.epoch, batch_idx), []):
                if args.exit_mode == 'kill':
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError(f'scheduled failure at epoch {state.epoch} batch {batch_idx}')
            optimizer.zero_grad()
            F.cross_entropy(state.model(data), target).backward()
            optimizer.step()
            state.seen = state.seen + hvd.allgather(index, name='seen').tolist()
            state.train_sampler.record_batch(batch_idx, args.batch_size)
            ran += 1
            time.sleep(args.batch_sleep)
            if (batch_idx + 1) % args.batches_per_commit == 0:
                commit()
        print('EPOCH ' + json.dumps({
            'epoch': state.epoch, 'batches': ran, 'samples': state.train_sampler.processed_num,
            'commits': state.commits, 'hostname': os.environ.get('CHORUS_HOSTNAME', 'mpi'),
            'seen_total': len(state.seen), 'seen_unique': len(set(state.seen)),
            'start_rank': START_RANK, 'rank': hvd.rank(), 'size': hvd.size(),
            'resets': resets}), flush=True)
        state.epoch += 1
        state.seen = []
        state.train_sampler.set_epoch(state.epoch)
        commit()


train(state)
digest = hashlib.sha256()
for name, tensor in sorted(model.state_dict().items()):
    digest.update(name.encode())
    digest.update(tensor.detach().contiguous().numpy().tobytes())
print(f'DIGEST {hvd.rank()} {digest.hexdigest()}', flush=True)
