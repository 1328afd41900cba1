#!/usr/bin/python3
"""The worker of scripts/elastic_soak.py: a small chorus.torch elastic training loop that logs
what the soak's invariants need and acts on its share of the soak's fault schedule.

Training: a two-layer classifier on synthetic data (--samples rows, a multiple of 12), trained
with hvd.DistributedOptimizer (SGD with momentum) under the elastic loop with a TorchState
holding the model, the optimizer, an ElasticSampler and the counters `epoch`, `step` and
`commits`. The global step number is kept twice: in the model, as a buffer (saved, restored and
synced with the parameters, it is what the log calls `step`), and as the state's plain attribute
`step`, which must always agree with it. Each rank trains --batch-size (12) samples per step:
the sampler's progress then stays a multiple of 12, so the rest of an epoch always divides among
1 to 4 ranks and the sampler never pads (every sample is trained exactly once per epoch, which
the soak checks exactly). A commit every --commit-every steps and at the end of each epoch.

Host updates are checked only through state.commit() (which saves, then checks), Horovod's
documented pattern: on a host update the reset syncs the state from rank 0, and
ObjectState.sync broadcasts the COMMITTED plain attributes (as Horovod's does), so a check
between commits would send the training on with the model of the current step but the plain
attributes (`step`, `epoch`) of the last commit. Committing first makes the two the same.

Pace: each step sleeps --step-seconds while its gradients' allreduces are in flight, or
--slow-step-seconds while the file --pace-file exists (the soak creates it while a joining
worker is starting, so that it joins while the job still trains, as in a longer training).

The loop is hvd.elastic.run's (chorus.elastic.run_fn with chorus's reset), with the reset
wrapped so that a scheduled event can strike while the others re-form.

Log: one JSON object per line, appended (one write each, unbuffered, so a SIGKILL loses nothing
written) to --log-dir/w<pid>.jsonl; every record has `ev`, `pid`, `t` (time.time()), the
process's `host` (CHORUS_HOSTNAME) and its place: `gen`, `rank`, `size` of the world it formed
last (before that, of the one it was started for: a joining worker's is generation -1, rank -1):
  start      the process started (worker id, the generation it was started for)
  init       about to call hvd.init() (a joining worker is ready for chorusrun from then on)
  formed     the world is formed and the state synced: epoch, step, commits, the sampler's
             processed_num and epoch, the plain attribute `step` (plain_step), digest (sha256 of
             the model's and the optimizer's tensors)
  intent     about to run step `step` of `epoch` (the sampler's) on the sample `indices`
             (before any of the step's collectives: a step that completed anywhere has the
             intent of every rank)
  done       step `step` finished here; digest after it
  commit     state.commit() returned (or raised HostsUpdatedInterrupt): `step` is committed on
             every rank (its allreduce completed)
  restore    a collective failed: the state goes back to the last commit (a reset follows)
  reset      a reset begins (after a restore, or a HostsUpdatedInterrupt that keeps the state)
  fault      a scheduled event strikes now (`id`, `kind`), logged just before it acts
  exception  an exception leaves the training loop (type, message)
  final      training finished: epoch, step, commits, digest
  child      the pid of the background child started with --spawn-child

Schedule (--plan FILE, JSON written by the soak): {"markers": DIR, "hosts_file": PATH,
"events": [...]}, each event {"id", "kind", "phase", "rank", "step", "after", "hosts"}:
  phase "step":        the process holding rank `rank` acts when it is about to run step `step`;
  phase "reset_begin": the process that held rank `rank` acts when its first reset after event
                       `after` begins (before it adopts the next generation);
  phase "reset_end":   the process given rank `rank` acts in its first reset after event
                       `after`, once the new world is formed and before the state is synced.
Kinds: kill (SIGKILL itself), stop (SIGSTOP itself: only chorusrun's heartbeat tells), term
(SIGTERM itself: a spot notice), raise (an uncaught exception in the training step), exit0
(exit with status 0), hosts (write `hosts` into the discovery file). Events of other phases
(the soak's own, e.g. signals it sends from outside) are ignored here. An event fires once per
job: the first process to act creates DIR/<id> (O_EXCL), so a rollback that replays step
`step`, or a replacement given the same rank, does not strike again.

--spawn-child: the worker also starts a background child (sleep) that must not outlive the job.
"""

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument('--log-dir', required=True)
parser.add_argument('--plan', required=True)
parser.add_argument('--epochs', type=int, default=2)
parser.add_argument('--samples', type=int, default=576)
parser.add_argument('--batch-size', type=int, default=12)
parser.add_argument('--commit-every', type=int, default=3)
parser.add_argument('--hidden', type=int, default=64, help='width of the hidden layer')
parser.add_argument('--step-seconds', type=float, default=0.0,
                    help="sleep in each step, while its gradients' allreduces are in flight")
parser.add_argument('--slow-step-seconds', type=float, default=0.0,
                    help='the same, while --pace-file exists')
parser.add_argument('--pace-file', default='')
parser.add_argument('--spawn-child', action='store_true')
parser.add_argument('--give-up', type=float, default=600,
                    help='seconds after which SIGALRM ends this worker, whatever it is doing: '
                    'a last resort should the soak itself die')
args = parser.parse_args()
if args.samples % 12 or args.batch_size % 12:
    parser.error('--samples and --batch-size must be multiples of 12 (no sampler padding)')

PID = os.getpid()
LOG_FD = os.open(os.path.join(args.log_dir, f'w{PID}.jsonl'),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
# gen, rank, size of the world this process is in: the one it was started for, then the one
# formed last.
place = dict(gen=int(os.environ.get('CHORUS_ELASTIC_GENERATION', '0')),
             rank=int(os.environ.get('CHORUS_RANK', '-1')),
             size=int(os.environ.get('CHORUS_SIZE', '0')),
             host=os.environ.get('CHORUS_HOSTNAME'))


def log(ev, **fields):
    record = dict(ev=ev, pid=PID, t=time.time(), **place)
    record.update(fields)
    os.write(LOG_FD, (json.dumps(record) + '\n').encode())


def excepthook(kind, value, tb):
    log('exception', type=kind.__name__, message=str(value))
    sys.__excepthook__(kind, value, tb)


sys.excepthook = excepthook
log('start', worker_id=os.environ.get('CHORUS_ELASTIC_WORKER_ID'))
if args.spawn_child:
    child = subprocess.Popen(['sleep', str(int(args.give_up) + 60)], stdin=subprocess.DEVNULL)
    log('child', child=child.pid)


# The last resort: SIGALRM's default action ends the process, whatever it is blocked in.
signal.alarm(int(args.give_up))

with open(args.plan) as f:
    plan = json.load(f)
EVENTS = plan['events']

import torch  # noqa: E402  (after the start record: the import takes seconds)
import torch.nn.functional as F  # noqa: E402
import torch.utils.data  # noqa: E402

import chorus.torch as hvd  # noqa: E402
from chorus.elastic import run_fn  # noqa: E402
from chorus.elastic.reset import reset as chorus_reset  # noqa: E402
from chorus.exceptions import HostsUpdatedInterrupt  # noqa: E402
from discovery_file import replace_file  # noqa: E402


def claim(event):
    """True for the one process that fires `event` (see the module comment)."""
    try:
        os.close(os.open(os.path.join(plan['markers'], event['id']),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        return True
    except FileExistsError:
        return False


def fired(event_id):
    return os.path.exists(os.path.join(plan['markers'], event_id))


SIGNALS = {'kill': signal.SIGKILL, 'stop': signal.SIGSTOP, 'term': signal.SIGTERM}


def strike(event):
    log('fault', id=event['id'], kind=event['kind'], phase=event['phase'])
    kind = event['kind']
    if kind in SIGNALS:
        # A signal to this process may be taken by another of its threads, a moment later:
        # nothing of this thread runs meanwhile.
        os.kill(PID, SIGNALS[kind])
        time.sleep(5)
        raise RuntimeError(f'soak: {kind}: signal {SIGNALS[kind]} did not stop this process')
    elif kind == 'raise':
        raise RuntimeError(f"soak: scheduled exception {event['id']} on rank {place['rank']}")
    elif kind == 'exit0':
        sys.exit(0)
    elif kind == 'hosts':
        replace_file(plan['hosts_file'], event['hosts'])
    else:
        raise ValueError(f'soak: unknown event kind {kind!r}')


def strike_at_step(step):
    for event in EVENTS:
        if (event['phase'] == 'step' and event['step'] == step and
                event['rank'] == place['rank'] and claim(event)):
            strike(event)


def strike_in_reset(phase, rank):
    for event in EVENTS:
        if (event['phase'] == phase and event['rank'] == rank and fired(event['after'])
                and claim(event)):
            strike(event)


def digest(model, optimizer):
    """sha256 over the model's and the optimizer's tensors (bit-exact replica check)."""
    h = hashlib.sha256()

    def add(prefix, obj):
        if isinstance(obj, torch.Tensor):
            h.update(prefix.encode())
            h.update(obj.detach().contiguous().numpy().tobytes())
        elif isinstance(obj, dict):
            for k in sorted(obj, key=str):
                add(f'{prefix}/{k}', obj[k])
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                add(f'{prefix}/{i}', v)

    add('model', model.state_dict())
    add('optimizer', optimizer.state_dict()['state'])
    return h.hexdigest()[:32]


log('init')
hvd.init()
# The generation init joined (a joining worker's first), before the state is synced.
place.update(gen=int(os.environ['CHORUS_ELASTIC_GENERATION']), rank=hvd.rank(), size=hvd.size())
torch.manual_seed(7)
torch.set_num_threads(1)
g = torch.Generator().manual_seed(11)
features = torch.randn(args.samples, 32, generator=g)
labels = (features[:, :4].sum(dim=1) > 0).long() + 2 * (features[:, 4] > 0).long()
dataset = torch.utils.data.TensorDataset(features, labels, torch.arange(args.samples))
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=5)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
model = torch.nn.Sequential(torch.nn.Linear(32, args.hidden), torch.nn.ReLU(),
                            torch.nn.Linear(args.hidden, 4))
# The global step number lives in the model (a buffer), so it is saved, restored and synced with
# the parameters it describes; the state's plain attribute `step` mirrors it (see `formed`).
model.register_buffer('soak_step', torch.zeros((), dtype=torch.int64))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                     named_parameters=model.named_parameters())


class SoakState(hvd.elastic.TorchState):
    def restore(self):
        log('restore')
        super().restore()


state = SoakState(model=model, optimizer=optimizer, train_sampler=sampler, epoch=0, step=0,
                  commits=0)


def commit():
    state.commits += 1
    try:
        state.commit()
    except HostsUpdatedInterrupt:
        log('commit', step=int(model.soak_step), commits=state.commits)
        raise
    log('commit', step=int(model.soak_step), commits=state.commits)


def train(state):
    place.update(gen=int(os.environ['CHORUS_ELASTIC_GENERATION']), rank=hvd.rank(),
                 size=hvd.size())
    log('formed', epoch=state.epoch, step=int(model.soak_step), plain_step=state.step,
        sampler_epoch=state.train_sampler.epoch, commits=state.commits,
        processed=state.train_sampler.processed_num, digest=digest(model, optimizer))
    while state.epoch < args.epochs:
        for batch_idx, (data, target, index) in enumerate(loader):
            step = int(model.soak_step) + 1
            strike_at_step(step)
            log('intent', step=step, epoch=sampler.epoch, indices=index.tolist())
            optimizer.zero_grad()
            F.cross_entropy(state.model(data), target).backward()  # submits the allreduces
            slow = args.pace_file and os.path.exists(args.pace_file)
            time.sleep(args.slow_step_seconds if slow else args.step_seconds)
            optimizer.step()
            model.soak_step.fill_(step)
            state.step = step
            state.train_sampler.record_batch(batch_idx, args.batch_size)
            log('done', step=step, epoch=sampler.epoch, digest=digest(model, optimizer))
            if step % args.commit_every == 0:
                commit()  # host updates are checked here only (see the module comment)
        state.epoch += 1
        state.train_sampler.set_epoch(state.epoch)
        commit()


def soak_reset():
    """chorus's reset, with the events scheduled at its beginning."""
    log('reset')
    strike_in_reset('reset_begin', place['rank'])
    chorus_reset()


def after_reset():
    place.update(gen=int(os.environ['CHORUS_ELASTIC_GENERATION']), rank=hvd.rank(),
                 size=hvd.size())
    strike_in_reset('reset_end', place['rank'])


state.register_reset_callbacks([after_reset])
run_fn(train, soak_reset)(state)
log('final', epoch=state.epoch, step=int(model.soak_step), commits=state.commits,
    digest=digest(model, optimizer))
