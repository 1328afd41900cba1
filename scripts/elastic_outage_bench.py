#!/usr/bin/python3
"""The outage of a training job when one of its workers dies: torchrun against chorus's elastic
mode, side by side in the same run, on this machine.

Every job runs scripts/elastic_outage_train.py (one small PyTorch training loop; its events are
time.time() stamps of each finished step and of each phase of a recovery). The bench waits for
rank 0 to finish step --kill-step, SIGKILLs one worker (rank 1, or rank 0: both variants), and
reads the events:

  outage      kill -> the last surviving rank's first finished step in the new world
  recomputed  steps done before the kill that the new world does again (they were after the
              last checkpoint / commit)

Variants (3 workers each; interleaved: repetition r runs every variant before r + 1):
  torchrun         torch.distributed.run --nnodes=1 --nproc_per_node=3 --max_restarts=3, gloo;
                   rank 0 checkpoints to a file every --commit-every steps, every worker loads it
                   at start. torchrun's defaults otherwise (it checks its workers every 5 s).
  torchrun-0.1s    the same with --monitor_interval 0.1: the restart itself, without the wait.
  chorus-spare     chorusrun -np 3 --min-np 2 --max-np 3, hosts 127.0.0.1:1 localhost:1 H:2 (H
                   this machine's name; ranks 0, 1, 2 in that order, chorusrun orders new hosts
                   by name): the lost worker's slot stays free and a joiner is started for it;
                   the survivors must go on without waiting for it.
  chorus-shrink    the same with H:1: no free slot, the survivors go on as 2.
Every worker has a host name of its own for the kills (a failed worker's host is blacklisted with
its other workers); all are this machine.

Phases (each ends when the last survivor reaches it; they add up to the outage):
  chorus:   detect (-> the pending collective failed), re-form (-> the state rolled back to the
            commit and the new world formed: the reset callback), sync (-> the state broadcast
            from the new rank 0 done), first step (-> the first step finished).
  torchrun: respawn (-> every new worker process started: torchrun noticed the loss, stopped
            the others and started new ones), import (-> torch imported), init (-> process
            group formed, checkpoint loaded, DDP built), first step.
With a spare, the joiner's later entry is a second, shorter pause (at a commit): "join pause"
(the survivors' last step before it -> their first step with the joiner) and when it happened.

A second part (--split-ranks) measures chorus's phases at N ranks (chorus-shrink: hosts
127.0.0.1:N-1 and localhost:1, rank N-1 killed, the one on localhost: chorusrun orders new hosts
by name; --min-np N-1).

Usage: scripts/elastic_outage_bench.py [--reps 3] [--variants ...] [--killed-ranks 1 0]
           [--split-ranks 2 4 8 16] [--split-reps 2] [--json FILE] [--chorusrun PATH]
PYTHONPATH must reach the chorus package (build/python). Prints one line per job, then the
tables and the ratios against the torchrun median. Exit status 1 when a job fails, times out, or
its numbers are not sane (a phase negative, recomputed outside [0, 2 x --commit-every], the new
world not resumed after a commit, the survivors not in one new world of the expected size); a
missed target is reported, not an error.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, 'elastic_outage_train.py')
TORCHRUN = os.path.join(HERE, 'torchrun_py311.py')
VARIANTS = ['torchrun', 'torchrun-0.1s', 'chorus-spare', 'chorus-shrink']
TARGET_RATIO = 0.25  # chorus outage / torchrun median
TARGET_S = 1.0  # chorus outage


class JobError(RuntimeError):
    pass


class Job:
    """One launcher run in a directory of its own: events, output, hosts, checkpoint."""

    def __init__(self, name, argv, timeout, hosts=None):
        """argv: '{dir}' stands for the job's directory. hosts: [(name, slots)] for a discovery
        script at {dir}/discover.sh."""
        self.name = name
        self.dir = tempfile.mkdtemp(prefix='outage_')
        if hosts:
            write_discovery(self.dir, hosts)
        self.events_path = os.path.join(self.dir, 'events')
        self.all = []
        self._pending = b''
        self._offset = 0
        env = dict(os.environ, OUTAGE_EVENTS=self.events_path)
        self.out = open(os.path.join(self.dir, 'output'), 'w')
        self.argv = [a.format(dir=self.dir) for a in argv]
        try:
            self.proc = subprocess.Popen(self.argv, stdout=self.out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
        except OSError as e:
            self.out.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise JobError(f'{name}: cannot start {self.argv[0]}: {e}')
        self.deadline = time.monotonic() + timeout

    def events(self):
        """Every complete event line so far (read incrementally)."""
        try:
            with open(self.events_path, 'rb') as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self.all
        self._offset += len(data)
        data = self._pending + data
        lines = data.split(b'\n')
        self._pending = lines.pop()
        self.all.extend(json.loads(line) for line in lines if line.strip())
        return self.all

    def output(self):
        with open(os.path.join(self.dir, 'output'), errors='replace') as f:
            return f.read()

    def wait(self, what, predicate, poll=0.002):
        while True:
            found = predicate(self.events())
            if found:
                return found
            if time.monotonic() > self.deadline:
                raise JobError(f'{self.name}: timed out waiting for {what}\n{self.output()}')
            if self.proc.poll() is not None:
                raise JobError(f'{self.name}: the job ended (status {self.proc.returncode}) '
                               f'before {what}\n{self.output()}')
            time.sleep(poll)

    def finish(self):
        """Waits for the job's end; its exit status must be 0."""
        try:
            status = self.proc.wait(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise JobError(f'{self.name}: did not end in time\n{self.output()}')
        if status != 0:
            raise JobError(f'{self.name}: exit status {status}\n{self.output()}')
        self.events()

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.out.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def write_discovery(job_dir, hosts):
    with open(os.path.join(job_dir, 'hosts'), 'w') as f:
        f.write(''.join(f'{h}:{n}\n' for h, n in hosts))
    script = os.path.join(job_dir, 'discover.sh')
    with open(script, 'w') as f:
        f.write(f'#!/bin/sh\ncat {job_dir}/hosts\n')
    os.chmod(script, 0o755)
    return script


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def train_args(args):
    return [TRAIN, '--steps', str(args.steps), '--commit-every', str(args.commit_every),
            '--step-time', str(args.step_time)]


def start_torchrun(args, monitor_interval):
    argv = [sys.executable, TORCHRUN, '--nnodes=1', '--nproc_per_node=3', '--max_restarts=3',
            '--master_addr=127.0.0.1', f'--master_port={free_port()}']
    if monitor_interval is not None:
        argv.append(f'--monitor_interval={monitor_interval}')
    argv += train_args(args) + ['--launcher', 'torchrun', '--checkpoint', '{dir}/checkpoint']
    return Job('torchrun', argv, args.job_timeout)


def start_chorus(args, n, hosts, min_np):
    argv = [args.chorusrun, '-np', str(n), '--min-np', str(min_np), '--max-np', str(n),
            '--host-discovery-script', '{dir}/discover.sh', sys.executable] + \
        train_args(args) + ['--launcher', 'chorus']
    return Job('chorus', argv, args.job_timeout, hosts)


def first_by(events, key):
    """{key(e): the earliest event} over `events`."""
    out = {}
    for e in sorted(events, key=lambda e: e['time']):
        out.setdefault(key(e), e)
    return out


def of(events, kind, **match):
    return [e for e in events if e['kind'] == kind and all(e.get(k) == v
                                                           for k, v in match.items())]


def phases(killed, stages):
    """[(name, seconds)] from the kill through `stages` [(name, end time)], each from the end of
    the one before."""
    out, before = [], killed
    for name, end in stages:
        out.append((name, end - before))
        before = end
    return out


def step_time(events, killed):
    """Rank 0's median step time (seconds) in the first world, before the kill."""
    times = sorted(e['time'] for e in of(events, 'step', rank=0, gen=0) if e['time'] < killed)
    return statistics.median(b - a for a, b in zip(times, times[1:]))


def analyze_torchrun(events, killed, old_gen):
    """The outage of a torchrun job whose generation `old_gen` lost a worker at `killed`."""
    new = old_gen + 1
    new_events = [e for e in events if e.get('gen') == new]
    first_steps = first_by(of(new_events, 'step'), lambda e: e['rank'])
    if sorted(first_steps) != [0, 1, 2]:
        raise JobError(f'torchrun: restart {new} has steps from ranks {sorted(first_steps)}')
    resumed = {e['step'] for e in of(new_events, 'ready')}
    if len(resumed) != 1:
        raise JobError(f'torchrun: the restarted ranks resumed after different steps {resumed}')
    last_old = max(e['step'] for e in of(events, 'step', gen=old_gen))
    latest = lambda kind: max(e['time'] for e in of(new_events, kind))  # noqa: E731
    split = phases(killed, [('respawn', latest('started')), ('import', latest('imported')),
                            ('init', latest('ready')),
                            ('first step', max(e['time'] for e in first_steps.values()))])
    return {'outage_s': sum(s for _, s in split), 'phases': dict(split),
            'step_s': step_time(events, killed), 'resumed_after': min(resumed),
            'recomputed': last_old - min(resumed), 'new_size': 3}


def analyze_chorus(events, killed, old_gen, survivors, spare):
    """The outage of a chorus job whose generation `old_gen` lost a worker at `killed`;
    `survivors`: their pids."""
    mine = [e for e in events if e['pid'] in survivors]
    after = [e for e in mine if e['time'] >= killed]
    steps_new = [e for e in of(mine, 'step') if e['gen'] > old_gen]
    new_gen = min(e['gen'] for e in steps_new)
    first_steps = first_by([e for e in steps_new if e['gen'] == new_gen], lambda e: e['pid'])
    ready = first_by(of(mine, 'ready', gen=new_gen), lambda e: e['pid'])
    failed = of(mine, 'failed', gen=old_gen)
    reformed = first_by(of(after, 'reformed'), lambda e: e['pid'])
    restored = first_by(of(after, 'restored'), lambda e: e['pid'])
    for what, got in (('first steps', first_steps), ('ready', ready), ('reformed', reformed),
                      ('restored', restored), ('failures', {e['pid']: e for e in failed})):
        if set(got) != set(survivors):
            raise JobError(f'chorus: {what} in generation {new_gen} from pids {sorted(got)}, '
                           f'survivors {sorted(survivors)}')
    sizes = {e['size'] for e in first_steps.values()}
    resumed = {e['step'] for e in ready.values()}
    if sizes != {len(survivors)} or len(resumed) != 1:
        raise JobError(f'chorus: generation {new_gen} has sizes {sizes} (expected '
                       f'{len(survivors)}), resumed after steps {resumed}')
    last_old = max(e['step'] for e in of(events, 'step', gen=old_gen))
    latest = lambda got: max(e['time'] for e in got.values())  # noqa: E731
    split = phases(killed, [('detect', max(e['time'] for e in failed)),
                            ('re-form', latest(reformed)), ('sync', latest(ready)),
                            ('first step', latest(first_steps))])
    row = {'outage_s': sum(s for _, s in split), 'phases': dict(split),
           'step_s': step_time(events, killed),
           'restore_s': latest(restored) - max(e['time'] for e in failed),
           'resumed_after': min(resumed), 'recomputed': last_old - min(resumed),
           'new_size': sizes.pop()}
    if spare:
        joined = [e for e in of(mine, 'step')
                  if e['gen'] > new_gen and e['size'] == len(survivors) + 1]
        if joined:
            join_gen = min(e['gen'] for e in joined)
            first_joined = first_by([e for e in joined if e['gen'] == join_gen],
                                    lambda e: e['pid'])
            last_before = max(e['time'] for e in of(mine, 'step', gen=new_gen))
            row['join_pause_s'] = latest(first_joined) - last_before
            row['joined_after_s'] = latest(first_joined) - killed
        joiners = [e['time'] for e in of(events, 'started', gen=-1)]
        if joiners:
            row['joiner_started_s'] = min(joiners) - killed  # its process began
    return row


def pid_of(job, gen, rank):
    return job.wait(f'rank {rank} of generation {gen}',
                    lambda ev: [e['pid'] for e in of(ev, 'ready', gen=gen, rank=rank)])[0]


def kill_at_step(job, args, victim_rank):
    """Waits for rank 0 to finish --kill-step, SIGKILLs `victim_rank`; returns (time, pid)."""
    pid = pid_of(job, 0, victim_rank)
    job.wait(f'step {args.kill_step}',
             lambda ev: any(e['step'] >= args.kill_step for e in of(ev, 'step', rank=0, gen=0)))
    killed = time.time()
    os.kill(pid, signal.SIGKILL)
    return killed, pid


def run_torchrun(args, victim_rank, monitor_interval):
    job = start_torchrun(args, monitor_interval)
    try:
        killed, _ = kill_at_step(job, args, victim_rank)
        job.wait('the restarted workers\' first steps',
                 lambda ev: len({e['rank'] for e in of(ev, 'step', gen=1)}) == 3)
        job.finish()
        return analyze_torchrun(job.events(), killed, 0)
    finally:
        job.close()


def run_chorus(args, n, victim_rank, hosts, spare):
    job = start_chorus(args, n, hosts, max(1, n - 1))
    try:
        ranks = {r: pid_of(job, 0, r) for r in range(n)}
        hosts_of = {e['rank']: e['host'] for e in of(job.events(), 'ready', gen=0)}
        shared = [r for r, h in hosts_of.items() if h == hosts_of[victim_rank] and r != victim_rank]
        if shared:
            # Its host is blacklisted when it fails: those ranks would be released with it.
            raise JobError(f'chorus: rank {victim_rank} shares host {hosts_of[victim_rank]} with '
                           f'ranks {shared}; the bench kills a worker alone on its host')
        killed, victim = kill_at_step(job, args, victim_rank)
        survivors = {p for p in ranks.values() if p != victim}
        job.wait('the survivors\' first steps in a new generation',
                 lambda ev: {e['pid'] for e in of(ev, 'step') if e['gen'] > 0} >= survivors)
        if spare:
            job.wait('the joiner\'s first step',
                     lambda ev: [e for e in of(ev, 'step') if e['size'] == n and e['gen'] > 0])
        job.finish()
        return analyze_chorus(job.events(), killed, 0, survivors, spare)
    finally:
        job.close()


def run_variant(args, variant, victim_rank):
    this = socket.gethostname()
    if variant == 'torchrun':
        return run_torchrun(args, victim_rank, None)
    if variant == 'torchrun-0.1s':
        return run_torchrun(args, victim_rank, 0.1)
    spare = variant == 'chorus-spare'
    return run_chorus(args, 3, victim_rank,
                      [('localhost', 1), ('127.0.0.1', 1), (this, 2 if spare else 1)], spare)


def check_sane(row, args):
    problems = [f'phase {k} negative ({v:.3f} s)' for k, v in row['phases'].items() if v < 0]
    if not 0 <= row['recomputed'] <= 2 * args.commit_every:
        problems.append(f'{row["recomputed"]} steps recomputed, not in '
                        f'[0, {2 * args.commit_every}]')
    if row['resumed_after'] % args.commit_every:
        problems.append(f'resumed after step {row["resumed_after"]}, not a commit')
    if row.get('join_pause_s', 0) < 0:
        problems.append('negative join pause')
    if problems:
        raise JobError(f'{row["variant"]}: numbers not sane: {"; ".join(problems)}: {row}')


def stats(values):
    return {'median': statistics.median(values), 'min': min(values), 'max': max(values)}


def fmt(values):
    """"median (min-max)" of seconds or of counts."""
    if all(isinstance(v, int) for v in values):
        return f'{statistics.median(values):g} ({min(values)}-{max(values)})'
    return f'{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})'


def summarize(rows, key):
    """One cell per distinct key(row), in first-seen order: outage, phases (medians), recomputed,
    step time, join pause."""
    cells = {}
    for r in rows:
        cells.setdefault(key(r), []).append(r)
    out = []
    for k, cell in cells.items():
        joins = [r['join_pause_s'] for r in cell if 'join_pause_s' in r]
        out.append({
            'key': k, 'runs': len(cell), 'outage_s': stats([r['outage_s'] for r in cell]),
            'phases_median_s': {p: statistics.median(r['phases'][p] for r in cell)
                                for p in cell[0]['phases']},
            'recomputed': stats([r['recomputed'] for r in cell]),
            'step_s_median': statistics.median(r['step_s'] for r in cell),
            **({'join_pause_s': stats(joins)} if joins else {}),
            'text': {'outage': fmt([r['outage_s'] for r in cell]),
                     'recomputed': fmt([r['recomputed'] for r in cell]),
                     **({'join': fmt(joins)} if joins else {}),
                     **{p: fmt([r['phases'][p] for r in cell]) for p in cell[0]['phases']}}})
    return out


def targets(rows):
    """The targets on every chorus run: outage <= TARGET_S and <= TARGET_RATIO x torchrun's
    median (over both kills), per chorus variant."""
    torchrun = [r['outage_s'] for r in rows if r['variant'] == 'torchrun']
    reference = statistics.median(torchrun) if torchrun else None
    out = {'torchrun_median_s': reference, 'variants': {}}
    for variant in ('chorus-spare', 'chorus-shrink'):
        outages = [r['outage_s'] for r in rows if r['variant'] == variant]
        if not outages:
            continue
        t = {'worst_s': max(outages), 'under_1s': max(outages) <= TARGET_S}
        if reference:
            t.update(ratios=[o / reference for o in outages],
                     under_ratio=max(outages) / reference <= TARGET_RATIO)
        out['variants'][variant] = t
    return out


def print_variants(cells, t):
    print('\nSIGKILL of one of 3 workers: median (min-max) over the repetitions, seconds')
    print('| variant | killed | outage | / torchrun median | recomputed steps | phases '
          '(median s) | step |')
    print('|---|---|---|---|---|---|---|')
    ref = t['torchrun_median_s']
    for c in cells:
        variant, victim = c['key']
        ratio = (f'{c["outage_s"]["median"] / ref:.3f} (max {c["outage_s"]["max"] / ref:.3f})'
                 if ref else '-')
        phases = ', '.join(f'{p} {v:.3f}' for p, v in c['phases_median_s'].items())
        if 'join' in c['text']:
            phases += f'; then join pause {c["text"]["join"]}'
        print(f'| {variant} | rank {victim} | {c["text"]["outage"]} | {ratio} | '
              f'{c["text"]["recomputed"]} | {phases} | {c["step_s_median"]:.3f} |')
    for variant, v in t['variants'].items():
        line = (f'{variant}: every outage <= {TARGET_S} s: '
                f'{"met" if v["under_1s"] else "MISSED"} (worst {v["worst_s"]:.3f} s)')
        if 'ratios' in v:
            line += (f'; every outage <= {TARGET_RATIO} x torchrun median ({ref:.3f} s): '
                     f'{"met" if v["under_ratio"] else "MISSED"} (ratios '
                     + ', '.join(f'{x:.3f}' for x in v['ratios']) + ')')
        print(line)


def print_split(cells):
    print(f'\nchorus, SIGKILL of rank N-1 of N (no spare) on {os.cpu_count()} cores: median '
          '(min-max), seconds')
    print('| ranks | detect | re-form | sync | first step | outage | step |')
    print('|---|---|---|---|---|---|---|')
    for c in cells:
        cols = [c['text'][p] for p in ('detect', 're-form', 'sync', 'first step', 'outage')]
        print(f'| {c["key"]} | ' + ' | '.join(cols) + f' | {c["step_s_median"]:.3f} |')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--reps', type=int, default=3, help='repetitions of each variant')
    parser.add_argument('--variants', nargs='*', default=VARIANTS, choices=VARIANTS)
    parser.add_argument('--killed-ranks', type=int, nargs='+', default=[1, 0],
                        choices=[0, 1, 2], help='the ranks killed, one job each')
    parser.add_argument('--split-ranks', type=int, nargs='*', default=[2, 4, 8, 16],
                        help='world sizes for the chorus phase split (none: skip it)')
    parser.add_argument('--split-reps', type=int, default=2)
    parser.add_argument('--steps', type=int, default=400, help='steps per job')
    parser.add_argument('--kill-step', type=int, default=105)
    parser.add_argument('--commit-every', type=int, default=10)
    parser.add_argument('--step-time', type=float, default=0.01)
    parser.add_argument('--job-timeout', type=float, default=300, help='seconds, per job')
    parser.add_argument('--json', metavar='FILE', help='also write the results as JSON')
    parser.add_argument('--chorusrun',
                        default=os.path.join(HERE, '..', 'build', 'launcher', 'chorusrun'))
    args = parser.parse_args()
    if args.kill_step >= args.steps:
        parser.error('--kill-step must be below --steps')
    needs_chorusrun = any(v.startswith('chorus') for v in args.variants) or args.split_ranks
    if needs_chorusrun and not os.access(args.chorusrun, os.X_OK):
        parser.error(f'no chorusrun at {args.chorusrun}: build it (scripts/build.sh) or pass '
                     '--chorusrun PATH')

    rows, split_rows = [], []
    load_at_start = os.getloadavg()
    try:
        for rep in range(args.reps):
            for variant in args.variants:
                for victim in args.killed_ranks:
                    row = dict(variant=variant, killed_rank=victim, rep=rep,
                               **run_variant(args, variant, victim))
                    check_sane(row, args)
                    print(json.dumps(row), flush=True)
                    rows.append(row)
        for rep in range(args.split_reps if args.split_ranks else 0):
            for n in args.split_ranks:
                row = dict(variant='chorus-shrink', ranks=n, killed_rank=n - 1, rep=rep,
                           **run_chorus(args, n, n - 1,
                                        [('127.0.0.1', n - 1), ('localhost', 1)], False))
                check_sane(row, args)
                print(json.dumps(row), flush=True)
                split_rows.append(row)
    except JobError as e:
        print(f'elastic_outage_bench: {e}', file=sys.stderr)
        return 1
    results = {'date': time.strftime('%Y-%m-%d %H:%M:%S %z'), 'cpus': os.cpu_count(),
               'loadavg_at_start': load_at_start, 'loadavg_at_end': os.getloadavg(),
               'config': {k: v for k, v in vars(args).items() if k != 'json'},
               'rows': rows, 'split_rows': split_rows}
    if rows:
        results['cells'] = summarize(rows, lambda r: (r['variant'], r['killed_rank']))
        results['targets'] = targets(rows)
        print_variants(results['cells'], results['targets'])
    if split_rows:
        results['split'] = summarize(split_rows, lambda r: r['ranks'])
        print_split(results['split'])
    print(f'\nload average (1 min) {load_at_start[0]:.2f} at the start, '
          f'{results["loadavg_at_end"][0]:.2f} at the end; {os.cpu_count()} cores')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
