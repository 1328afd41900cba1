#!/usr/bin/python3
"""chorusrun --autotune end to end: autotune_job.py on N ranks with --autotune,
--autotune-log-file and small sample counts; then:

  - every rank printed PASS (every result was right while the parameters changed);
  - the log has the documented shape (test/support/autotune_log.py): the header, W warm-up lines
    and S samples of generation 0 from the start values (the search's, then those that confirm
    the choice against the start), then the choice: the start or the candidate, by the rule;
  - every rank switched to the same parameters in the same cycles (its info-level log lines):
    before each sample after the first, and once more to keep the log's choice;
  - with --hosts (chorusrun -H, e.g. localhost:2,127.0.0.1:2: two hosts as chorusrun numbers
    them, both this machine), where hierarchical allreduce can run: the knob is in every line of
    the log and every switch, starting off, and the search tried it on (the results above were
    right under both algorithms).

Usage: check_autotune.py --chorusrun PATH --ranks N [--gloo] [--hosts H]. Prints PASS and exits 0
when every check passed; otherwise prints what failed and the job's output, and exits 1.
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'support'))
import autotune_log  # noqa: E402

# 6 samples of the search (the start and the space-filling points, one per knob: with --hosts,
# hierarchical allreduce on among them), then 3 pairs confirming the choice.
WARMUP, SAMPLES, STEPS = 2, 12, 3
# chorus's defaults: where the search starts.
START = (134217728, 4194304, 262144, 1.0, '')


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chorusrun', required=True)
    parser.add_argument('--ranks', type=int, default=2)
    parser.add_argument('--gloo', action='store_true')
    parser.add_argument('--hosts', help="chorusrun's -H: hosts of equal numbers of ranks")
    args = parser.parse_args()
    # Hierarchical allreduce is a knob only where the hosts can run it; it starts off (chorus's
    # default).
    start = START[:4] + ('0',) if args.hosts else START
    with tempfile.TemporaryDirectory(prefix='chorus_autotune_') as d:
        log = os.path.join(d, 'autotune.csv')
        with open(log, 'w') as f:
            f.write('left over from an earlier job\n')  # a new job starts the file afresh
        cmd = [args.chorusrun, '-np', str(args.ranks)] + (['--gloo'] if args.gloo else []) + (
            ['-H', args.hosts] if args.hosts else []) + [
            '--autotune', '--autotune-log-file', log,
            '--autotune-warmup-samples', str(WARMUP), '--autotune-steps-per-sample', str(STEPS),
            '--autotune-bayes-opt-max-samples', str(SAMPLES), '--log-level', 'info',
            sys.executable, os.path.join(HERE, 'autotune_job.py'), log]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=500, env=env,
                           stdin=subprocess.DEVNULL)
        try:
            assert p.returncode == 0, f'chorusrun exited {p.returncode}'
            for r in range(args.ranks):
                assert f'autotune_job: rank {r}: PASS' in p.stdout, f'rank {r} did not pass'
            records = autotune_log.read_log(log)
            best = autotune_log.check_search(records, 0, WARMUP, SAMPLES, start=start)
            assert len(records) == WARMUP + SAMPLES + 1, f'{len(records)} records: {records}'
            seen = autotune_log.switches(p.stderr)
            assert sorted(seen) == list(range(args.ranks)), f'switch lines of ranks {sorted(seen)}'
            # One switch per sample after the first (the search's points, then start and
            # candidate in turn), then the choice.
            assert len(seen[0]) == SAMPLES and seen[0][-1][2], f'rank 0 switched: {seen[0]}'
            assert all(not done for _, _, done, _ in seen[0][:-1]), seen[0]
            for r in range(1, args.ranks):
                assert seen[r] == seen[0], f'rank {r} switched {seen[r]}, rank 0 {seen[0]}'
            assert seen[0][-1][3] == autotune_log.parameters(best), \
                f'kept {seen[0][-1][3]}, the log chose {best}'
            if args.hosts:
                tried = {r['hierarchical_allreduce'] for r in records}
                assert tried == {'0', '1'}, f'hierarchical_allreduce in the log: {tried}'
                assert all(p[4] in ('0', '1') for _, _, _, p in seen[0]), seen[0]
        except AssertionError as e:
            print(f'FAIL: {e}\n--- command\n{" ".join(cmd)}\n--- stdout\n{p.stdout}'
                  f'--- stderr\n{p.stderr}')
            if os.path.exists(log):
                with open(log) as f:
                    print(f'--- {log}\n{f.read()}')
            return 1
        with open(log) as f:
            print(f.read(), end='')
    print('PASS')
    return 0


if __name__ == '__main__':
    sys.exit(main())
