#!/usr/bin/python3
"""A generated fault soak of chorusrun's elastic mode: for each seed, a schedule of events over
a real chorus.torch elastic job, and the invariants the job must keep.

Each seed draws (test/elastic/soak_schedule.py) a job of 2-4 workers (--max-np) over 2-4 host
names of this machine (localhost, 127.0.0.1, this hostname, and case variants of them: each is a
host of its own for chorusrun, all run here) with 1-2 slots each, a --min-np, sometimes a
--reset-limit or a --blacklist-cooldown-range, and 0-2 events at given training steps: a worker
SIGKILLs, SIGSTOPs or SIGTERMs itself, raises an exception in its training step or exits 0; the
soak sends SIGKILL, SIGSTOP or SIGTERM to a worker's pid from outside (landing anywhere in a
step); a worker rewrites the discovery file to add a host or remove one; and sometimes a second
event strikes while the others re-form (before adopting the next generation, or before the
state sync). The victim is rank 0 or another; slots may be spare or not; --min-np may stay
reachable after the event or not. The training script is test/elastic/soak_train.py; while a
joining worker starts, the soak slows its steps (its --pace-file), so that the joiner joins
while the job still trains.

The policy (elastic/next_generation.h): a lost worker's survivors go on at once; free slots get
joining workers that join in a later generation once they have started; survivors below
--min-np are held until joiners arrive; none left: the next generation starts afresh. How fast
a joiner starts decides generation numbers and when the world grows back, so the soak checks
invariants rather than one exact sequence (test/elastic/soak_checks.py):
  - the job ends within a bound computed from the schedule (worker starts, training, per event
    the heartbeat, discovery interval, a start of the joiners it brings, the blacklist
    cooldown, the elastic timeout, the grace period), and without a stall: no step, world
    formed or fault for longer than the longest legitimate pause (a start of workers after a
    heartbeat's silence; the elastic timeout where the job is to fail) plus 15 s. On an overrun
    or a stall every process of the job is killed and the violation says what was seen
    (chorusrun's CPU over the last 2 s, its state, whether it obeyed SIGTERM, gdb backtraces of
    every process in the kept logs);
  - status 0, or the documented failure (status 1 and "chorusrun: elastic job failed: ...":
    fewer than --min-np for --elastic-timeout, naming the slots available, every host
    blacklisted, naming them, or the reset limit, naming the refused reset's cause where
    certain) when the schedule makes the job unable to go on;
  - the reset lines: numbered one by one, each size following on the last, never above
    --max-np, on hold exactly when below --min-np, joiners on the last ranks, each loss named
    with the right rank's host, how it ended and whether its host was blacklisted, matching a
    fault that struck (and, once the job trained to the end, every fault named); the first
    event's cause exactly; as many generations as the schedule can bring (exactly K when
    --reset-limit K ended the job); no joining worker lost;
  - the worlds formed: the first one's hosts by rank as predicted; each one's size as its line
    says, every rank once, never one on hold; survivors keep the lowest ranks in their old
    order with newcomers after them; no host over its slots, none used after it was
    blacklisted (no cooldown) or removed; every joiner that called chorus init while the job
    kept training for 8 s more has joined;
  - every kept step trained exactly once: per epoch, over the lineage of states (work after the
    last commit of a failed generation is redone, and only that; a fresh start begins the
    lineage again at step 0 with the initial parameters), every sample once;
  - replicas bit-identical after every step and at the end; a generation resumes from a state
    the job really had; the state's plain attributes agree with the model after every sync;
  - no exception but the scheduled ones;
  - no process of the job (workers, their children, discovery scripts) left once chorusrun
    has exited (looked up in /proc by a variable only this run's processes carry);
  - chorusrun's CPU (utime + stime from /proc) over every 2 s window stays below --cpu-limit
    (15% of a core);
  - a step finishes after each loss in a later generation, where the job goes on; the outage
    (from the fault to that step) is reported, and with --outage-limit S checked: below S
    (the survivors go on at once; 6 s suits an idle 2-core machine), plus the heartbeat for
    SIGSTOP and a start of the joiners where the survivors may be held for them or start
    afresh. Not checked by default: a wall-clock time on a loaded machine is no invariant.

Usage: PYTHONPATH=build/python scripts/elastic_soak.py --seeds 0-239 [--jobs N]
       [--chorusrun build/launcher/chorusrun] [--keep-logs DIR] [--discovery-interval 0.05]
Prints one line per seed (seed, the schedule, the outcome, the violations) and a summary (runs,
violations, p50/p99/max outage by fault kind, chorusrun's peak CPU). Exit status 1 when any run
broke an invariant.
"""

import argparse
import concurrent.futures
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, 'test', 'elastic'))

import soak_checks  # noqa: E402
from discovery_file import DiscoveryFile  # noqa: E402
import soak_schedule  # noqa: E402

TRAIN = os.path.join(ROOT, 'test', 'elastic', 'soak_train.py')
# One start of the workers here (import torch, init, the first sync), on a busy 2-core machine,
# and what a step costs beyond the schedule's own sleep: the bound's units.
START_S = 12.0
STEP_S = 0.05
CPU_WINDOW_S = 2.0
# No step, formation or fault logged for this long while the job runs is a stall: the longest
# legitimate pauses are a start of workers (the first, or joiners the survivors are held for)
# after a worker silent for the heartbeat, or (where the job is to fail for want of slots) the
# elastic timeout and the grace periods; plus a margin. Tight enough to catch a stall of 60 s.
STALL_MARGIN_S = 15.0
# From a worker's exit 0 to chorusrun's end: the grace period, the stop and a margin.
EXIT0_LIMIT_S = soak_schedule.GRACE_S + 7
SOAK_VAR = 'CHORUS_SOAK_RUN'
CLK_TCK = os.sysconf('SC_CLK_TCK')
print_lock = threading.Lock()


def parse_seeds(text):
    seeds = []
    for part in text.split(','):
        a, _, b = part.partition('-')
        seeds.extend(range(int(a), int(b or a) + 1))
    return seeds


def cpu_seconds(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def proc_state(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            state = f.read().rsplit(')', 1)[1].split()[0]
        with open(f'/proc/{pid}/wchan') as f:
            return f'{state}, wchan {f.read() or "-"}'
    except OSError:
        return 'gone'


def run_processes(run_id):
    """[(pid, state, command line)] of the processes carrying this run's variable."""
    tag = f'{SOAK_VAR}={run_id}'.encode()
    found = []
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open(f'/proc/{name}/environ', 'rb') as f:
                if tag not in f.read().split(b'\0'):
                    continue
            with open(f'/proc/{name}/cmdline', 'rb') as f:
                cmd = f.read().replace(b'\0', b' ').decode(errors='replace').strip()
            found.append((int(name), proc_state(int(name)).split(',')[0], cmd[:120]))
        except OSError:
            continue
    return found


# The libraries whose symbols gdb loads for a backtrace (all of them: seconds per process with
# PyTorch loaded; these: half a second).
GDB_LIBRARIES = ('libc\\.so', 'libstdc', 'libpython', 'libchorus', '_C\\.', 'libuc', 'libgrpc',
                 'libabsl')


def backtraces(pids, path):
    """Appends gdb's backtraces of every thread of `pids` to `path`."""
    gdb = ['gdb', '-batch', '-iex', 'set auto-solib-add off']
    for lib in GDB_LIBRARIES:
        gdb += ['-ex', f'sharedlibrary {lib}']
    gdb += ['-ex', 'thread apply all bt 25']
    with open(path, 'a') as f:
        for pid in pids:
            try:
                out = subprocess.run(gdb + ['-p', str(pid)], capture_output=True, text=True,
                                     timeout=60).stdout
            except (OSError, subprocess.TimeoutExpired) as e:
                out = f'gdb: {e}'
            f.write(f'===== pid {pid}\n{out}\n')


def main_thread_frames(gdb_text, pid):
    """The function names of the main thread (thread 1) of `pid` in backtraces() output."""
    part = gdb_text.split(f'===== pid {pid}\n', 1)[-1].split('===== pid', 1)[0]
    thread1 = part.split('\nThread 1 ', 1)[-1]
    return re.findall(r'#\d+ +(?:0x[0-9a-f]+ in )?([^\s(]+)', thread1)


def kill_all(run_id):
    for pid, _, _ in run_processes(run_id):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class LogTail:
    """Reads the workers' JSON-lines logs as they grow."""

    def __init__(self, directory):
        self.dir = directory
        self.offsets = {}
        self.partial = {}
        self.records = []

    def read(self):
        for name in sorted(os.listdir(self.dir)):
            path = os.path.join(self.dir, name)
            with open(path, 'rb') as f:
                f.seek(self.offsets.get(name, 0))
                data = self.partial.get(name, b'') + f.read()
                self.offsets[name] = f.tell()
            lines = data.split(b'\n')
            self.partial[name] = lines.pop()
            self.records.extend(json.loads(line) for line in lines if line.strip())


class Run:
    """One seed's job: started, watched, ended, checked."""

    def __init__(self, schedule, opts):
        self.s = schedule
        self.opts = opts
        self.dir = tempfile.mkdtemp(prefix=f'elastic_soak_{schedule.seed}_')
        self.run_id = f'{schedule.seed}-{secrets.token_hex(6)}'
        self.logs = self.path('logs')
        self.markers = self.path('markers')
        os.mkdir(self.logs)
        os.mkdir(self.markers)
        self.bound = schedule.bound(opts.discovery_interval, START_S, STEP_S)
        self.pace_file = self.path('slow')
        self.stall_limit = START_S + soak_schedule.HEARTBEAT_S + STALL_MARGIN_S
        if schedule.expect.outcome == 'fail':
            self.stall_limit = max(self.stall_limit, schedule.elastic_timeout +
                                   2 * soak_schedule.GRACE_S + STALL_MARGIN_S)
        self.cut_short = False  # the soak ended the job (overrun or stall)
        self.violations = []
        self.notes = []
        self.soak_faults = []  # the events the soak delivered itself
        self.cpu = []  # (time, chorusrun's cpu seconds)
        self.status = None
        self.elapsed = None

    def path(self, name):
        return os.path.join(self.dir, name)

    def command(self):
        s = self.s
        discovery = DiscoveryFile(self.dir, s.hosts_text())
        with open(self.path('plan.json'), 'w') as f:
            f.write(s.plan(self.markers, discovery.hosts))
        argv = [self.opts.chorusrun, '-np', str(s.max_np), '--min-np', str(s.min_np),
                '--max-np', str(s.max_np), '--host-discovery-script', discovery.script,
                '--elastic-timeout', str(s.elastic_timeout)]
        if s.reset_limit is not None:
            argv += ['--reset-limit', str(s.reset_limit)]
        if s.cooldown:
            argv += ['--blacklist-cooldown-range', str(s.cooldown[0]), str(s.cooldown[1])]
        argv += [self.opts.python, TRAIN, '--log-dir', self.logs, '--plan',
                 self.path('plan.json'), '--epochs', str(s.epochs), '--samples', str(s.samples),
                 '--commit-every', str(s.commit_every), '--hidden', str(s.hidden),
                 '--step-seconds', str(s.step_seconds), '--slow-step-seconds',
                 str(s.slow_step_seconds), '--pace-file', self.pace_file,
                 '--give-up', str(int(self.bound) + 120)]
        if s.spawn_child:
            argv.append('--spawn-child')
        return argv

    def deliver(self, tail, pending):
        """Sends the soak's own events once their step is done in the newest generation."""
        formed = soak_checks.by_generation(tail.records, 'formed')
        if not formed:
            return
        g = max(formed)
        done = [r['step'] for r in tail.records if r['ev'] == 'done' and r['gen'] == g]
        for e in list(pending):
            if not done or max(done) < e.step:
                continue
            pids = {r['rank']: r['pid'] for r in formed[g]}
            if e.rank not in pids:
                continue
            sig = getattr(signal, soak_schedule.SIGNAL_OF[e.kind])
            host = next(r['host'] for r in formed[g] if r['rank'] == e.rank)
            self.soak_faults.append(dict(t=time.time(), gen=g, label=f'{e.id}:{e.kind}',
                                         pid=pids[e.rank], rank=e.rank, id=e.id, kind=e.kind,
                                         host=host))
            open(os.path.join(self.markers, e.id), 'w').close()
            try:
                os.kill(pids[e.rank], sig)
            except ProcessLookupError:
                self.notes.append(f'{e.id}: pid {pids[e.rank]} was gone already')
            pending.remove(e)

    def pace(self, tail):
        """The slow pace (soak_train.py's --pace-file) while a joining worker is starting: one
        started (generation -1), alive, and not yet in a formed world."""
        formed = {r['pid'] for r in tail.records if r['ev'] == 'formed'}
        starting = [r['pid'] for r in tail.records if r['ev'] == 'start' and r['gen'] == -1
                    and r['pid'] not in formed and proc_state(r['pid'])[0] not in 'gZX']
        if starting and not os.path.exists(self.pace_file):
            open(self.pace_file, 'w').close()
        elif not starting and os.path.exists(self.pace_file):
            os.unlink(self.pace_file)

    def overrun(self, proc, what):
        """Ends a job that overran its bound or stalled (`what`), saying what it was doing."""
        self.cut_short = True
        recent = [(t, c) for t, c in self.cpu if t >= self.cpu[-1][0] - CPU_WINDOW_S]
        rate = ((recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0])
                if len(recent) > 1 and recent[-1][0] > recent[0][0] else float('nan'))
        state = proc_state(proc.pid)
        workers = run_processes(self.run_id)
        backtraces([proc.pid] + [p for p, _, _ in workers], self.path('overrun.gdb.txt'))
        with open(self.path('overrun.gdb.txt')) as f:
            frames = main_thread_frames(f.read(), proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=3)
            obeyed = f'it ended on SIGTERM (status {proc.returncode})'
        except subprocess.TimeoutExpired:
            obeyed = 'it ignored SIGTERM for 3 s and was killed'
            proc.kill()
            proc.wait()
        kill_all(self.run_id)
        with open(self.path('stderr')) as f:
            last = f.read().strip().splitlines()[-1:] or ['']
        self.violations.append(
            f'{what}: chorusrun at {rate:.0%} of a core over '
            f'the last {CPU_WINDOW_S:g} s, state {state}; {obeyed}; job processes then: '
            f'{[(p, st) for p, st, _ in workers]}; last stderr line {last[0]!r}; '
            f'chorusrun\'s main thread: {" < ".join(frames[:6]) or "-"} (every stack: '
            f'overrun.gdb.txt)')

    def execute(self):
        argv = self.command()
        env = dict(os.environ, CHORUS_ELASTIC_DISCOVERY_INTERVAL=str(
            self.opts.discovery_interval))
        env[SOAK_VAR] = self.run_id
        # The workers run in the run's directory: PYTHONPATH made absolute (default: the build's
        # package next to chorusrun).
        default = os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(self.opts.chorusrun))), 'python')
        env['PYTHONPATH'] = os.pathsep.join(
            os.path.abspath(p) for p in (env.get('PYTHONPATH') or default).split(os.pathsep))
        pending = [e for e in self.s.events if e.phase == 'soak']
        tail = LogTail(self.logs)
        t0 = time.time()
        with open(self.path('stdout'), 'w') as out, open(self.path('stderr'), 'w') as err:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    env=env, cwd=self.dir)
            progress, seen = t0, 0
            while True:
                now = time.time()
                cpu = cpu_seconds(proc.pid)
                if cpu is not None and proc.poll() is None:
                    self.cpu.append((now, cpu))
                tail.read()
                self.deliver(tail, pending)
                self.pace(tail)
                for r in tail.records[seen:]:
                    if r['ev'] in ('done', 'formed', 'fault'):
                        progress = max(progress, r['t'])
                seen = len(tail.records)
                if proc.poll() is not None:
                    break
                if now - t0 > self.bound:
                    self.overrun(proc, f'overran its bound of {self.bound:.0f} s')
                    break
                if now - progress > self.stall_limit:
                    self.overrun(proc, f'stalled: no step, world formed or fault for '
                                 f'{now - progress:.0f} s (limit {self.stall_limit:.0f} s)')
                    break
                time.sleep(0.05)
        self.ended_at = time.time()
        self.elapsed = self.ended_at - t0
        self.status = proc.returncode
        if not self.cut_short:
            self.check_leftovers()
        tail.read()
        self.records = tail.records
        for e in pending:
            self.notes.append(f'{e.id} ({e.kind}) was never delivered')

    def check_leftovers(self):
        give_up = time.time() + 1.0
        while True:
            left = run_processes(self.run_id)
            if not left:
                return
            if time.time() > give_up:
                self.violations.append(f'processes left after chorusrun exited: {left}')
                kill_all(self.run_id)
                return
            time.sleep(0.05)

    def check(self):
        s, records = self.s, self.records
        with open(self.path('stderr')) as f:
            stderr_lines = f.read().splitlines()
        v = self.violations
        # The losses struck: by a worker on itself, or by the soak.
        faults = [dict(id=r['id'], kind=r['kind'], host=r['host']) for r in records
                  if r['ev'] == 'fault' and r['kind'] in soak_schedule.LOSS_KINDS]
        faults += [dict(id=f['id'], kind=f['kind'], host=f['host']) for f in self.soak_faults]
        v += soak_checks.check_outcome(s.expect, self.status, stderr_lines, records, s.epochs)
        if not self.cut_short:
            v += soak_checks.check_resets(s, stderr_lines, faults, self.status)
            v += soak_checks.check_joiners(records, stderr_lines)
        v += soak_checks.check_generations(s, records, stderr_lines)
        v += soak_checks.check_lineage(records, s.expect, s.samples, s.epochs, self.status)
        v += soak_checks.check_state_agreement(records)
        v += soak_checks.check_exceptions(records, s)
        struck = {r['id'] for r in records if r['ev'] == 'fault'}
        struck |= {f['id'] for f in self.soak_faults}
        for e in s.events:
            if e.id in struck:
                continue
            if e.must_strike:
                v.append(f'event {e.describe()} never struck')
            else:
                self.notes.append(f'{e.describe()} never struck')
        late = [line for line in stderr_lines if ' did not start chorus within ' in line]
        if late:
            self.notes.append(f'{len(late)} joining worker(s) stopped for starting late')
        busy = [r['t'] for r in records if r['ev'] == 'done']
        self.cpu_max, self.cpu_idle_max, cv = soak_checks.check_cpu(
            self.cpu, CPU_WINDOW_S, self.opts.cpu_limit, busy)
        v += cv
        # A worker's exit 0 ends the job: the others get the grace period, then are stopped.
        exits = [r['t'] for r in records if r['ev'] == 'fault' and r['kind'] == 'exit0']
        if exits and self.status is not None and self.ended_at - exits[0] > EXIT0_LIMIT_S:
            v.append(f'chorusrun ended {self.ended_at - exits[0]:.1f} s after a worker exited 0 '
                     f'(the others get {soak_schedule.GRACE_S:g} s; limit {EXIT0_LIMIT_S:g} s)')
        # Outages of the events after which the job re-forms.
        resets = {e.id for e in s.events if e.resets}
        faults = [dict(t=r['t'], gen=r['gen'], label=f'{r["id"]}:{r["kind"]}')
                  for r in records if r['ev'] == 'fault' and r['id'] in resets]
        faults += [f for f in self.soak_faults if f['label'].split(':')[0] in resets]
        self.outages = soak_checks.outages(records, sorted(faults, key=lambda f: f['t']))
        events = {e.id: e for e in s.events}
        for f, seconds in self.outages:
            e = events[f['label'].split(':')[0]]
            if seconds is None and self.status == 0 and s.expect.outcome == 'ok':
                v.append(f'{f["label"]}: no step finished after it')
            if seconds is None or self.opts.outage_limit is None:
                continue
            limit = self.opts.outage_limit + (soak_schedule.HEARTBEAT_S if 'stop' in e.kind else 0)
            limit += START_S if e.held or e.fresh else 0
            if seconds > limit:
                v.append(f'{f["label"]}: outage of {seconds:.1f} s (limit {limit:.0f} s)')
        self.records = None  # the logs stay on disk

    def line(self):
        outs = ' '.join(f'{f["label"].split(":")[1]}={x:.2f}s' if x is not None else
                        f'{f["label"].split(":")[1]}=-' for f, x in self.outages)
        head = (f'seed {self.s.seed}: {self.s.describe()} | status {self.status} in '
                f'{self.elapsed:.1f}s (bound {self.bound:.0f}s) | outage {outs or "-"} | '
                f'cpu max {self.cpu_max:.0%}')
        if self.notes:
            head += ' | notes: ' + '; '.join(self.notes)
        if not self.violations:
            return head + ' | OK'
        return head + ' | VIOLATIONS:\n' + '\n'.join(f'    - {x}' for x in self.violations)


def run_seed(seed, opts, names):
    schedule = soak_schedule.draw(seed, names)
    run = Run(schedule, opts)
    try:
        run.execute()
        run.check()
    finally:
        kill_all(run.run_id)
        if opts.keep_logs:
            shutil.copytree(run.dir, os.path.join(opts.keep_logs, f'seed-{seed}'),
                            dirs_exist_ok=True)
        shutil.rmtree(run.dir, ignore_errors=True)
    with print_lock:
        print(run.line(), flush=True)
    return run


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float('nan')
    k = (len(values) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seeds', default='0-19', help='A-B, or a comma-separated list of them')
    parser.add_argument('--jobs', type=int, default=1,
                        help='runs at a time (each runs 2-4 workers: 1 on a 2-core machine)')
    parser.add_argument('--chorusrun', default=os.path.join(ROOT, 'build', 'launcher',
                                                            'chorusrun'))
    parser.add_argument('--python', default=sys.executable, help="the workers' interpreter")
    parser.add_argument('--keep-logs', help='copy every run\'s directory to DIR/seed-N')
    parser.add_argument('--discovery-interval', type=float, default=0.05,
                        help='CHORUS_ELASTIC_DISCOVERY_INTERVAL, seconds')
    # Waiting, chorusrun sleeps: a few % of a core over 2 s here (forking the discovery script
    # every 50 ms, serving the workers' long polls); the limit leaves a margin for a busy machine.
    parser.add_argument('--cpu-limit', type=float, default=0.15,
                        help="chorusrun's highest CPU share over any 2 s window (cores)")
    parser.add_argument('--outage-limit', type=float, default=None, metavar='S',
                        help='fail a run whose outage after a loss exceeds S seconds (plus the '
                        'heartbeat for SIGSTOP and a start where joiners are awaited); default: '
                        'outages are reported, not checked')
    parser.add_argument('--print-schedules', action='store_true',
                        help='print the schedules of the seeds and exit')
    opts = parser.parse_args()
    names = soak_schedule.local_host_names(socket.gethostname())
    seeds = parse_seeds(opts.seeds)
    if opts.print_schedules:
        for seed in seeds:
            print(f'seed {seed}: {soak_schedule.draw(seed, names).describe()}')
        return 0
    if opts.keep_logs:
        os.makedirs(opts.keep_logs, exist_ok=True)
    started = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        runs = list(pool.map(lambda seed: run_seed(seed, opts, names), seeds))
    outages = [x for r in runs for _, x in r.outages if x is not None]
    bad = [r for r in runs if r.violations]
    print(f'\n{len(runs)} runs in {time.time() - started:.0f} s, {len(bad)} with violations '
          f'({sum(len(r.violations) for r in runs)} in all)' +
          (f': seeds {[r.s.seed for r in bad]}' if bad else ''))
    if outages:
        print(f'outage over {len(outages)} faults: p50 {percentile(outages, 50):.2f} s, '
              f'p99 {percentile(outages, 99):.2f} s, max {max(outages):.2f} s')
        kinds = {}
        for r in runs:
            for f, x in r.outages:
                if x is not None:
                    kinds.setdefault(f['label'].split(':')[1], []).append(x)
        for k, xs in sorted(kinds.items()):
            print(f'  {k}: p50 {percentile(xs, 50):.2f} s, p99 {percentile(xs, 99):.2f} s, '
                  f'max {max(xs):.2f} s (n={len(xs)})')
    print(f"chorusrun's CPU over {CPU_WINDOW_S:g} s windows: max {max(r.cpu_max for r in runs):.0%}"
          f', while no step ran {max(r.cpu_idle_max for r in runs):.0%}')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
