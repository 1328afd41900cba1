"""Reading what autotune leaves behind, for the tests that run real jobs with it: rank 0's CSV log
(CHORUS_AUTOTUNE_LOG; the format is docs/autotune.md's) and the switch lines each rank logs at
level info ("autotune: generation G cycle C: trying P" / "... search done, keeping P").

Every function raises AssertionError with a message that names what is wrong.
"""
import re

HEADER = ('generation,sample,phase,fusion_threshold_bytes,pipeline_chunk_bytes,inplace_min_bytes,'
          'cycle_time_ms,hierarchical_allreduce,score_bytes_per_second')
KNOBS = ('fusion_threshold_bytes', 'pipeline_chunk_bytes', 'inplace_min_bytes', 'cycle_time_ms',
         'hierarchical_allreduce')
# What the search may try (runtime/autotune/knob_space.h); the start may lie outside.
RANGES = {'fusion_threshold_bytes': (64 << 10, 256 << 20), 'pipeline_chunk_bytes': (64 << 10, 64 << 20),
          'inplace_min_bytes': (4 << 10, 64 << 20), 'cycle_time_ms': (0.1, 25.0)}


def parameters(record):
    """The knob values of a record (or of a parsed switch line), for comparison."""
    return tuple(record[k] for k in KNOBS)


def read_log(path):
    """The records of the log at `path`, each a dict of the header's fields (typed)."""
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines and lines[0] == HEADER, f'{path}: header {lines[:1]} != {HEADER!r}'
    records = []
    for n, line in enumerate(lines[1:], start=2):
        fields = line.split(',')
        assert len(fields) == 9, f'{path}:{n}: {len(fields)} fields, not 9: {line!r}'
        try:
            r = {'generation': int(fields[0]), 'sample': int(fields[1]), 'phase': fields[2],
                 'fusion_threshold_bytes': int(fields[3]), 'pipeline_chunk_bytes': int(fields[4]),
                 'inplace_min_bytes': int(fields[5]), 'cycle_time_ms': float(fields[6]),
                 'hierarchical_allreduce': fields[7], 'score': int(fields[8])}
        except ValueError as e:
            raise AssertionError(f'{path}:{n}: {e}: {line!r}')
        assert r['phase'] in ('warmup', 'sample', 'confirm', 'best'), \
            f'{path}:{n}: phase {r["phase"]!r}'
        assert r['hierarchical_allreduce'] in ('', '0', '1'), f'{path}:{n}: {line!r}'
        assert r['score'] > 0, f'{path}:{n}: score {r["score"]}'
        records.append(r)
    return records


def confirm_pairs(samples, pairs=3):
    """The pairs of samples that confirm the choice, of `samples` in all
    (runtime/autotune/parameter_manager.h: ConfirmPairs)."""
    return max(0, min(pairs, (samples - 2) // 2))


def check_search(records, generation, warmup, samples, start=None):
    """The records of `generation`'s search, in order: `warmup` warm-up samples, the search's
    samples, the confirming samples (start and candidate in alternation: S C C S S C ...; the
    candidate one of the search's points other than the start), then the choice: the candidate
    if it scored above the start in every pair, else the start (sample 1), with the number,
    parameters and score of its search sample. `samples`: the search's and the confirming ones
    together. `start`: the parameters the search must have started from (warm-ups and sample 1).
    Returns the choice."""
    mine = [r for r in records if r['generation'] == generation]
    phases = [(r['phase'], r['sample']) for r in mine]
    pairs = confirm_pairs(samples)
    searched = samples - 2 * pairs
    expected = ([('warmup', i) for i in range(1, warmup + 1)] +
                [('sample', i) for i in range(1, searched + 1)] +
                [('confirm', i) for i in range(1, 2 * pairs + 1)])
    assert phases[:-1] == expected and phases[-1][0] == 'best', \
        f'generation {generation}: phases {phases}, expected {expected} then best'
    best = mine[-1]
    kept = mine[warmup + best['sample'] - 1]
    assert kept['phase'] == 'sample', f'generation {generation}: best {best} is no sample'
    assert parameters(kept) == parameters(best) and kept['score'] == best['score'], \
        f'generation {generation}: best {best} is not sample {best["sample"]} ({kept})'
    first = [r for r in mine if r['phase'] == 'warmup'] + [mine[warmup]]
    if start is not None:
        for r in first:
            assert parameters(r) == start, f'generation {generation}: {r} did not start at {start}'
    assert all(parameters(r) == parameters(first[0]) for r in first), \
        f'generation {generation}: the warm-ups and sample 1 differ: {first}'
    for r in mine[warmup + 1:warmup + searched]:  # the optimiser's points lie in the knob space
        for knob, (lo, hi) in RANGES.items():
            assert lo <= r[knob] <= hi, f'generation {generation}: {knob} out of range in {r}'
    if pairs:
        confirming = mine[warmup + searched:-1]
        start_point = parameters(first[0])
        candidate = parameters(confirming[1])
        searched_points = [parameters(r) for r in mine[warmup:warmup + searched]]
        assert candidate != start_point and candidate in searched_points, \
            f'generation {generation}: candidate {candidate} is not a searched point'
        for i, r in enumerate(confirming):
            start_turn = (i % 2 == 0) == ((i // 2) % 2 == 0)
            assert parameters(r) == (start_point if start_turn else candidate), \
                f'generation {generation}: confirming sample {i + 1} measured {r}'

        def score(pair, point):
            return [r['score'] for r in confirming[2 * pair:2 * pair + 2]
                    if parameters(r) == point][0]

        won = all(score(p, candidate) > score(p, start_point) for p in range(pairs))
        assert parameters(best) == (candidate if won else start_point), \
            f'generation {generation}: kept {best}; the candidate won every pair: {won}'
        assert won or best['sample'] == 1, f'generation {generation}: kept {best}, not sample 1'
    return best


SWITCH = re.compile(r'^\[(\d+)\]<stderr>:.*autotune: generation (\d+) cycle (\d+): '
                    r'(trying|search done, keeping) (.*)$')


def switches(stderr):
    """{rank: [(generation, cycle, done, parameters), ...]} from chorusrun's tagged stderr."""
    found = {}
    for line in stderr.splitlines():
        m = SWITCH.match(line)
        if not m:
            continue
        values = dict(item.split('=') for item in m.group(5).split())
        p = {'fusion_threshold_bytes': int(values['fusion_threshold_bytes']),
             'pipeline_chunk_bytes': int(values['pipeline_chunk_bytes']),
             'inplace_min_bytes': int(values['inplace_min_bytes']),
             'cycle_time_ms': float(values['cycle_time_ms']),
             'hierarchical_allreduce': values.get('hierarchical_allreduce', '')}
        found.setdefault(int(m.group(1)), []).append(
            (int(m.group(2)), int(m.group(3)), m.group(4) != 'trying', parameters(p)))
    return found
