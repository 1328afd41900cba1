"""The elastic soak's invariants over one finished job (scripts/elastic_soak.py): pure functions
of the workers' records (test/elastic/soak_train.py's log), the soak's own records of what it
did, and how chorusrun ended. Each check returns violations as strings (empty: it holds).

Lineage. Every generation g resumes from one state, the one its rank 0 synced to all (its
`formed` records, equal on every rank): the global step S_g. The steps of generation g that the
job keeps are those in (S_g, S_next], S_next being the step the next generation resumed from
(the last generation keeps everything it finished, or up to its last commit when the job did not
train to the end). Work of a failed generation after its last commit is redone, and only that:
S_next is at least the last step committed in g (a commit record means its allreduce completed,
so every rank saved it) and at most the last step finished in g, and exactly that when g ended
by a host change (nothing is rolled back). Every kept step was run by all ranks of its
generation (an `intent` from each: a step that completed anywhere had everyone's gradients), and
over the kept steps each epoch trains every sample exactly once.

Fresh start. When no worker survives (chorusrun starts the next generation afresh, or only
joiners that never received a state are left), the next formed generation shares no process
with the last one: it must resume from step 0 with the initial parameters, and the lineage
starts over there. The work before it is gone with its workers (no process holds it), so
"every committed step trained exactly once" holds within the fresh run: each of its epochs
trains every sample exactly once, and the steps of the lost run count for nothing.

Membership (check_resets, check_generations, check_joiners): what the reset lines and the
formed worlds must show under the policy of elastic/next_generation.h, whatever the timing of
the joining workers (see soak_schedule.py for what the schedule makes certain).
"""

import collections
import re

import soak_schedule

FAILED_PREFIX = 'chorusrun: elastic job failed: '
RESET_LINE = re.compile(r'chorusrun: generation (\d+): (.*?)size (\d+) -> (\d+), cause: (.*)$')
HOLD = re.compile(r'; on hold: fewer than --min-np=(\d+) workers, waiting up to '
                  r'--elastic-timeout=(\d+) s for more$')
LOSS = re.compile(r'rank (\d+) on (\S+) (.+)$')
JOINED = re.compile(r'rank (\d+) on (\S+)$')
# A joining worker that called chorus init this long ago, while the job kept training, has
# joined: the join window, then the survivors' next commit (a few steps at the slow pace) and
# forming the world on a loaded machine.
JOIN_LIMIT_S = soak_schedule.JOIN_WINDOW_S + 7.0


def by_generation(records, ev):
    out = collections.defaultdict(list)
    for r in records:
        if r['ev'] == ev:
            out[r['gen']].append(r)
    return out


def check_outcome(expect, status, stderr_lines, records, epochs):
    """Status 0, or the documented failure with its message."""
    v = []
    last = stderr_lines[-1] if stderr_lines else ''
    if expect.outcome in ('ok', 'exit0'):
        if status != 0:
            v.append(f'expected status 0 ({expect.outcome}), got {status}; last line: {last!r}')
    elif status != 1 or not re.match(re.escape(FAILED_PREFIX) + expect.message, last):
        v.append(f'expected status 1 and "{FAILED_PREFIX}{expect.message}..." (a regular '
                 f'expression), got status {status}; last line: {last!r}')
    elif expect.fail_cause and expect.fail_cause not in last:
        v.append(f'the failure does not name the refused reset\'s cause '
                 f'{expect.fail_cause!r}: {last!r}')
    if expect.outcome == 'ok' and status == 0:
        formed = by_generation(records, 'formed')
        finals = [r for r in records if r['ev'] == 'final']
        if not formed:
            v.append('no generation was formed')
        else:
            g = max(formed)
            size = formed[g][0]['size']
            ranks = sorted(r['rank'] for r in finals if r['gen'] == g)
            if ranks != list(range(size)):
                v.append(f'training did not finish on every rank of generation {g} (size '
                         f'{size}): final records from ranks {ranks}')
            if any(r['epoch'] != epochs for r in finals):
                v.append(f'final epochs {[r["epoch"] for r in finals]}, expected {epochs}')
    return v


def parse_reset_lines(stderr_lines):
    """chorusrun's reset lines (elastic/reset_log.h, next_generation.cc), each as a dict: gen,
    before, after (sizes), hold (None or (min_np, timeout)), losses [(rank, host, how,
    blacklisted)], joined [(rank, host)], changed (the hosts-changed text or ''), unknown (cause
    parts none of these), line."""
    out = []
    for line in stderr_lines:
        m = RESET_LINE.match(line)
        if not m:
            continue
        cause = m.group(5)
        hold = HOLD.search(cause)
        if hold:
            cause = cause[:hold.start()]
        r = dict(gen=int(m.group(1)), before=int(m.group(3)), after=int(m.group(4)),
                 hold=(int(hold.group(1)), int(hold.group(2))) if hold else None, losses=[],
                 joined=[], changed='', unknown=[], line=line, cause=cause)
        for part in parse_causes(cause, r):
            r['unknown'].append(part)
        out.append(r)
    return out


def parse_causes(cause, into):
    """Adds the losses, joins and host changes of `cause` (the parts joined by "; ") to `into`;
    returns the parts it does not know."""
    unknown = []
    for part in cause.split('; ') if cause else []:
        loss = LOSS.match(part)
        if part.startswith('joined: '):
            for item in part[len('joined: '):].split(', '):
                m = JOINED.match(item)
                if m:
                    into['joined'].append((int(m.group(1)), m.group(2)))
                else:
                    unknown.append(part)
        elif part.startswith('hosts changed: '):
            into['changed'] = part[len('hosts changed: '):]
        elif part.endswith(' blacklisted') and into['losses'] and \
                into['losses'][-1][1] == part[:-len(' blacklisted')]:
            rank, host, how, _ = into['losses'][-1]
            into['losses'][-1] = (rank, host, how, True)
        elif loss:
            into['losses'].append((int(loss.group(1)), loss.group(2), loss.group(3), False))
        else:
            unknown.append(part)
    return unknown


def refused_reset(stderr_lines):
    """The losses of the reset --reset-limit refused (in chorusrun's last line), parsed as a
    reset line's."""
    last = stderr_lines[-1] if stderr_lines else ''
    m = re.match(re.escape(FAILED_PREFIX) + r'reset limit \d+ reached \(--reset-limit\); the '
                 r'next reset was due to: (.*)$', last)
    r = dict(losses=[], joined=[], changed='', line=last)
    if m:
        parse_causes(m.group(1), r)
    return r


def check_resets(schedule, stderr_lines, faults, status):
    """The reset lines against the policy: numbered one by one, each size following on the
    last, --max-np kept, on hold exactly below --min-np, a cause for each, joiners on the last
    ranks, every loss named (rank, host, how, blacklisting) matching a fault the job took and,
    once the job trained to the end, every fault named; as many as the schedule can bring (and
    exactly --reset-limit when that ended the job). `faults`: the losses struck, dicts with id,
    kind, host."""
    s, expect = schedule, schedule.expect
    v = []
    lines = parse_reset_lines(stderr_lines)
    size = len(expect.first_generation)
    for i, r in enumerate(lines):
        where = f'reset line {r["line"]!r}'
        if r['gen'] != i + 1:
            v.append(f'{where}: generation {r["gen"]}, expected {i + 1}')
        if r['before'] != size:
            v.append(f'{where}: size {r["before"]} before, but the last generation had {size}')
        size = r['after']
        if size > s.max_np:
            v.append(f'{where}: more than --max-np={s.max_np} workers')
        if r['hold'] and r['hold'] != (s.min_np, s.elastic_timeout):
            v.append(f'{where}: on hold with other limits than --min-np={s.min_np} and '
                     f'--elastic-timeout={s.elastic_timeout}')
        if bool(r['hold']) != (0 < size < s.min_np):
            v.append(f'{where}: {size} workers, --min-np={s.min_np}, but '
                     f'{"on hold" if r["hold"] else "not on hold"}')
        if not r['cause'] or r['unknown']:
            v.append(f'{where}: a cause none of a loss, a release, a join: {r["unknown"]}')
        joined = [rank for rank, _ in r['joined']]
        if joined and joined != list(range(size - len(joined), size)):
            v.append(f'{where}: joiners at ranks {joined}, not the last ranks of {size}')
    if expect.first_cause and lines and any(f['id'] == 'e0' for f in faults):
        # The first event's loss, in the first line; or, when a second loss strikes in the
        # reset it causes (and its process ended first), in one of the first two, under the
        # rank it has after the other's.
        if any(e.after == 'e0' for e in s.events):
            cause = expect.first_cause.split(' ', 2)[2]
            named = any(cause in r['cause'] for r in lines[:2])
        else:
            named = expect.first_cause in lines[0]['cause']
        if not named:
            v.append(f'the first reset line does not name the first event\'s loss '
                     f'{expect.first_cause!r}: {lines[0]["line"]!r}')
    # Losses against faults.
    left = list(faults)
    named = [x for r in lines for x in r['losses']]
    refused = refused_reset(stderr_lines)
    named += refused['losses']
    for rank, host, how, blacklisted in named:
        match = next((f for f in left if f['host'] == host and
                      soak_schedule.how(f['kind']) == how), None)
        if match is None:
            v.append(f'chorusrun names a loss no fault explains: rank {rank} on {host} {how}')
            continue
        left.remove(match)
        if blacklisted != soak_schedule.blacklists(match['kind']):
            v.append(f'rank {rank} on {host} {how}: blacklisted {blacklisted}, but a '
                     f'{match["kind"]} {"does" if not blacklisted else "does not"} blacklist')
    if expect.outcome == 'ok' and status == 0:
        for f in left:
            v.append(f'fault {f["id"]} ({f["kind"]} on {f["host"]}) struck, but no reset names '
                     f'it')
    lo, hi = expect.resets
    if expect.outcome == 'fail' and expect.message.startswith('reset limit'):
        if len(lines) != s.reset_limit:
            v.append(f'--reset-limit {s.reset_limit} ended the job after {len(lines)} resets')
    elif not lo <= len(lines) <= hi:
        v.append(f'{len(lines)} resets, but the schedule brings {lo} to {hi}: '
                 f'{[r["line"] for r in lines]}')
    for line in stderr_lines:
        if line.startswith('chorusrun: worker ') and ' before it joined' in line:
            v.append(f'a joining worker was lost: {line!r}')
    return v


def generation_hosts(records):
    """{gen: [host of rank 0, ...]} from the formed records."""
    out = {}
    for g, recs in sorted(by_generation(records, 'formed').items()):
        hosts = {r['rank']: r['host'] for r in recs}
        out[g] = [hosts.get(i, '?') for i in range(recs[0]['size'])]
    return out


def check_generations(schedule, records, stderr_lines):
    """The worlds formed against the reset lines and the policy: the first one's hosts as
    predicted; each formed one's size as its reset line says, every rank once (all of them once
    a step ran), never one on hold; survivors keep the lowest ranks in their old order with the
    newcomers after them, joiners on the ranks their line names; no host over its slots, none
    used after it was blacklisted (without a cooldown) or removed."""
    s, expect = schedule, schedule.expect
    v = []
    formed = by_generation(records, 'formed')
    done = by_generation(records, 'done')
    lines = {r['gen']: r for r in parse_reset_lines(stderr_lines)}
    hosts = generation_hosts(records)
    if 0 in hosts and hosts[0] != expect.first_generation:
        v.append(f'generation 0 has hosts by rank {hosts[0]}, expected by the documented policy '
                 f'{expect.first_generation}')
    # Hosts gone from the job at a reset line: blacklisted (no cooldown), or removed from
    # discovery by the schedule (never listed again in the drawn schedules).
    ever = {h for h, _ in s.hosts} | ({s.reserve[0]} if s.reserve else set())
    removed = set()
    for e in s.events:
        if e.kind == 'remove_host':
            removed |= ever - {line.split(':')[0] for line in e.hosts.splitlines()}
    gone = {}
    for g, r in sorted(lines.items()):
        for _, host, _, blacklisted in r['losses']:
            if blacklisted and not s.cooldown:
                gone.setdefault(host, g)
        m = re.search(r'removed \[([^\]]*)\]', r['changed'])
        for host in (m.group(1).split(', ') if m else []):
            if host in removed:
                gone.setdefault(host, g)
    seen_pids = set()
    previous = None  # (gen, [pid by rank])
    for g in sorted(formed):
        recs = formed[g]
        ranks = sorted(r['rank'] for r in recs)
        sizes = {r['size'] for r in recs}
        size = recs[0]['size']
        if len(ranks) != len(set(ranks)):
            v.append(f'generation {g}: a rank formed twice: {ranks}')
        if len(sizes) != 1:
            v.append(f'generation {g}: ranks formed with different sizes {sorted(sizes)}')
        if g > 0 and g not in lines:
            v.append(f'generation {g} formed without a reset line')
        elif g > 0:
            r = lines[g]
            if r['after'] != size:
                v.append(f'generation {g} formed with {size} ranks, its reset line says '
                         f'{r["after"]}')
            if r['hold']:
                v.append(f'generation {g} formed, but it was published on hold')
            for rank, host in r['joined']:
                got = [x for x in recs if x['rank'] == rank]
                if got and (got[0]['host'] != host or got[0]['pid'] in seen_pids):
                    v.append(f'generation {g}: rank {rank} joined on {host}, but pid '
                             f'{got[0]["pid"]} on {got[0]["host"]} formed it'
                             f'{" (not a new worker)" if got[0]["pid"] in seen_pids else ""}')
        if done.get(g) and ranks != list(range(size)):
            v.append(f'generation {g} trained, but only ranks {ranks} of {size} formed it')
        by_rank = {r['rank']: r['pid'] for r in recs}
        pids = [by_rank[i] for i in sorted(by_rank)]
        if previous is not None:
            pg, ppids = previous
            kept = [p for p in pids if p in ppids]
            if kept:  # not a fresh start
                if kept != [p for p in ppids if p in kept]:
                    v.append(f'generation {g}: the survivors of generation {pg} changed order: '
                             f'{ppids} -> {pids}')
                first_new = next((i for i, p in enumerate(pids) if p not in ppids), len(pids))
                if any(p in ppids for p in pids[first_new:]):
                    v.append(f'generation {g}: a new worker ranks before a survivor of '
                             f'generation {pg}: {ppids} -> {pids}')
        previous = (g, pids)
        seen_pids |= set(pids)
        count = collections.Counter(r['host'] for r in recs)
        for host, n in count.items():
            if n > expect.max_slots.get(host, 0):
                v.append(f'generation {g}: {n} workers on {host}, which has at most '
                         f'{expect.max_slots.get(host, 0)} slots')
            if host in gone and g > gone[host]:
                v.append(f'generation {g} uses {host}, gone from the job at generation '
                         f'{gone[host]}')
    return v


def check_joiners(records, stderr_lines):
    """Every joining worker that called chorus init while the job kept training for
    JOIN_LIMIT_S more joined it, unless chorusrun stopped it (its host blacklisted or removed,
    or it was late)."""
    v = []
    formed = {r['pid'] for r in records if r['ev'] == 'formed'}
    starts = {r['pid']: r for r in records if r['ev'] == 'start'}
    stopped_hosts = set()
    late = set()
    for line in stderr_lines:
        for r in parse_reset_lines([line]):
            stopped_hosts |= {host for _, host, _, b in r['losses'] if b}
            m = re.search(r'removed \[([^\]]*)\]', r['changed'])
            stopped_hosts |= set(m.group(1).split(', ') if m else [])
        m = re.match(r'chorusrun: worker (w\d+) on \S+ did not start chorus', line)
        if m:
            late.add(m.group(1))
    last_step = max((r['t'] for r in records if r['ev'] == 'done'), default=0)
    for r in records:
        if r['ev'] != 'init' or r['gen'] != -1 or r['pid'] in formed:
            continue
        start = starts.get(r['pid'], {})
        if r['host'] in stopped_hosts or start.get('worker_id') in late:
            continue
        if last_step > r['t'] + JOIN_LIMIT_S:
            v.append(f'joining worker pid {r["pid"]} ({start.get("worker_id")} on {r["host"]}) '
                     f'called chorus init {last_step - r["t"]:.1f} s before the last step, but '
                     f'never joined')
    return v


def check_lineage(records, expect, samples, epochs, status):
    """Formed states agree and are real states of the lineage; every kept step has every rank's
    samples; each epoch trains each sample once; replicas stay bit-identical."""
    v = []
    formed = by_generation(records, 'formed')
    intents = by_generation(records, 'intent')
    done = by_generation(records, 'done')
    commits = by_generation(records, 'commit')
    restores = by_generation(records, 'restore')
    gens = sorted(formed)
    if not gens:
        return v
    resumed = {}
    for g in gens:
        states = {(r['epoch'], r['step'], r['commits'], r['processed'], r['digest'])
                  for r in formed[g]}
        ranks = sorted(r['rank'] for r in formed[g])
        if len(ranks) != len(set(ranks)):
            v.append(f'generation {g}: a rank formed twice: {ranks}')
        if len(states) != 1:
            v.append(f'generation {g}: ranks resumed from different states '
                     f'(epoch, step, commits, processed, digest): {sorted(states)}')
        resumed[g] = formed[g][0]

    # Replicas equal after every step.
    post = {}  # (gen, step) -> digest
    for g, recs in done.items():
        per_step = collections.defaultdict(set)
        for r in recs:
            per_step[r['step']].add(r['digest'])
        for step, digests in sorted(per_step.items()):
            if len(digests) != 1:
                v.append(f'generation {g} step {step}: ranks hold different parameters '
                         f'{sorted(digests)}')
            post[(g, step)] = sorted(digests)[0]

    # Walk the generations, keeping the lineage: the steps the state of the running generation
    # went through, each with the generation that ran it and the parameters after it.
    kept = []  # (gen, step), by step
    digest_at = {}  # step -> parameters after it, along the lineage
    for i, g in enumerate(gens):
        r = resumed[g]
        start = r['step']
        kept = [k for k in kept if k[1] <= start]  # a rollback, or a fresh start at 0
        want = resumed[gens[0]]['digest'] if start == 0 else digest_at.get(start)
        if want is not None and r['digest'] != want:
            v.append(f'generation {g} resumed at step {start} with parameters {r["digest"]}, '
                     f'but the job had {want} after that step')
        finished = max((x['step'] for x in done.get(g, [])), default=start)
        committed = max((x['step'] for x in commits.get(g, [])), default=start)
        if i + 1 < len(gens):
            nxt_gen = gens[i + 1]
            nxt = resumed[nxt_gen]['step']
            fresh = not ({x['pid'] for x in formed[nxt_gen]} & {x['pid'] for x in formed[g]})
            if not fresh and not committed <= nxt <= finished:
                v.append(f'generation {nxt_gen} resumed from step {nxt}, but generation {g} '
                         f'committed step {committed} and finished step {finished}')
            if not fresh and not restores.get(g) and nxt != finished:
                v.append(f'generation {g} ended without a failure after step {finished}, but '
                         f'generation {nxt_gen} resumed from step {nxt} (work lost or redone)')
            end = nxt
        elif expect.outcome == 'ok' and status == 0:
            end = finished
        else:
            end = committed
        for step in range(start + 1, end + 1):
            kept.append((g, step))
            if (g, step) in post:
                digest_at[step] = post[(g, step)]
            else:
                v.append(f'generation {g} step {step} is kept, but no rank finished it')

    # Every kept step ran on every rank; every sample once per epoch.
    per_epoch = collections.defaultdict(list)
    by_step = {}
    for g, recs in intents.items():
        for r in recs:
            key = (g, r['step'], r['rank'])
            if key in by_step:
                v.append(f'generation {g}: rank {r["rank"]} ran step {r["step"]} twice')
            by_step[key] = r
    for g, step in kept:
        size = resumed[g]['size']
        for rank in range(size):
            r = by_step.get((g, step, rank))
            if r is None:
                v.append(f'generation {g} step {step} is kept, but rank {rank} never started it')
                continue
            per_epoch[r['epoch']].extend(r['indices'])
    for epoch in sorted(per_epoch):
        seen = collections.Counter(per_epoch[epoch])
        twice = sorted(i for i, n in seen.items() if n > 1)
        missing = sorted(set(range(samples)) - set(seen))
        complete = expect.outcome == 'ok' and status == 0
        if twice:
            v.append(f'epoch {epoch}: {len(twice)} sample(s) trained more than once, e.g. '
                     f'{twice[:5]}')
        if complete and missing:
            v.append(f'epoch {epoch}: {len(missing)} sample(s) never trained, e.g. {missing[:5]}')
    if expect.outcome == 'ok' and status == 0:
        absent = [e for e in range(epochs) if e not in per_epoch]
        if absent:
            v.append(f'epochs {absent} trained nothing')
        finals = [r for r in records if r['ev'] == 'final']
        digests = {r['digest'] for r in finals}
        if len(digests) > 1:
            v.append('ranks ended with different parameters: ' +
                     ', '.join(f'rank {r["rank"]} {r["digest"]}' for r in finals))
        elif digests and kept and digest_at.get(kept[-1][1]) not in digests:
            v.append(f'final parameters {digests} are not those after the last step')
    return v


def check_state_agreement(records):
    """After every sync the state's plain attributes agree with the model and the sampler they
    describe (soak_train.py keeps the step in both)."""
    v = []
    for r in records:
        if r['ev'] != 'formed':
            continue
        if r['plain_step'] != r['step'] or r['epoch'] != r['sampler_epoch']:
            v.append(f'generation {r["gen"]} rank {r["rank"]}: after the sync the state\'s plain '
                     f'attributes say step {r["plain_step"]} epoch {r["epoch"]}, but the model is '
                     f'at step {r["step"]} and the sampler at epoch {r["sampler_epoch"]}')
            break  # one is enough to tell
    return v


def check_exceptions(records, schedule):
    """No process raised an exception the schedule did not ask for."""
    raisers = {r['pid'] for r in records if r['ev'] == 'fault' and r['kind'] == 'raise'}
    return [f'pid {r["pid"]} (generation {r.get("gen")}, rank {r.get("rank")}) raised '
            f'{r["type"]}: {r["message"]}' for r in records
            if r['ev'] == 'exception' and r['pid'] not in raisers]


def outages(records, faults):
    """[(fault, seconds or None)]: from each fault to the first step finished after it in a later
    generation. `faults`: dicts with t, gen and a label."""
    done = [r for r in records if r['ev'] == 'done']
    out = []
    for f in faults:
        after = [r['t'] for r in done if r['gen'] > f['gen'] and r['t'] > f['t']]
        out.append((f, min(after) - f['t'] if after else None))
    return out


def check_cpu(samples, window_s, limit, busy_times):
    """chorusrun's CPU (cores) over every window of `window_s`: (max, max while no worker
    finished a step, violations). `samples`: [(time, cpu seconds)]."""
    worst = idle_worst = 0.0
    j = 0
    busy = sorted(busy_times)
    for i, (t, cpu) in enumerate(samples):
        while samples[j][0] < t - window_s:
            j += 1
        t0, cpu0 = samples[j]
        if t - t0 < window_s * 0.8:
            continue
        rate = (cpu - cpu0) / (t - t0)
        worst = max(worst, rate)
        lo = _bisect(busy, t0)
        if lo >= len(busy) or busy[lo] > t:
            idle_worst = max(idle_worst, rate)
    v = []
    if worst > limit:
        v.append(f'chorusrun used {worst:.0%} of a core over {window_s:g} s (limit {limit:.0%}); '
                 f'{idle_worst:.0%} at most while no step ran')
    return worst, idle_worst, v


def _bisect(values, x):
    lo, hi = 0, len(values)
    while lo < hi:
        mid = (lo + hi) // 2
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo
