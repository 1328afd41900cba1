#!/usr/bin/python3
"""One small PyTorch training loop, run either by torchrun or by chorusrun's elastic mode, for
scripts/elastic_outage_bench.py.

A 3-layer MLP on synthetic data trains for --steps steps (each one waits --step-time seconds
first: the compute of a real model, without its CPU load); the state is committed every
--commit-every steps, the way each launcher's users recover from a lost worker:

  --launcher torchrun: torch.distributed (gloo) with DistributedDataParallel; rank 0 saves the
      model, the optimizer and the step to --checkpoint (a new file, then renamed) at each
      commit, and every worker loads it at start: torchrun restarts every worker after a loss.
  --launcher chorus: chorus.torch with hvd.DistributedOptimizer under hvd.elastic.run, the state
      a hvd.elastic.TorchState committed in memory: survivors roll back to the commit and go on.

Every process appends JSON lines {"kind", "time" (time.time()), "pid", "rank", "size", "gen",
...} to the file $OUTAGE_EVENTS (O_APPEND, one write per line):
  started   the process began (before importing torch)
  imported  torch (and chorus) imported
  ready     the world formed and the state loaded (torchrun: process group + checkpoint; chorus:
            the elastic state synced from rank 0, at each entry of the training function);
            "step": the step training resumes after
  step      a step finished ("step": how many steps the model has taken)
  failed    chorus: a collective failed (HorovodInternalError), rank/gen of the failed world
  restored  chorus: the state rolled back to the last commit
  reformed  chorus: the new world formed (the state's reset callback)
  sync      chorus: the state's sync from rank 0 begins
  interrupt chorus: host update seen at a commit (HostsUpdatedInterrupt)
"gen": torchrun's restart count, or chorus's elastic generation (-1 for a joiner not yet placed).
"""
import argparse
import json
import os
import time

STARTED = time.time()

parser = argparse.ArgumentParser()
parser.add_argument('--launcher', choices=['torchrun', 'chorus'], required=True)
parser.add_argument('--steps', type=int, default=600)
parser.add_argument('--commit-every', type=int, default=10)
parser.add_argument('--step-time', type=float, default=0.01, help='seconds waited per step')
parser.add_argument('--checkpoint', help='torchrun: the checkpoint file')
args = parser.parse_args()

EVENTS = os.environ['OUTAGE_EVENTS']


def log(kind, **fields):
    event = dict(kind=kind, time=time.time(), pid=os.getpid(), **fields)
    fd = os.open(EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (json.dumps(event) + '\n').encode())
    os.close(fd)


def pre_world_fields():
    """What a process knows of its place before its world forms."""
    if args.launcher == 'torchrun':
        return dict(rank=int(os.environ['RANK']), size=int(os.environ['WORLD_SIZE']),
                    gen=int(os.environ['TORCHELASTIC_RESTART_COUNT']))
    return dict(rank=int(os.environ.get('CHORUS_RANK', os.environ.get('HOROVOD_RANK', -1))),
                size=-1, gen=int(os.environ.get('CHORUS_ELASTIC_GENERATION', '0')),
                host=os.environ.get('CHORUS_HOSTNAME'))


log('started', time_started=STARTED, **pre_world_fields())

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

if args.launcher == 'chorus':
    import chorus.torch as hvd
    from chorus.exceptions import HorovodInternalError, HostsUpdatedInterrupt
log('imported', **pre_world_fields())

torch.set_num_threads(1)
torch.manual_seed(7)
BATCHES = 16  # synthetic batches, per rank, used in turn


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                               torch.nn.ReLU(), torch.nn.Linear(256, 10))


def make_data(rank):
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(BATCHES, 32, 64, generator=g)
    return x, (x[:, :, :10].sum(dim=2) > 0).long() + 2 * (x[:, :, 10] > 0).long()


def train(step, model, optimizer, data, commit, where):
    """The training loop both launchers run: `step` is a holder with .step (the steps taken so
    far); commit() is called every --commit-every steps; where() gives (rank, size, gen) for the
    events."""
    x, y = data
    while step.step < args.steps:
        time.sleep(args.step_time)
        i = step.step % BATCHES
        optimizer.zero_grad()
        F.cross_entropy(model(x[i]), y[i]).backward()
        optimizer.step()
        step.step += 1
        rank, size, gen = where()
        log('step', rank=rank, size=size, gen=gen, step=step.step)
        if step.step % args.commit_every == 0:
            commit()


def run_torchrun():
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    class Step:
        step = 0

    dist.init_process_group('gloo')
    rank, size = dist.get_rank(), dist.get_world_size()
    gen = int(os.environ['TORCHELASTIC_RESTART_COUNT'])
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    step = Step()
    if os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved['model'])
        optimizer.load_state_dict(saved['optimizer'])
        step.step = saved['step']
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's parameters
    log('ready', rank=rank, size=size, gen=gen, step=step.step)

    def commit():
        if rank == 0:
            tmp = args.checkpoint + '.tmp'
            torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(),
                        'step': step.step}, tmp)
            os.replace(tmp, args.checkpoint)

    train(step, ddp, optimizer, make_data(rank), commit, lambda: (rank, size, gen))
    dist.destroy_process_group()


def run_chorus():
    hvd.init()
    model = make_model()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01,
                                                         momentum=0.9),
                                         named_parameters=model.named_parameters())

    def where():
        return hvd.rank(), hvd.size(), int(os.environ['CHORUS_ELASTIC_GENERATION'])

    class State(hvd.elastic.TorchState):
        def sync(self):
            rank, size, gen = where()
            log('sync', rank=rank, size=size, gen=gen)
            super().sync()

        def restore(self):
            super().restore()
            rank, size, gen = where()
            log('restored', rank=rank, size=size, gen=gen, step=self.step)

    state = State(model=model, optimizer=optimizer, step=0)

    def on_reset():
        rank, size, gen = where()
        log('reformed', rank=rank, size=size, gen=gen)

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def elastic_train(state):
        rank, size, gen = where()
        log('ready', rank=rank, size=size, gen=gen, step=state.step,
            host=os.environ['CHORUS_HOSTNAME'])
        try:
            train(state, model, optimizer, make_data(rank), state.commit, where)
        except HorovodInternalError:
            log('failed', rank=rank, size=size, gen=gen)
            raise
        except HostsUpdatedInterrupt:
            log('interrupt', rank=rank, size=size, gen=gen)
            raise

    elastic_train(state)


if args.launcher == 'torchrun':
    run_torchrun()
else:
    run_chorus()
log('done')
