"""The elastic soak's schedules (scripts/elastic_soak.py): drawn from a seed, with what chorusrun's
documented policy (elastic/next_generation.h, docs/elastic.md, elastic/rank_assignment.h) says
must follow from them. Pure: no I/O, no clock; the same seed gives the same schedule.

A schedule is a job of 2-4 workers (--max-np) over 2-4 host names of this machine with 1-2
slots each (sometimes one more host held back, for discovery to add later), a --min-np, maybe
a --reset-limit or a --blacklist-cooldown-range, and 0-2 events at given steps of the training
(test/elastic/soak_train.py's global step counter), maybe followed by a second event while the
job re-forms after the first. PolicyModel plays the engine's rules over the events.

What the policy makes certain, and what it leaves to timing. A lost worker's survivors go on at
once in the next generation; the free slots get joining workers, which join in a later
generation once they have started (a loss refilled by a joiner is two generations, and joiners
that become ready apart join in generations of their own). When a joiner is ready depends on
how fast it starts, so the model does not predict generation numbers or the world's size after
a join; it predicts:
  - the outcome: training to the end (status 0), a worker's exit 0 (status 0), or the
    documented failure and its message (fewer than --min-np for --elastic-timeout, every host
    blacklisted, --reset-limit);
  - the first generation's hosts by rank, and the first event's reset cause;
  - for every event, the workers certain to be placed after it (the survivors, which keep the
    lowest ranks): later events strike only those, so their hosts are known;
  - a range for the number of generations after the first (each counts against --reset-limit):
    at least the certain ones (a loss's, and the join that ends a hold), at most those plus one
    per joining worker started and one per release (a release, or a second loss in the reset
    of a first, may share a generation with another change);
  - whether survivors are held (fewer than --min-np) or start afresh (none left).
Schedule.bound() gives the time the job may take.
"""

import dataclasses
import json
import random
from typing import List, Optional, Tuple

# Timing constants of chorusrun (elastic/next_generation.h, launcher/engine/job_engine.h): a worker
# silent this long is killed, checked this often; the others get the finish grace after a
# worker exits 0; joiners ready within the join window of the first join together.
HEARTBEAT_S = 5.0
HEARTBEAT_CHECK_S = 0.5
GRACE_S = 3.0
JOIN_WINDOW_S = 1.0

# What one step of the kinds below does to the job.
WORKER_KINDS = ('kill', 'stop', 'term', 'raise', 'exit0')  # the victim does it to itself
SOAK_KINDS = ('ext_kill', 'ext_stop', 'ext_term')  # the soak signals the victim's pid
HOST_KINDS = ('add_host', 'remove_host')  # a worker rewrites the discovery file
RESET_KINDS = ('kill', 'term', 'raise')  # a second event while the others re-form
LOSS_KINDS = ('kill', 'stop', 'term', 'raise') + SOAK_KINDS
SIGNAL_OF = {'ext_kill': 'SIGKILL', 'ext_stop': 'SIGSTOP', 'ext_term': 'SIGTERM'}
# How chorusrun names each loss (elastic/worker_exit.h; the heartbeat in next_generation.cc).
HOW = {'kill': 'killed by SIGKILL', 'term': 'left after SIGTERM', 'raise': 'exited with code 1',
       'stop': 'silent for 5s (no heartbeat: hung, stopped or cut off), killed'}
# --elastic-timeout: where the job is to fail for want of slots, short (that is how long it
# waits); elsewhere long enough for a joining worker to start here (import torch, chorus init)
# on a loaded machine, which the same timeout bounds.
FAIL_TIMEOUT_S = 3
JOIN_TIMEOUT_S = 30


def how(kind):
    """chorusrun's words for a loss of `kind` (kill, stop, term, raise or their ext_ forms)."""
    return HOW[kind.replace('ext_', '')]


def blacklists(kind):
    """Whether a loss of `kind` blacklists its host (anything but a SIGTERM)."""
    return kind.replace('ext_', '') != 'term'


def local_host_names(hostname):
    """Names chorusrun treats as this machine (launcher/hosts/rank_layout.cc, IsLocalHost: localhost,
    127.0.0.1 and this machine's hostname, full or first label, compared without case) that the
    engine sees as different hosts (its host set compares names exactly): at least 4."""
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
    host: str = ''  # the victim's host (certain: see the module comment)
    model_rank: int = -1  # reset phases: the victim's rank among the survivors of `after`
    # The job re-forms without the victim (a loss, or a release of the workers of a removed
    # host) and goes on: the outage is measured.
    resets: bool = True
    held: bool = False  # the survivors are held (fewer than --min-np) until joiners arrive
    fresh: bool = False  # no survivor: the next generation starts afresh
    must_strike: bool = True  # the job certainly still runs when the event is due

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
    # 'fail': a regular expression the text after "chorusrun: elastic job failed: " must match
    # from its start
    message: str = ''
    fail_cause: str = ''  # 'fail' by --reset-limit: the refused reset's cause, when certain
    first_generation: List[str] = dataclasses.field(default_factory=list)  # hosts by rank
    first_cause: str = ''  # the first event's loss, as the first reset line's cause names it
    resets: Tuple[int, int] = (0, 0)  # lowest and highest count of generations after the first
    joiners: int = 0  # joining workers started, at most (for the time bound)
    fresh_start: bool = False  # every worker lost: training restarts from scratch
    max_slots: dict = dataclasses.field(default_factory=dict)  # host -> most slots listed


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
    slow_step_seconds: float
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
        flags = f'max-np {self.max_np} min-np {self.min_np} timeout {self.elastic_timeout}'
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
            want += f'({self.expect.message.split(" (")[0].split("=")[0]})'
        lo, hi = self.expect.resets
        return f'{hosts} | {flags} | {model} | {events} | expect {want}, resets {lo}-{hi}'

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
        step besides the schedule's own sleep; twice over after a fresh start), and each
        event's share: what chorusrun takes to see it (the heartbeat for SIGSTOP, a discovery
        interval for host changes), a start of the joining workers it brings (the survivors
        wait for them when held, and train at the slow pace meanwhile otherwise), the blacklist
        cooldown, the elastic timeout and the grace period where the job ends."""
        steps = self.epochs * (self.samples // 12)  # a world of one does every step
        training = steps * (self.step_seconds + step_s)
        total = start_s + training + 10
        for e in self.events:
            total += 3
            if e.kind in ('stop', 'ext_stop'):
                total += HEARTBEAT_S + 2 * HEARTBEAT_CHECK_S
            if e.kind in HOST_KINDS:
                total += 2 * discovery_interval
            total += start_s  # the joiners it brings start (or a fresh start)
        if self.expect.fresh_start:
            total += training
        if self.cooldown:
            total += self.cooldown[1] * 1.1 + 2 * discovery_interval
        if self.expect.outcome == 'fail':
            total += self.elastic_timeout + 2 * GRACE_S
        if self.expect.outcome == 'exit0':
            total += 2 * GRACE_S
        return total


@dataclasses.dataclass
class Worker:
    host: str
    slot: int


class PolicyModel:
    """chorusrun's elastic policy (elastic/next_generation.h) over hosts, slots and workers; no
    processes, no time.

    Rules modelled: hosts in discovery order sorted by name, new ones appended sorted; the first
    generation fills the slots in host order up to --max-np. A failure (exit non-zero, a signal
    other than SIGTERM, silence) blacklists the host: the other workers there are released and
    joiners there stopped; SIGTERM leaves without blacklist. Survivors keep the lowest ranks in
    order; free slots (up to --max-np) get joining workers. Fewer than --min-np survivors are
    held until joiners bring the world back to --min-np; none left: the next generation starts
    afresh with every worker new. Fewer than --min-np slots in all: the job fails after
    --elastic-timeout, or at once when every discovered host is blacklisted (no cooldown). With
    a cooldown the blacklisted hosts come back. Every generation after the first counts against
    --reset-limit: the (K+1)-th fails the job.

    `placed` are the workers certain to be in the world (ranks 0..len-1), `pending` the joiners
    started that may or may not have joined yet (they take the ranks after `placed`).
    """

    def __init__(self, hosts, max_np, min_np, cooldown, reset_limit, elastic_timeout):
        self.listed = dict(hosts)
        self.order = sorted(self.listed)
        self.blacklisted = set()
        self.max_np, self.min_np = max_np, min_np
        self.cooldown, self.reset_limit = cooldown, reset_limit
        self.elastic_timeout = elastic_timeout
        self.resets = [0, 0]  # lowest, highest count of generations after the first so far
        self.ended = None  # None, or (outcome, message regex)
        self.fail_cause = ''  # --reset-limit: the cause the failure names, when certain
        self.fresh_start = False
        self.held = False  # the last change may hold the survivors
        self.certain_join = 0  # the last change's hold certainly ends with a join
        self.joiners = 0
        self.first_cause = ''
        self.max_slots = dict(self.listed)
        self.placed = [Worker(h, s) for h, s in self._free([])]
        self.pending = []
        self.first_generation = self.hosts_by_rank()

    def hosts_by_rank(self):
        return [w.host for w in self.placed]

    def can_go_on(self):
        """Events after this point still have a certain victim."""
        return not self.ended and not self.fresh_start and bool(self.placed)

    def _usable(self):
        return [h for h in self.order if h in self.listed and h not in self.blacklisted]

    def _free(self, occupied, hosts=None):
        """Free slots of `hosts` (default: the usable ones) in host order, up to --max-np with
        `occupied`."""
        taken = {(w.host, w.slot) for w in occupied}
        free = [(h, s) for h in (self._usable() if hosts is None else hosts)
                for s in range(self.listed[h]) if (h, s) not in taken]
        return free[:max(0, self.max_np - len(occupied))]

    def _count(self, certain, possible, cause=''):
        """Generations published: `certain` of them for sure, `possible` at most."""
        lo, hi = self.resets
        self.resets = [lo + certain, hi + possible]
        limit = self.reset_limit
        if limit is not None and not (self.ended and self.ended[0] == 'fail' and
                                      self.ended[1].startswith('reset limit')) and \
                lo + certain > limit:
            self.ended = ('fail', f'reset limit {limit} reached \\(--reset-limit\\); the next '
                          'reset was due to: ')
            if lo == hi == limit and cause:
                self.fail_cause = cause  # the change's own generation is the one refused

    def _replan(self, cause, published, certain=True):
        """After a change: survivors `placed`, joiners `pending`; `published`: the engine
        publishes a generation for the change itself (a loss, a release); `certain`: in one of
        its own (not merged with another change chorusrun learns of in the same decision)."""
        cooling = sorted(self.blacklisted) if self.cooldown else []
        self.pending = [w for w in self.pending if w.host in self._usable()]
        occupied = self.placed + self.pending
        free = self._free(occupied)
        # The blacklisted hosts come back after their cooldown, with joiners.
        later = self._free(occupied + [Worker(h, s) for h, s in free],
                           [h for h in self.order if h in cooling and h in self.listed])
        available = len(occupied) + len(free) + len(later)
        survivors, pending, joins = len(self.placed), len(self.pending), len(free) + len(later)
        self.held = published and survivors < self.min_np
        if available < self.min_np:
            if not occupied and not self.cooldown and self.listed and all(
                    h in self.blacklisted for h in self.listed):
                self.ended = ('fail', 'every host is blacklisted \\(' +
                              ', '.join(sorted(self.listed)) + '\\) after its workers failed; '
                              'no worker is left')
            else:
                self.ended = ('fail', f'fewer than --min-np={self.min_np} slots for longer '
                              f'than --elastic-timeout={self.elastic_timeout} s \\({available} '
                              'available after generation \\d+\\)')
            # The survivors are held first (a generation on hold), unless none is left.
            self._count(1 if survivors and certain else 0, 1 if occupied else 0, cause)
            return
        self.joiners += joins
        if survivors:
            # The change's generation (on hold when too few), then the joins; a hold that no
            # joiner started earlier can end ends with a join for certain.
            certain_join = 1 if self.held and survivors + pending < self.min_np else 0
            self.certain_join = certain_join
            self._count((1 if published and certain else 0) + certain_join,
                        (1 if published else 0) + pending + joins, cause)
        elif published or pending:
            # No survivor certain: joiners that joined already are survivors, otherwise a fresh
            # start (the pending joiners are placed in it with new workers).
            self.fresh_start = True
            self._count(1 if certain else 0, 1 + pending + joins, cause)
        self.pending += [Worker(h, s) for h, s in free + later]
        for h in cooling:
            self.blacklisted.discard(h)

    def settle(self):
        """Before an event at a step: the job trains only with --min-np workers or more, so a
        hold whose joiners are just enough to end it has ended with all of them placed (after
        the survivors, in the order they were started)."""
        needed = self.min_np - len(self.placed)
        if self.pending and needed == len(self.pending):
            self.placed += self.pending
            self.pending = []

    def lose(self, rank, kind, in_reset=False):
        """The worker of `rank` (certain: below len(placed)) ends by `kind`; returns its host.
        `in_reset`: the phase of a loss that strikes while the others re-form after another
        loss, which chorusrun may learn of in the same decision (one generation for both)."""
        if in_reset == 'reset_begin':
            # Before its reset ends: the join that was to end a hold may never come.
            self.resets[0] -= self.certain_join
        victim = self.placed[rank]
        cause = f'rank {rank} on {victim.host} {how(kind)}'
        if blacklists(kind):
            cause += f'; {victim.host} blacklisted'
            self.blacklisted.add(victim.host)
        if self.resets == [0, 0] and not self.first_cause:
            self.first_cause = cause
        self.placed = [w for i, w in enumerate(self.placed)
                       if i != rank and w.host not in self.blacklisted]
        self.certain_join = 0
        self._replan(cause, published=True, certain=not in_reset)
        return victim.host

    def change_hosts(self, hosts):
        """Discovery answers `hosts` from now on; returns whether placed workers were released
        (the job re-forms without them)."""
        self.listed = dict(hosts)
        for h, s in hosts:
            self.max_slots[h] = max(self.max_slots.get(h, 0), s)
        self.order = [h for h in self.order if h in self.listed] + sorted(
            h for h in self.listed if h not in self.order)
        def stays(w):
            return w.host in self.listed and w.slot < self.listed[w.host]

        kept = [w for w in self.placed if stays(w)]
        released = len(kept) < len(self.placed)
        # A joiner that may have joined already is released in a generation of its own, when
        # none of the placed workers is.
        maybe_released = not released and any(not stays(w) for w in self.pending)
        self.placed = kept
        self.certain_join = 0
        # A release takes effect at the workers' next commit, and discovery sees the change
        # within an interval: a loss soon after may share its generation.
        self._replan('', published=released, certain=False)
        if maybe_released and not self.ended:
            self.resets[1] += 1
        return released

    def exit0(self):
        self.ended = ('exit0', '')

    def expectation(self):
        outcome, message = self.ended or ('ok', '')
        return Expectation(outcome=outcome, message=message, fail_cause=self.fail_cause,
                           first_generation=self.first_generation,
                           first_cause=self.first_cause, resets=tuple(self.resets),
                           joiners=self.joiners, fresh_start=self.fresh_start,
                           max_slots=dict(self.max_slots))


def draw(seed, names):
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
    spawn_child = rnd.random() < 0.3

    model = PolicyModel(hosts, max_np, min_np, cooldown, None, JOIN_TIMEOUT_S)
    events = []
    n_events = rnd.choices([0, 1, 2], weights=[1, 10, 7])[0]
    last_step = epochs * (samples // (12 * max_np)) - 3
    step = 1
    for i in range(n_events):
        first = step + 2 if i == 0 else step + 6  # the earliest step this event may strike at
        if not model.can_go_on() or max(first, step + 4) > last_step:
            break
        step = rnd.randint(first, min(last_step, step + 14))
        kinds = ['kill'] * 3 + ['stop'] * 2 + ['term'] * 2 + ['raise'] * 2 + ['exit0']
        kinds += ['ext_kill', 'ext_stop', 'ext_term', 'remove_host']
        if reserve and reserve[0] not in model.listed:
            kinds += ['add_host'] * 2
        kind = rnd.choice(kinds)
        model.settle()
        size = len(model.placed)
        rank = 0 if rnd.random() < 0.35 else rnd.randint(0, size - 1)
        eid = f'e{len(events)}'
        if kind in HOST_KINDS:
            if kind == 'add_host':
                listed = list(model.listed.items()) + [reserve]
            else:
                gone = rnd.choice(sorted(model.listed))
                listed = [(h, s) for h, s in model.listed.items() if h != gone]
            text = ''.join(f'{h}:{s}\n' for h, s in listed)
            event = Event(eid, kind, 'step', rank, step=step, hosts=text,
                          host=model.placed[rank].host)
            events.append(event)
            event.resets = model.change_hosts(listed) and not model.ended
            event.held, event.fresh = model.held, model.fresh_start
            continue
        phase = 'soak' if kind in SOAK_KINDS else 'step'
        event = Event(eid, kind, phase, rank, step=step, host=model.placed[rank].host)
        events.append(event)
        if kind == 'exit0':
            event.resets = False
            model.exit0()
            break
        before = list(model.placed)
        model.lose(rank, kind)
        event.resets = not model.ended
        event.held, event.fresh = model.held, model.fresh_start
        if phase == 'soak':
            step += 4  # the soak acts a little after the step
        # Sometimes a second event while the others re-form: a survivor strikes, before it
        # adopts the next generation (by its old rank) or once the new world is formed (by its
        # new rank, before the sync).
        survivors = [r for r in range(len(before)) if r != rank and before[r] in model.placed]
        if not model.can_go_on() or not survivors or rnd.random() > 0.3:
            continue
        old = rnd.choice(survivors)
        new = model.placed.index(before[old])
        phase = rnd.choice(['reset_begin', 'reset_end'])
        second = Event(f'e{len(events)}', rnd.choice(RESET_KINDS), phase,
                       old if phase == 'reset_begin' else new, after=eid, host=before[old].host,
                       model_rank=new)
        events.append(second)
        model.lose(new, second.kind, in_reset=phase)
        second.resets = not model.ended
        second.held, second.fresh = model.held, model.fresh_start
        break

    # --reset-limit: sometimes enough for every generation the schedule can bring, sometimes
    # certainly too few at a known event; never in between (whether joiners join apart is up to
    # timing).
    reset_limit = None
    if not cooldown and reset_limit_draw < 0.3:
        reset_limit = pick_reset_limit(rnd, hosts, max_np, min_np, events)
    model = PolicyModel(hosts, max_np, min_np, cooldown, reset_limit, JOIN_TIMEOUT_S)
    replay_events(model, events)
    timeout = JOIN_TIMEOUT_S
    if model.ended and model.ended[1].startswith('fewer than') and not model.joiners:
        # The job is to fail for want of slots, and no joiner has to start before: it waits
        # that long.
        timeout = FAIL_TIMEOUT_S
        model = PolicyModel(hosts, max_np, min_np, cooldown, reset_limit, timeout)
        replay_events(model, events)
    return Schedule(seed=seed, hosts=hosts, reserve=reserve, max_np=max_np, min_np=min_np,
                    elastic_timeout=timeout, cooldown=cooldown, reset_limit=reset_limit,
                    epochs=epochs, samples=samples, commit_every=commit_every, hidden=hidden,
                    step_seconds=0.02, slow_step_seconds=0.2, spawn_child=spawn_child,
                    events=events, expect=model.expectation())


def pick_reset_limit(rnd, hosts, max_np, min_np, events):
    """A --reset-limit whose effect is certain: at least the most generations the schedule can
    bring, or below the certain count at some event while no earlier one can reach it."""
    model = PolicyModel(hosts, max_np, min_np, None, None, JOIN_TIMEOUT_S)
    candidates = []
    for i, e in enumerate(events):
        if model.ended:
            break
        if e.phase in ('reset_begin', 'reset_end'):
            continue  # played with the event it strikes after
        hi_before = model.resets[1]
        # An event with a second one in its reset: the two together.
        replay_events(model, [e] + [x for x in events[i + 1:i + 2] if x.after == e.id])
        # K >= hi_before: nothing fails before this event; K < the certain count after it: its
        # generations certainly pass K.
        candidates += list(range(hi_before, model.resets[0]))
    if candidates and rnd.random() < 0.6:
        return rnd.choice(candidates)
    return model.resets[1] + rnd.choice([0, 0, 2])


def replay_events(model, events):
    """Plays `events` on `model` (drawn over an equal model, maybe with another --reset-limit or
    --elastic-timeout); those due after a certain end are marked as not certain to strike, and
    so are events in a reset the job may not live to see."""
    for e in events:
        if model.ended:
            e.must_strike = False
            if e.phase == 'reset_begin':
                # The survivors begin their reset when their collectives fail, which can be
                # before chorusrun sees the victim's exit (a worker that raised exits only once
                # its interpreter has unwound): a loss there may be the one the failure names.
                model.fail_cause = ''
            continue
        e.must_strike = e.phase in ('step', 'soak')
        if e.must_strike:
            model.settle()
        if e.kind in HOST_KINDS:
            model.change_hosts([(line.split(':')[0], int(line.split(':')[1]))
                                for line in e.hosts.splitlines()])
        elif e.kind == 'exit0':
            model.exit0()
        else:
            in_reset = e.phase if e.phase in ('reset_begin', 'reset_end') else False
            model.lose(e.model_rank if in_reset else e.rank, e.kind, in_reset)


