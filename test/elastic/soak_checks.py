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
"""

import collections
import re

FAILED_PREFIX = 'chorusrun: elastic job failed: '


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
    elif status != 1 or not last.startswith(FAILED_PREFIX + expect.message):
        v.append(f'expected status 1 and "{FAILED_PREFIX}{expect.message}...", got status '
                 f'{status}; last line: {last!r}')
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


def check_resets(expect, stderr_lines):
    """The reset lines' count and causes, where the schedule makes them certain."""
    v = []
    resets = [line for line in stderr_lines if re.match(r'chorusrun: generation \d+:', line)]
    if expect.resets is not None and len(resets) != expect.resets:
        v.append(f'expected {expect.resets} reset line(s), got {len(resets)}: {resets}')
    text = '\n'.join(resets)
    at = 0
    for cause in expect.causes:
        found = text.find(cause, at)
        if found < 0:
            v.append(f'reset cause {cause!r} missing (reset lines: {resets})')
        else:
            at = found + len(cause)
    return v


def generation_hosts(records):
    """{gen: [host of rank 0, ...]} from the formed records."""
    out = {}
    for g, recs in sorted(by_generation(records, 'formed').items()):
        hosts = {r['rank']: r['host'] for r in recs}
        out[g] = [hosts.get(i, '?') for i in range(recs[0]['size'])]
    return out


def check_generations(expect, records):
    if expect.generations is None:
        return []
    got = list(generation_hosts(records).values())
    if got != expect.generations:
        return [f'generations (hosts by rank) {got}, expected by the documented policy '
                f'{expect.generations}']
    return []


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
