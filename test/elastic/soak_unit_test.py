"""Unit tests of the elastic soak's pure parts: the policy model against the documented rules,
the schedule draw, and the invariant checks against hand-made logs (each check must catch what it
is for). Run: /usr/bin/python3 -m pytest -q test/elastic/soak_unit_test.py"""

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import soak_checks  # noqa: E402
import soak_schedule  # noqa: E402
from soak_schedule import PolicyModel  # noqa: E402

NAMES = soak_schedule.local_host_names('node7.example')


def test_local_names_are_distinct_and_local():
    assert NAMES[:4] == ['localhost', '127.0.0.1', 'node7.example', 'node7']
    assert len(set(NAMES)) == len(NAMES)
    assert soak_schedule.local_host_names('localhost')[:4] == [
        'localhost', '127.0.0.1', 'LOCALHOST', 'Localhost']


def test_model_first_generation_orders_hosts_by_name_and_caps():
    # elastic/README.md: new hosts are appended sorted by name; --max-np caps.
    m = PolicyModel([('localhost', 2), ('127.0.0.1', 2)], 3, 1, None, None)
    assert m.hosts_by_rank() == ['127.0.0.1', '127.0.0.1', 'localhost']


def test_model_below_min_np_after_a_failure_fails():
    # discovery localhost:2, 127.0.0.1:1, -np 3 --min-np 2 --max-np 3; rank 2 on localhost
    # killed: localhost blacklisted, one slot left.
    m = PolicyModel([('localhost', 2), ('127.0.0.1', 1)], 3, 2, None, None)
    assert m.hosts_by_rank() == ['127.0.0.1', 'localhost', 'localhost']
    m.lose(2, 'kill')
    e = m.expectation()
    assert e.outcome == 'fail' and e.message.startswith('fewer than --min-np=2 slots')
    # No generation starts, so no reset line (the cause is never printed).
    assert e.causes == [] and e.resets == 0


def test_model_every_host_blacklisted():
    m = PolicyModel([('localhost', 1), ('127.0.0.1', 1)], 2, 2, None, None)
    m.lose(0, 'raise')
    m2 = PolicyModel([('localhost', 1)], 1, 1, None, None)
    m2.lose(0, 'stop')
    assert m.expectation().message.startswith('fewer than --min-np=2')
    assert m2.expectation().message == 'every host is blacklisted ('


def test_model_sigterm_refills_the_slot_and_survivors_keep_low_ranks():
    m = PolicyModel([('a', 2), ('b', 2), ('c', 1)], 5, 1, None, None)
    m.lose(0, 'term')  # a:0 leaves, no blacklist: survivors first, then the free slot a:0
    assert m.workers == [('a', 1), ('b', 0), ('b', 1), ('c', 0), ('a', 0)]
    assert m.expectation().causes == ['rank 0 on a left after SIGTERM']


def test_model_failure_releases_the_other_workers_of_the_host():
    m = PolicyModel([('a', 2), ('b', 1), ('c', 1)], 3, 1, None, None)
    assert m.hosts_by_rank() == ['a', 'a', 'b']
    m.lose(1, 'kill')  # a blacklisted: rank 0 (a:0) goes too; c:0 is free
    assert m.workers == [('b', 0), ('c', 0)]


def test_model_host_changes():
    m = PolicyModel([('a', 1), ('b', 1)], 2, 1, None, None)
    assert not m.change_hosts([('a', 1), ('b', 1), ('c', 1)])  # capped: the ranks stay
    assert m.change_hosts([('a', 1), ('c', 1)])  # b gone: c takes its place
    assert m.workers == [('a', 0), ('c', 0)] and m.resets == 1


def test_model_reset_limit():
    m = PolicyModel([('a', 1), ('b', 1)], 2, 1, None, 0)
    m.lose(1, 'term')
    assert m.expectation().message == ('reset limit 0 reached (--reset-limit); the next reset '
                                       'was due to: rank 1 on b left after SIGTERM')


def test_model_cooldown_starts_afresh():
    m = PolicyModel([('a', 1), ('b', 1)], 2, 2, (1, 2), None)
    m.lose(0, 'kill')
    e = m.expectation()
    assert e.outcome == 'ok' and e.fresh_start and e.resets is None


def test_draw_is_deterministic_and_events_fit_the_training():
    for seed in range(200):
        a, b = soak_schedule.draw(seed, NAMES), soak_schedule.draw(seed, NAMES)
        assert a.describe() == b.describe() and a.plan('m', 'h') == b.plan('m', 'h')
        assert 2 <= a.max_np <= 4 and 1 <= a.min_np <= a.max_np
        assert sum(s for _, s in a.hosts) >= a.max_np
        steps = [e.step for e in a.events if e.phase in ('step', 'soak')]
        assert steps == sorted(steps) and all(0 < s < a.min_total_steps() for s in steps)
    kinds = {e.kind for seed in range(200) for e in soak_schedule.draw(seed, NAMES).events}
    assert kinds >= {'kill', 'stop', 'term', 'raise', 'exit0', 'ext_kill', 'ext_stop',
                     'ext_term', 'add_host', 'remove_host'}
    outcomes = {soak_schedule.draw(s, NAMES).expect.outcome for s in range(200)}
    assert outcomes == {'ok', 'exit0', 'fail'}


# A hand-made log of 12 samples: 2 ranks train steps 1-3 of epoch 0 (2 samples each per step,
# a commit at step 2), rank 1 is killed, rank 0 resumes alone at step 2 and trains steps 3-4.
def _log():
    recs = []

    def rec(ev, pid, gen, rank, size, t, **kw):
        recs.append(dict(ev=ev, pid=pid, gen=gen, rank=rank, size=size, t=t, **kw))

    order = list(range(12))
    for r in (0, 1):
        rec('formed', 10 + r, 0, r, 2, 0.0, epoch=0, step=0, plain_step=0, sampler_epoch=0,
            commits=0, processed=0, digest='d0', host='a')
    for step in (1, 2, 3):
        for r in (0, 1):
            base = (step - 1) * 4 + r * 2
            rec('intent', 10 + r, 0, r, 2, step, step=step, epoch=0, indices=order[base:base + 2])
            rec('done', 10 + r, 0, r, 2, step + 0.1, step=step, epoch=0, digest=f'd{step}')
        if step == 2:
            for r in (0, 1):
                rec('commit', 10 + r, 0, r, 2, step + 0.2, step=2, commits=1)
    rec('fault', 11, 0, 1, 2, 3.5, id='e0', kind='kill')
    rec('restore', 10, 0, 0, 2, 3.6)
    rec('formed', 10, 1, 0, 1, 4.0, epoch=0, step=2, plain_step=2, sampler_epoch=0, commits=1,
        processed=8, digest='d2', host='a')
    for step, idx in ((3, [8, 9]), (4, [10, 11])):
        rec('intent', 10, 1, 0, 1, step + 2, step=step, epoch=0, indices=idx)
        rec('done', 10, 1, 0, 1, step + 2.1, step=step, epoch=0, digest=f'e{step}')
    rec('final', 10, 1, 0, 1, 7.0, epoch=1, step=4, commits=2, digest='e4')
    return recs


OK = soak_schedule.Expectation(outcome='ok')


def test_lineage_accepts_a_rollback():
    assert soak_checks.check_lineage(_log(), OK, 12, 1, 0) == []
    assert soak_checks.check_state_agreement(_log()) == []
    assert soak_checks.check_outcome(OK, 0, [], _log(), 1) == []


def _mutated(fn):
    recs = copy.deepcopy(_log())
    fn(recs)
    return soak_checks.check_lineage(recs, OK, 12, 1, 0)


def test_lineage_catches_a_lost_sample():
    v = _mutated(lambda recs: [r['indices'].remove(11) for r in recs
                               if r['ev'] == 'intent' and r['gen'] == 1 and r['step'] == 4])
    assert any('never trained' in x for x in v), v


def test_lineage_catches_a_repeated_sample():
    def twice(recs):
        for r in recs:
            if r['ev'] == 'intent' and r['gen'] == 1 and r['step'] == 3:
                r['indices'] = [0, 9]
    assert any('more than once' in x for x in _mutated(twice))


def test_lineage_catches_committed_work_lost():
    def back(recs):
        for r in recs:
            if r['ev'] == 'formed' and r['gen'] == 1:
                r.update(step=1, digest='d1')
    v = _mutated(back)
    assert any('committed step 2' in x for x in v), v


def test_lineage_catches_a_resume_from_parameters_the_job_never_had():
    def other(recs):
        for r in recs:
            if r['ev'] == 'formed' and r['gen'] == 1:
                r['digest'] = 'd0'
    assert any('resumed at step 2 with parameters d0' in x for x in _mutated(other))


def test_lineage_catches_diverged_replicas_and_a_missing_rank():
    def diverge(recs):
        for r in recs:
            if r['ev'] == 'done' and r['gen'] == 0 and r['step'] == 1 and r['rank'] == 1:
                r['digest'] = 'x'
    assert any('different parameters' in x for x in _mutated(diverge))

    def missing(recs):
        recs[:] = [r for r in recs if not (r['ev'] == 'intent' and r['gen'] == 0 and
                                           r['step'] == 2 and r['rank'] == 1)]
    assert any('rank 1 never started it' in x for x in _mutated(missing))


def test_state_agreement_catches_a_rolled_back_attribute():
    recs = _log()
    recs[-6]['plain_step'] = 1  # generation 1's formed record
    assert recs[-6]['ev'] == 'formed'
    assert soak_checks.check_state_agreement(recs)


def test_outcome_and_resets():
    fail = soak_schedule.Expectation(outcome='fail', message='fewer than --min-np=2', resets=1,
                                     causes=['rank 2 on localhost killed by SIGKILL'])
    lines = ['chorusrun: generation 1: -localhost (rank 2 killed by SIGKILL), size 3 -> 1, '
             'cause: rank 2 on localhost killed by SIGKILL; localhost blacklisted',
             'chorusrun: elastic job failed: fewer than --min-np=2 slots for longer than ...']
    assert soak_checks.check_outcome(fail, 1, lines, [], 2) == []
    assert soak_checks.check_resets(fail, lines) == []
    assert soak_checks.check_outcome(fail, 137, lines[:1], [], 2)
    assert soak_checks.check_resets(fail, lines[1:])


def test_cpu_windows():
    busy = [float(t) for t in range(0, 5)]
    samples = [(t / 10, 0.01 * t / 10) for t in range(0, 100)]  # 1% of a core
    samples += [(10 + t / 10, 0.1 + 0.9 * t / 10) for t in range(0, 40)]  # then 90%
    worst, idle, v = soak_checks.check_cpu(samples, 2.0, 0.3, busy)
    assert worst > 0.85 and idle > 0.85 and v
    worst, idle, v = soak_checks.check_cpu(samples[:100], 2.0, 0.3, busy)
    assert worst < 0.02 and not v
