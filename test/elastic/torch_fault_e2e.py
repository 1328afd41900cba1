#!/usr/bin/python3
"""Elastic PyTorch training through chorusrun under a fault schedule, checked against a
reference run (the shape of Horovod's test/integration/test_elastic_torch.py).

Each fault case trains torch_fault_train.py with 2 ranks on hosts `127.0.0.1` (1 slot, rank 0)
and `localhost` (2 slots, one spare: --max-np 2); rank 0 ends itself at epoch 1, batch 6 (after
the commit at batch 3), by an uncaught exception or by SIGKILL. Its host is blacklisted and the
survivor becomes rank 0. With --min-np 2 the survivor alone is too few: it is held (rolled back
to the commit, in its process) until a new worker started in the spare slot is ready, and both
go on from the commit at size 2. Checked, with numbers:
  - the job ends with status 0 and two reset lines: the hold naming the failure and the
    blacklisting, then the join;
  - every epoch processed exactly the reference run's samples (nothing lost or repeated);
  - the survivor re-ran the epoch from its last commit (its epoch-1 line counts the batches
    since that commit) after exactly one reset, in the same process;
  - every rank ends with identical parameters, equal bit for bit (tolerance 0) to a fixed-size
    run of the same schedule without the fault (chorusrun -np 2 --gloo): a rollback to a commit
    followed by the same batches at the same size must not change a single bit.

The hosts case starts 2 ranks on `localhost`; at epoch 1 rank 0 adds `127.0.0.1:1` to the
discovery output, at epoch 2 removes it again (2 -> 3 -> 2 workers, each change acted on at a
commit, no rollback): every epoch still trains on every sample, repeating only the few the
sampler pads a new partition with, and the ranks end with identical parameters.

Usage: torch_fault_e2e.py --chorusrun PATH. Each run is bounded (240 s); exit 0 when all pass.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from discovery_file import DiscoveryFile

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, 'torch_fault_train.py')
RUN_TIMEOUT = 240
FAULT = {'1,6': [0]}  # epoch 1, batch 6: after the commit at batch 3 (batches-per-commit 4)


def run(args, env=None):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=RUN_TIMEOUT, env=env, stdin=subprocess.DEVNULL)
    epochs = [json.loads(line.split('EPOCH ', 1)[1]) for line in p.stdout.splitlines()
              if 'EPOCH {' in line]
    digests = dict(re.findall(r'DIGEST (\d+) ([0-9a-f]{64})', p.stdout))
    return p, epochs, digests


def samples_per_epoch(epochs):
    seen = {}
    for e in epochs:
        seen.setdefault(e['epoch'], set()).add(e['samples'])
    return seen


def discovery_dir(hosts):
    d = tempfile.mkdtemp(prefix='elastic_torch_')
    return d, DiscoveryFile(d, hosts).script


def check_hosts_case(chorusrun):
    d, script = discovery_dir('localhost:2\n')
    try:
        env = dict(os.environ, CHORUS_ELASTIC_DISCOVERY_INTERVAL='0.05')
        hosts = {'1': [3, 'localhost:2\n127.0.0.1:1\n'], '2': [2, 'localhost:2\n']}
        p, epochs, digests = run(
            [chorusrun, '-np', '2', '--host-discovery-script', script, sys.executable, TRAIN,
             '--hosts-schedule', json.dumps(hosts), '--hosts-file', os.path.join(d, 'hosts')],
            env)
        report = f'--- stdout\n{p.stdout}--- stderr\n{p.stderr}'
        assert p.returncode == 0, f'status {p.returncode}\n{report}'
        resets = [l for l in p.stderr.splitlines() if l.startswith('chorusrun: generation')]
        assert len(resets) == 2 and 'size 2 -> 3' in resets[0] and 'size 3 -> 2' in resets[1], \
            report
        assert 'blacklisted' not in p.stderr, report
        # Each change is acted on at a commit (the sampler's own count includes its padding).
        # Nothing lost; repeats only where a repartition pads the sampler to a multiple of the
        # new size (at most size - 1 = 2 per change, 2 changes).
        assert all(e['seen_unique'] == 512 and e['seen_total'] - 512 <= 4 for e in epochs), \
            report
        assert 3 in {e['size'] for e in epochs}, report  # some epoch ended at 3 ranks
        assert sorted(digests) == ['0', '1'] and len(set(digests.values())) == 1, report
        return 'hosts 2 -> 3 -> 2: every sample trained on in every epoch, parameters equal'
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check_fault_case(chorusrun, mode, reference):
    ref_digest, ref_samples = reference
    d, script = discovery_dir('127.0.0.1:1\nlocalhost:2\n')
    try:
        env = dict(os.environ, CHORUS_ELASTIC_DISCOVERY_INTERVAL='0.05')
        p, epochs, digests = run(
            [chorusrun, '-np', '2', '--min-np', '2', '--max-np', '2', '--host-discovery-script',
             script, sys.executable, TRAIN, '--exit-mode', mode, '--exit-schedule',
             json.dumps(FAULT)], env)
        report = f'--- stdout\n{p.stdout}--- stderr\n{p.stderr}'
        assert p.returncode == 0, f'status {p.returncode}\n{report}'
        how = 'killed by SIGKILL' if mode == 'kill' else 'exited with code 1'
        resets = [l for l in p.stderr.splitlines() if l.startswith('chorusrun: generation')]
        assert len(resets) == 2 and f'rank 0 on 127.0.0.1 {how}; 127.0.0.1 blacklisted' in \
            resets[0] and 'size 2 -> 1' in resets[0] and 'on hold' in resets[0], report
        assert 'size 1 -> 2, cause: joined: rank 1 on localhost' in resets[1], report
        assert samples_per_epoch(epochs) == ref_samples, \
            (samples_per_epoch(epochs), ref_samples, report)
        # Every sample trained on exactly once per epoch, counting the batches the ranks ran
        # after the rollback and none of those it undid.
        assert all(e['seen_total'] == e['seen_unique'] == 512 for e in epochs), report
        ran_epoch_0 = {e['start_rank'] for e in epochs if e['epoch'] == 0}
        assert ran_epoch_0 == {0, 1}, report
        # Epoch 1 after the fault: the survivor (rank 1 at start, rank 0 now, one reset in its
        # process) and the replacement (joined as rank 1, no reset).
        epoch_1 = sorted((e['rank'], e['start_rank'], e['resets'], e['size'], e['batches'])
                         for e in epochs if e['epoch'] == 1)
        # Both ran the epoch from the commit after batch 3 on: its 16 global batches (512
        # samples, 16 per rank, 2 ranks) less the 4 committed.
        assert epoch_1 == [(0, 1, 1, 2, 12), (1, 1, 0, 2, 12)], (epoch_1, report)
        assert sorted(digests) == ['0', '1'] and set(digests.values()) == {ref_digest}, \
            (digests, ref_digest, report)
        return f'{mode}: resumed at the commit after batch 3, parameters equal the reference'
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check_no_wait_case(chorusrun):
    """--min-np 1: the survivor goes on alone at once; the replacement joins at a later commit
    once it is ready (its start-up off the survivor's critical path)."""
    d, script = discovery_dir('127.0.0.1:1\nlocalhost:2\n')
    try:
        env = dict(os.environ, CHORUS_ELASTIC_DISCOVERY_INTERVAL='0.05')
        p, epochs, digests = run(
            [chorusrun, '-np', '2', '--min-np', '1', '--max-np', '2', '--host-discovery-script',
             script, sys.executable, TRAIN, '--exit-mode', 'kill', '--exit-schedule',
             json.dumps(FAULT), '--batch-sleep', '0.1'], env)
        report = f'--- stdout\n{p.stdout}--- stderr\n{p.stderr}'
        assert p.returncode == 0, f'status {p.returncode}\n{report}'
        resets = [l for l in p.stderr.splitlines() if l.startswith('chorusrun: generation')]
        assert len(resets) == 2 and 'size 2 -> 1' in resets[0] and 'on hold' not in resets[0] \
            and 'size 1 -> 2, cause: joined: rank 1 on localhost' in resets[1], report
        # Nothing lost; repeats only where a repartition pads the sampler to the new size.
        assert all(e['seen_unique'] == 512 and e['seen_total'] - 512 <= 2 for e in epochs), report
        assert 1 in {e['size'] for e in epochs if e['epoch'] == 1} or any(
            e['size'] == 2 and e['resets'] == 2 for e in epochs), report
        assert sorted(digests) == ['0', '1'] and len(set(digests.values())) == 1, report
        return 'kill, --min-np 1: the survivor went on alone, the replacement joined later'
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chorusrun', required=True)
    args = parser.parse_args()
    p, epochs, digests = run([args.chorusrun, '-np', '2', '--gloo', sys.executable, TRAIN])
    if p.returncode != 0 or sorted(digests) != ['0', '1'] or len(set(digests.values())) != 1:
        print(f'FAIL reference run: status {p.returncode}\n{p.stdout}{p.stderr}')
        return 1
    reference = (digests['0'], samples_per_epoch(epochs))
    print(f'reference: parameters {digests["0"][:16]}, samples per epoch {reference[1]}')
    failed = 0
    cases = [(mode, lambda mode=mode: check_fault_case(args.chorusrun, mode, reference))
             for mode in ('exception', 'kill')]
    cases.append(('no-wait', lambda: check_no_wait_case(args.chorusrun)))
    cases.append(('hosts', lambda: check_hosts_case(args.chorusrun)))
    for name, check in cases:
        try:
            print('PASS ' + check())
        except (AssertionError, subprocess.TimeoutExpired) as e:
            failed += 1
            print(f'FAIL {name}: {e}')
    print(f'{failed} failed' if failed else 'all passed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
