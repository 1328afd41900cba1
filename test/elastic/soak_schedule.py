"""The elastic soak's schedules (scripts/elastic_soak.py): drawn from a seed, with what chorusrun's
documented policy (elastic/README.md, elastic/driver.h, elastic/rank_assignment.h) says must
follow from them. Pure: no I/O, no clock; the same seed gives the same schedule.

A schedule is a job of 2-4 workers (--max-np) over 2-4 host names of this machine with 1-2
slots each (sometimes one more host held back, for discovery to add later), a --min-np, maybe
a --reset-limit or a --blacklist-cooldown-range, and 0-2 events at given steps of the training
(test/elastic/soak_train.py's global step counter), maybe followed by a second event while the
job re-forms after the first. PolicyModel plays the driver's rules over the events to predict
how the job ends (status 0, or the documented failure and its message), the generations'
memberships and the reset lines' causes where they are certain, and Schedule.bound() gives the
time the job may take.
"""

import dataclasses
import json
import random
from typing import List, Optional, Tuple

# Timing constants of chorusrun (elastic/driver.cc, launcher/): a worker silent this long is
# killed, checked this often; the others get the grace period after a worker exits 0; a worker
# chorusrun released leaves at its next commit.
HEARTBEAT_S = 5.0
HEARTBEAT_CHECK_S = 0.5
GRACE_S = 3.0

# What one step of the kinds below does to the job.
WORKER_KINDS = ('kill', 'stop', 'term', 'raise', 'exit0')  # the victim does it to itself
SOAK_KINDS = ('ext_kill', 'ext_stop', 'ext_term')  # the soak signals the victim's pid
HOST_KINDS = ('add_host', 'remove_host')  # a worker rewrites the discovery file
RESET_KINDS = ('kill', 'term', 'raise')  # a second event while the others re-form
SIGNAL_OF = {'ext_kill': 'SIGKILL', 'ext_stop': 'SIGSTOP', 'ext_term': 'SIGTERM'}


def local_host_names(hostname):
    """Names chorusrun treats as this machine (launcher/rank_layout.cc, IsLocalHost: localhost,
    127.0.0.1 and this machine's hostname, full or first label, compared without case) that the
    driver sees as different hosts (its host set compares names exactly): at least 4."""
    short = hostname.split('.')[0]
    names = []
    for name in ('localhost', '127.0.0.1', hostname, short, 'LOCALHOST', hostname.upper(),
                 'Localhost', short.upper()):
        if name and name not in names:
            names.append(name)
    return names


@dataclasses.dataclass
class Event:
    id: str
    kind: str  # WORKER_KINDS, SOAK_KINDS, HOST_KINDS
    # 'step', 'soak' (the soak acts once step `step` is done), 'reset_begin' or 'reset_end'
    phase: str
    rank: int  # the victim (or the writer of the discovery file)
    step: int = 0  # phases step and soak
    after: str = ''  # reset phases: the event whose reset this one strikes in
    hosts: str = ''  # host kinds: the discovery file's new text
    host: str = ''  # the victim's host, as predicted (for the description)
    resets: bool = True  # the job re-forms after it (the outage is measured)

    def describe(self):
        where = f'@s{self.step}' if self.phase in ('step', 'soak') else f'({self.phase})'
        what = self.kind
        if self.kind in HOST_KINDS:
            what += '[' + self.hosts.strip().replace('\n', ',') + ']'
        return f'{self.id}:{what} r{self.rank}{where}'

    def worker_plan(self):
        """The event as soak_train.py reads it (None for the soak's own)."""
        if self.phase == 'soak':
            return None
        kind = 'hosts' if self.kind in HOST_KINDS else self.kind
        return dict(id=self.id, kind=kind, phase=self.phase, rank=self.rank, step=self.step,
                    after=self.after, hosts=self.hosts)


@dataclasses.dataclass
class Expectation:
    outcome: str  # 'ok' (trains to the end), 'exit0' (a worker's exit 0 ends the job), 'fail'
    message: str = ''  # 'fail': the start of the text after "chorusrun: elastic job failed: "
    resets: Optional[int] = None  # the number of reset lines, when certain
    generations: Optional[List[List[str]]] = None  # each generation's hosts by rank, if certain
    causes: List[str] = dataclasses.field(default_factory=list)  # in stderr, in this order
    replacements: int = 0  # workers started after the first generation (for the time bound)
    fresh_start: bool = False  # every worker stopped, training restarts from scratch


@dataclasses.dataclass
class Schedule:
    seed: int
    hosts: List[Tuple[str, int]]  # the first discovery answer
    reserve: Optional[Tuple[str, int]]  # a host discovery lists later (add_host)
    max_np: int
    min_np: int
    elastic_timeout: int
    cooldown: Optional[Tuple[int, int]]
    reset_limit: Optional[int]
    epochs: int
    samples: int
    commit_every: int
    hidden: int
    step_seconds: float
    spawn_child: bool
    events: List[Event]
    expect: Expectation

    def hosts_text(self, hosts=None):
        return ''.join(f'{h}:{s}\n' for h, s in (self.hosts if hosts is None else hosts))

    def describe(self):
        """The schedule in one line."""
        hosts = ','.join(f'{h}:{s}' for h, s in self.hosts)
        if self.reserve:
            hosts += f' (+{self.reserve[0]}:{self.reserve[1]})'
        flags = f'max-np {self.max_np} min-np {self.min_np}'
        if self.reset_limit is not None:
            flags += f' reset-limit {self.reset_limit}'
        if self.cooldown:
            flags += f' cooldown {self.cooldown[0]}-{self.cooldown[1]}'
        model = f'hidden {self.hidden} commit/{self.commit_every}'
        if self.spawn_child:
            model += ' +child'
        events = ', '.join(e.describe() for e in self.events) or 'no event'
        want = self.expect.outcome
        if want == 'fail':
            want += f'({self.expect.message.split(" (")[0]})'
        return f'{hosts} | {flags} | {model} | {events} | expect {want}'

    def plan(self, markers, hosts_file):
        """soak_train.py's --plan."""
        events = [p for p in (e.worker_plan() for e in self.events) if p is not None]
        return json.dumps(dict(markers=markers, hosts_file=hosts_file, events=events))

    def min_total_steps(self):
        """Steps of the whole training at the largest world (max_np): every event's step is
        below it, so each is reached whatever the world's size."""
        return self.epochs * (self.samples // (12 * self.max_np))

    def bound(self, discovery_interval, start_s, step_s):
        """Seconds the job may take: a start of every worker (`start_s`: importing torch and
        forming the world on this machine), the training at its smallest world (`step_s` per
        step besides the schedule's own sleep), and each event's share: what chorusrun takes to
        see it (the heartbeat for SIGSTOP, a discovery interval for host changes), a start of
        the workers it replaces, the elastic timeout and the grace period where the job ends."""
        steps = self.epochs * (self.samples // 12)  # a world of one does every step
        total = start_s + steps * (self.step_seconds + step_s) + 10
        per_start = start_s  # a replacement imports torch and joins
        for e in self.events:
            total += 3
            if e.kind in ('stop', 'ext_stop'):
                total += HEARTBEAT_S + 2 * HEARTBEAT_CHECK_S
            if e.kind in HOST_KINDS:
                total += 2 * discovery_interval
        total += per_start * (self.expect.replacements + (self.max_np if self.expect.fresh_start
                                                          else 0))
        if self.cooldown:
            total += self.cooldown[1] * 1.1 + 2 * discovery_interval
        if self.expect.outcome == 'fail':
            total += self.elastic_timeout + 2 * GRACE_S
        if self.expect.outcome == 'exit0':
            total += 2 * GRACE_S
        return total


class PolicyModel:
    """chorusrun's elastic policy over hosts, slots and workers (no processes, no time).

    Rules modelled (elastic/README.md, rank_assignment.h): hosts in discovery order sorted by
    name, new ones appended sorted; survivors keep the lowest ranks in order and their slots,
    free slots follow in host order, --max-np caps; a failure (exit non-zero, a signal other than
    SIGTERM, silence) blacklists the host and every worker on it leaves; SIGTERM leaves without
    blacklist; a reset with fewer than --min-np slots stops the survivors and waits (with a
    cooldown the hosts come back and the job starts afresh, else it fails after
    --elastic-timeout, or at once when every discovered host is blacklisted); --reset-limit K
    fails the (K+1)-th reset.
    """

    def __init__(self, hosts, max_np, min_np, cooldown, reset_limit):
        self.listed = dict(hosts)
        self.order = sorted(self.listed)
        self.blacklisted = set()
        self.max_np, self.min_np = max_np, min_np
        self.cooldown, self.reset_limit = cooldown, reset_limit
        self.resets = 0  # what --reset-limit counts
        self.reset_lines = 0  # resets that started a generation (a line on stderr each)
        self.certain = True  # membership and reset count still predictable
        self.ended = None  # None, or an Expectation's (outcome, message)
        self.causes = []
        self.replacements = 0
        self.fresh_start = False
        self.workers = self._assign([])
        self.generations = [self.hosts_by_rank()]

    def hosts_by_rank(self):
        return [h for h, _ in self.workers]

    def _usable(self):
        return [h for h in self.order if h in self.listed and h not in self.blacklisted]

    def _assign(self, survivors):
        usable = self._usable()
        self.order = usable + sorted(h for h in self.listed
                                     if h not in usable and h not in self.blacklisted)
        kept = [(h, s) for h, s in survivors if h in self.listed and h not in self.blacklisted
                and s < self.listed[h]][:self.max_np]
        free = [(h, s) for h in self.order for s in range(self.listed[h]) if (h, s) not in kept]
        return (kept + free)[:self.max_np]

    def _reset(self, survivors, cause):
        """A reset with `survivors` (alive workers, by previous rank)."""
        if self.reset_limit is not None and self.resets >= self.reset_limit:
            self.ended = ('fail', f'reset limit {self.reset_limit} reached (--reset-limit); the '
                          f'next reset was due to: {cause}')
            return
        self.resets += 1
        nxt = self._assign(survivors)
        if nxt and len(nxt) >= self.min_np:
            self.reset_lines += 1
            if cause:
                self.causes.append(cause)
            self.replacements += len([w for w in nxt if w not in survivors])
            self.workers = nxt
            self.generations.append(self.hosts_by_rank())
            return
        self.workers = []
        if self.cooldown:  # the blacklisted hosts come back: a fresh start
            self.blacklisted.clear()
            self.certain = False
            fresh = self._assign([])
            if len(fresh) >= self.min_np:
                self.workers = fresh
                self.fresh_start = True
                return
        discovered = [h for h in self.listed]
        if not self.cooldown and discovered and all(h in self.blacklisted for h in discovered):
            self.ended = ('fail', 'every host is blacklisted (')
        else:
            self.ended = ('fail', f'fewer than --min-np={self.min_np} slots for longer than '
                          f'--elastic-timeout=')

    def lose(self, rank, kind):
        """The worker of `rank` ends by `kind` (kill, stop, term, raise or their ext_ forms)."""
        kind = kind.replace('ext_', '')
        host, _ = self.workers[rank]
        how = {'kill': 'killed by SIGKILL', 'raise': 'exited with code 1', 'term':
               'left after SIGTERM', 'stop': 'silent for 5s (no heartbeat: hung or stopped), '
               'killed'}[kind]
        cause = f'rank {rank} on {host} {how}'
        if kind != 'term':
            cause += f'; {host} blacklisted'
            self.blacklisted.add(host)
            if self.cooldown:
                self.certain = False  # it comes back at a time of its own
        survivors = [w for i, w in enumerate(self.workers) if i != rank]
        self._reset(survivors, cause if self.certain else '')

    def change_hosts(self, hosts):
        """Discovery answers `hosts` from now on."""
        self.listed = dict(hosts)
        nxt = self._assign(self.workers)
        if nxt == self.workers:
            return False  # the ranks stay: no reset
        self._reset(self.workers, 'hosts changed')
        return True

    def exit0(self):
        self.ended = ('exit0', '')

    def expectation(self):
        outcome, message = self.ended or ('ok', '')
        return Expectation(outcome=outcome, message=message,
                           resets=self.reset_lines if self.certain else None,
                           generations=self.generations if self.certain else None,
                           causes=list(self.causes), replacements=self.replacements,
                           fresh_start=self.fresh_start)


def draw(seed, names, quick=False):
    """The schedule of `seed` over the host names `names` (local_host_names)."""
    rnd = random.Random(seed)
    while True:
        n_hosts = rnd.randint(2, 4)
        picked = rnd.sample(names[:4], n_hosts)
        hosts = [(h, rnd.randint(1, 2)) for h in picked]
        if sum(s for _, s in hosts) >= 2:
            break
    reserve = None
    unused = [h for h in names[:4] if h not in picked]
    if unused and rnd.random() < 0.35:
        reserve = (rnd.choice(unused), rnd.randint(1, 2))
    total = sum(s for _, s in hosts)
    max_np = rnd.randint(2, min(4, total))
    min_np = rnd.randint(1, max_np)
    cooldown = (1, 2) if rnd.random() < 0.2 else None
    reset_limit_draw = rnd.random()
    epochs = 2
    samples = 576
    commit_every = rnd.randint(2, 4)
    hidden = rnd.choice([64, 1024, 4096])
    step_seconds = 0.02
    spawn_child = rnd.random() < 0.3

    model = PolicyModel(hosts, max_np, min_np, cooldown, None)
    events = []
    n_events = rnd.choices([0, 1, 2], weights=[1, 10, 7])[0]
    last_step = epochs * (samples // (12 * max_np)) - 3
    step = 1
    for i in range(n_events):
        if model.ended or not model.certain or step + 4 > last_step:
            break
        step = rnd.randint(step + 2 if i == 0 else step + 6, min(last_step, step + 14))
        kinds = ['kill'] * 3 + ['stop'] * 2 + ['term'] * 2 + ['raise'] * 2 + ['exit0']
        kinds += ['ext_kill', 'ext_stop', 'ext_term', 'remove_host']
        if reserve and reserve[0] not in model.listed:
            kinds += ['add_host'] * 2
        kind = rnd.choice(kinds)
        size = len(model.workers)
        rank = 0 if rnd.random() < 0.35 else rnd.randint(0, size - 1)
        eid = f'e{len(events)}'
        if kind in HOST_KINDS:
            if kind == 'add_host':
                listed = list(model.listed.items()) + [reserve]
            else:
                gone = rnd.choice(sorted(model.listed))
                listed = [(h, s) for h, s in model.listed.items() if h != gone]
            text = ''.join(f'{h}:{s}\n' for h, s in listed)
            event = Event(eid, kind, 'step', rank, step=step, hosts=text)
            events.append(event)
            event.resets = model.change_hosts(listed) and not model.ended
            continue
        phase = 'soak' if kind in SOAK_KINDS else 'step'
        event = Event(eid, kind, phase, rank, step=step, host=model.workers[rank][0])
        events.append(event)
        if kind == 'exit0':
            event.resets = False
            model.exit0()
            break
        before = list(model.workers)
        model.lose(rank, kind)
        event.resets = not model.ended
        if phase == 'soak':
            step += 4  # the soak acts a little after the step
        # Sometimes a second event while the others re-form: a survivor strikes, before it
        # adopts the next generation (by its old rank) or once the new world is formed (by its
        # new rank, before the sync).
        survivors = [r for r in range(len(before)) if r != rank and before[r] in model.workers]
        if model.ended or model.fresh_start or not survivors or rnd.random() > 0.3:
            continue
        old = rnd.choice(survivors)
        new = model.workers.index(before[old])
        phase = rnd.choice(['reset_begin', 'reset_end'])
        second = Event(f'e{len(events)}', rnd.choice(RESET_KINDS), phase,
                       old if phase == 'reset_begin' else new, after=eid, host=before[old][0])
        events.append(second)
        # Whether chorusrun sees it in the same reset as the first or in one of its own, the
        # job ends the same way; reset lines and rank numbers are no longer certain.
        model.certain = False
        model.lose(new, second.kind)
        second.resets = not model.ended
        break

    # --reset-limit: sometimes exactly enough for the predicted resets, sometimes one short.
    reset_limit = None
    if model.certain and not cooldown and reset_limit_draw < 0.25:
        reset_limit = model.resets if reset_limit_draw < 0.15 else max(0, model.resets - 1)
        if reset_limit == model.resets and rnd.random() < 0.5:
            reset_limit += 2
        replay = PolicyModel(hosts, max_np, min_np, cooldown, reset_limit)
        replay_events(replay, events, reserve)
        model = replay
    expect = model.expectation()
    return Schedule(seed=seed, hosts=hosts, reserve=reserve, max_np=max_np, min_np=min_np,
                    elastic_timeout=5, cooldown=cooldown, reset_limit=reset_limit,
                    epochs=epochs, samples=samples, commit_every=commit_every, hidden=hidden,
                    step_seconds=step_seconds, spawn_child=spawn_child, events=events,
                    expect=expect)


def replay_events(model, events, reserve):
    """Plays `events` (drawn over an equal model) on `model` until the job ends."""
    for e in events:
        if model.ended:
            return
        if e.kind in HOST_KINDS:
            model.change_hosts([tuple(line.split(':')[0:1] + [int(line.split(':')[1])])
                                for line in e.hosts.splitlines()])
        elif e.kind == 'exit0':
            model.exit0()
        elif e.phase in ('step', 'soak'):
            model.lose(e.rank, e.kind)
