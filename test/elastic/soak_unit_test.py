"""Unit tests of the elastic soak's pure parts: the policy model against the documented rules,
the schedule draw, and the invariant checks against hand-made logs (each check must catch what it
is for). Run: /usr/bin/python3 -m pytest -q test/elastic/soak_unit_test.py"""

import copy
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import soak_checks  # noqa: E402
import soak_schedule  # noqa: E402
from soak_schedule import Event, PolicyModel  # noqa: E402

NAMES = soak_schedule.local_host_names('node7.example')


def test_local_names_are_distinct_and_local():
    assert NAMES[:4] == ['localhost', '127.0.0.1', 'node7.example', 'node7']
    assert len(set(NAMES)) == len(NAMES)
    assert soak_schedule.local_host_names('localhost')[:4] == [
        'localhost', '127.0.0.1', 'LOCALHOST', 'Localhost']


def model(hosts, max_np, min_np, cooldown=None, reset_limit=None, timeout=30):
    return PolicyModel(hosts, max_np, min_np, cooldown, reset_limit, timeout)


def test_model_first_generation_orders_hosts_by_name_and_caps():
    # elastic/README.md: new hosts are appended sorted by name; --max-np caps.
    m = model([('localhost', 2), ('127.0.0.1', 2)], 3, 1)
    assert m.hosts_by_rank() == ['127.0.0.1', '127.0.0.1', 'localhost']


def test_model_below_min_np_after_a_failure_holds_then_fails():
    # discovery localhost:2, 127.0.0.1:1, -np 3 --min-np 2 --max-np 3; rank 2 on localhost
    # killed: localhost blacklisted (rank 1 there released), one slot left: the survivor is held
    # (generation 1, on hold) and the job fails after the elastic timeout.
    m = model([('localhost', 2), ('127.0.0.1', 1)], 3, 2, timeout=2)
    assert m.hosts_by_rank() == ['127.0.0.1', 'localhost', 'localhost']
    m.lose(2, 'kill')
    e = m.expectation()
    assert e.outcome == 'fail' and e.resets == (1, 1)
    # The engine's own words (test/elastic/driver_e2e.py, test_below_min_np_after_failure).
    assert re.match(e.message, 'fewer than --min-np=2 slots for longer than --elastic-timeout=2 s '
                    '(1 available after generation 1)')
    assert e.first_cause == 'rank 2 on localhost killed by SIGKILL; localhost blacklisted'


def test_model_every_host_blacklisted():
    m = model([('localhost', 1), ('127.0.0.1', 1)], 2, 2)
    m.lose(0, 'raise')  # 127.0.0.1 out; localhost's one slot is below --min-np=2
    assert m.expectation().message.startswith('fewer than --min-np=2')
    m2 = model([('localhost', 1), ('127.0.0.1', 1)], 2, 1)
    m2.lose(0, 'stop')
    m2.lose(0, 'kill')  # no worker and no host left
    e = m2.expectation()
    assert re.match(e.message, 'every host is blacklisted (127.0.0.1, localhost) after its '
                    'workers failed; no worker is left')
    assert e.resets == (1, 1)  # the second loss publishes nothing: the job ends


def test_model_sigterm_frees_the_slot_for_a_joiner_and_survivors_keep_low_ranks():
    m = model([('a', 2), ('b', 2), ('c', 1)], 5, 1)
    m.lose(0, 'term')  # a:0 leaves, no blacklist: the survivors go on, a joiner takes a:0
    assert [(w.host, w.slot) for w in m.placed] == [('a', 1), ('b', 0), ('b', 1), ('c', 0)]
    assert [(w.host, w.slot) for w in m.pending] == [('a', 0)]
    # The loss's generation, and maybe the join (the training may end first).
    assert m.expectation().resets == (1, 2) and not m.held
    assert m.expectation().first_cause == 'rank 0 on a left after SIGTERM'


def test_model_hold_ends_with_a_join_for_certain():
    m = model([('a', 1), ('b', 1)], 2, 2)
    m.lose(1, 'term')  # one survivor, --min-np 2: held until b's joiner joins
    assert m.held and m.expectation().resets == (2, 2)


def test_model_a_hold_has_ended_by_the_next_step_and_its_joiner_can_be_released():
    # Seed 312 of the soak: hosts 127.0.0.1:1, vm:2, LOCALHOST:1, localhost:1, -np 3 --min-np 3.
    # Rank 0 (127.0.0.1) leaves after SIGTERM: held (generation 1) until its slot's joiner joins
    # (generation 2). Training goes on only then, so at a later step that joiner is rank 2, and
    # removing 127.0.0.1 releases it (generation 3, on hold) and a joiner on vm ends the hold
    # (generation 4).
    m = model([('127.0.0.1', 1), ('vm', 2), ('LOCALHOST', 1), ('localhost', 1)], 3, 3)
    assert m.hosts_by_rank() == ['127.0.0.1', 'LOCALHOST', 'localhost']
    m.lose(0, 'term')
    assert m.held and m.expectation().resets == (2, 2)
    m.settle()
    assert m.hosts_by_rank() == ['LOCALHOST', 'localhost', '127.0.0.1'] and not m.pending
    assert m.change_hosts([('vm', 2), ('LOCALHOST', 1), ('localhost', 1)])
    assert m.expectation().resets == (3, 4)
    # A joiner not needed to end a hold may or may not have joined: its release may publish.
    m = model([('a', 1), ('b', 1)], 3, 1)
    assert not m.change_hosts([('a', 1), ('b', 1), ('c', 1)])
    m.settle()
    assert m.pending and m.expectation().resets == (0, 1)
    assert not m.change_hosts([('a', 1), ('b', 1)])
    assert m.expectation().resets == (0, 2)


def test_model_failure_releases_the_other_workers_of_the_host():
    m = model([('a', 2), ('b', 1), ('c', 1)], 3, 1)
    assert m.hosts_by_rank() == ['a', 'a', 'b']
    m.lose(1, 'kill')  # a blacklisted: rank 0 (a:0) is released too; c:0 gets a joiner
    assert [(w.host, w.slot) for w in m.placed] == [('b', 0)]
    assert [(w.host, w.slot) for w in m.pending] == [('c', 0)]
    assert not m.fresh_start


def test_model_no_survivor_starts_afresh():
    m = model([('a', 2), ('b', 1)], 2, 1)
    m.lose(0, 'kill')  # both workers were on a
    e = m.expectation()
    assert e.outcome == 'ok' and e.fresh_start and not m.can_go_on()


def test_model_host_changes():
    m = model([('a', 1), ('b', 1)], 2, 1)
    assert not m.change_hosts([('a', 1), ('b', 1), ('c', 1)])  # capped: no joiner, no reset
    assert m.expectation().resets == (0, 0)
    assert m.change_hosts([('a', 1), ('c', 1)])  # b gone: released; a joiner on c
    # The release's generation may share a decision with a later change: not certain alone.
    assert m.expectation().resets == (0, 2)
    m2 = model([('a', 1), ('b', 1)], 3, 1)
    assert not m2.change_hosts([('a', 1), ('b', 1), ('c', 1)])  # a joiner, maybe a join
    assert m2.expectation().resets == (0, 1)


def test_model_reset_limit_counts_every_generation():
    m = model([('a', 1), ('b', 1)], 2, 1, reset_limit=0)
    m.lose(1, 'term')
    e = m.expectation()
    assert e.outcome == 'fail' and re.match(e.message, 'reset limit 0 reached (--reset-limit); the '
                                            'next reset was due to: rank 1 on b left after SIGTERM')
    assert e.fail_cause == 'rank 1 on b left after SIGTERM'
    # A second loss in the reset may reach chorusrun first (soak seed 376: rank 1 raised, rank 2
    # was SIGKILLed as its reset began, and the refused reset named rank 2).
    events = [Event('e0', 'raise', 'step', 1, step=6, host='b'),
              Event('e1', 'kill', 'reset_begin', 2, after='e0', host='b', model_rank=1)]
    m = model([('a', 1), ('b', 2), ('c', 1)], 4, 1, reset_limit=0)
    soak_schedule.replay_events(m, events[:1])
    assert m.expectation().fail_cause.startswith('rank 1 on b')
    m = model([('a', 1), ('b', 2), ('c', 1)], 4, 1, reset_limit=0)
    soak_schedule.replay_events(m, events)
    e = m.expectation()
    assert e.outcome == 'fail' and e.fail_cause == '' and not events[1].must_strike
    # The loss and the join that refills its slot are two.
    m = model([('a', 1), ('b', 1)], 2, 2, reset_limit=1)
    m.lose(1, 'term')
    assert m.expectation().outcome == 'fail' and m.expectation().resets[0] == 2


def test_model_cooldown_brings_the_host_back():
    m = model([('a', 1), ('b', 1)], 2, 2, cooldown=(1, 2))
    m.lose(0, 'kill')  # b alone is below --min-np=2 until a is back
    e = m.expectation()
    assert e.outcome == 'ok' and m.held and e.resets == (2, 2)
    m2 = model([('a', 1)], 1, 1, cooldown=(1, 2))
    m2.lose(0, 'kill')
    assert m2.expectation().outcome == 'ok' and m2.fresh_start


def test_model_second_loss_in_the_reset_may_share_its_generation():
    m = model([('a', 1), ('b', 1), ('c', 1)], 3, 1)
    m.lose(2, 'kill')
    m.lose(0, 'term', in_reset='reset_begin')
    assert m.expectation().resets == (1, 3)
    # A hold whose survivor is lost before it ends never sees its join: b's joiner and a new
    # worker on a start afresh, in a generation of their own or in the one of the second loss.
    m = model([('a', 1), ('b', 1)], 2, 2)
    m.lose(1, 'term')
    assert m.expectation().resets == (2, 2)
    m.lose(0, 'term', in_reset='reset_begin')
    assert m.expectation().resets[0] == 1 and m.fresh_start


def test_draw_is_deterministic_and_events_fit_the_training():
    for seed in range(200):
        a, b = soak_schedule.draw(seed, NAMES), soak_schedule.draw(seed, NAMES)
        assert a.describe() == b.describe() and a.plan('m', 'h') == b.plan('m', 'h')
        assert 2 <= a.max_np <= 4 and 1 <= a.min_np <= a.max_np
        assert sum(s for _, s in a.hosts) >= a.max_np
        steps = [e.step for e in a.events if e.phase in ('step', 'soak')]
        assert steps == sorted(steps) and all(0 < s < a.min_total_steps() for s in steps)
        lo, hi = a.expect.resets
        assert 0 <= lo <= hi
        if a.reset_limit is not None:
            # Certain either way: enough for every generation, or too few at a known point.
            failed = a.expect.message.startswith('reset limit')
            assert failed == (a.reset_limit < lo) and (failed or a.reset_limit >= hi)
        if a.expect.outcome == 'fail' and a.elastic_timeout == soak_schedule.FAIL_TIMEOUT_S:
            assert a.expect.joiners == 0  # no joiner must start within the short timeout
    kinds = {e.kind for seed in range(200) for e in soak_schedule.draw(seed, NAMES).events}
    assert kinds >= {'kill', 'stop', 'term', 'raise', 'exit0', 'ext_kill', 'ext_stop',
                     'ext_term', 'add_host', 'remove_host'}
    expects = [soak_schedule.draw(s, NAMES).expect for s in range(200)]
    assert {e.outcome for e in expects} == {'ok', 'exit0', 'fail'}
    assert {e.message.split(' ')[0] for e in expects if e.outcome == 'fail'} == {
        'fewer', 'every', 'reset'}


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


def test_outcome():
    fail = soak_schedule.Expectation(outcome='fail', message=r'fewer than --min-np=2 slots for '
                                     r'longer than --elastic-timeout=3 s \(1 available after '
                                     r'generation \d+\)')
    lines = ['chorusrun: elastic job failed: fewer than --min-np=2 slots for longer than '
             '--elastic-timeout=3 s (1 available after generation 1)']
    assert soak_checks.check_outcome(fail, 1, lines, [], 2) == []
    assert soak_checks.check_outcome(fail, 137, lines, [], 2)
    assert soak_checks.check_outcome(fail, 1, [lines[0].replace('(1 a', '(2 a')], [], 2)
    limit = soak_schedule.Expectation(
        outcome='fail', message=r'reset limit 0 reached \(--reset-limit\); the next reset was '
        'due to: ', fail_cause='rank 1 on b left after SIGTERM')
    text = ('chorusrun: elastic job failed: reset limit 0 reached (--reset-limit); the next '
            'reset was due to: rank 1 on b left after SIGTERM')
    assert soak_checks.check_outcome(limit, 1, [text], [], 2) == []
    assert soak_checks.check_outcome(limit, 1, [text.replace('rank 1', 'rank 0')], [], 2)


# A real run (seed 4 of the soak: hosts vm:2,localhost:2, --max-np 3 --min-np 3; rank 1 on
# localhost leaves by SIGTERM at step 15, then the new rank 0 once the world is formed again).
SEED4 = [
    'chorusrun: generation 1: localhost (rank 1 left after SIGTERM), size 3 -> 2, cause: rank 1 '
    'on localhost left after SIGTERM; on hold: fewer than --min-np=3 workers, waiting up to '
    '--elastic-timeout=30 s for more',
    'chorusrun: generation 2: size 2 -> 3, cause: joined: rank 2 on localhost',
    'chorusrun: generation 3: localhost (rank 0 left after SIGTERM), size 3 -> 2, cause: rank 0 '
    'on localhost left after SIGTERM; on hold: fewer than --min-np=3 workers, waiting up to '
    '--elastic-timeout=30 s for more',
    'chorusrun: generation 4: size 2 -> 3, cause: joined: rank 2 on localhost',
]
SEED4_FAULTS = [dict(id='e0', kind='term', host='localhost'),
                dict(id='e1', kind='term', host='localhost')]


def seed4_schedule():
    return soak_schedule.Schedule(
        seed=4, hosts=[('vm', 2), ('localhost', 2)], reserve=('127.0.0.1', 1), max_np=3,
        min_np=3, elastic_timeout=30, cooldown=None, reset_limit=None, epochs=2, samples=576,
        commit_every=2, hidden=64, step_seconds=0.02, slow_step_seconds=0.2, spawn_child=False,
        events=[], expect=soak_schedule.Expectation(
            outcome='ok', first_generation=['localhost', 'localhost', 'vm'],
            first_cause='rank 1 on localhost left after SIGTERM', resets=(3, 5),
            max_slots={'vm': 2, 'localhost': 2}))


def test_parse_reset_lines():
    r = soak_checks.parse_reset_lines(['[0]<stderr>: not a reset line'] + SEED4)
    assert [x['gen'] for x in r] == [1, 2, 3, 4]
    assert r[0]['losses'] == [(1, 'localhost', 'left after SIGTERM', False)]
    assert r[0]['hold'] == (3, 30) and r[1]['hold'] is None
    assert r[1]['joined'] == [(2, 'localhost')] and not r[1]['losses']
    line = ('chorusrun: generation 3: -LOCALHOST (rank 2 silent for 5s (no heartbeat: hung, '
            'stopped or cut off), killed, blacklisted) +vm, size 3 -> 3, cause: rank 2 on '
            'LOCALHOST silent for 5s (no heartbeat: hung, stopped or cut off), killed; LOCALHOST '
            'blacklisted; hosts changed: added [vm], removed [a, b]; joined: rank 2 on vm')
    r = soak_checks.parse_reset_lines([line])[0]
    assert r['losses'] == [(2, 'LOCALHOST', soak_schedule.HOW['stop'], True)]
    assert r['changed'] == 'added [vm], removed [a, b]' and r['joined'] == [(2, 'vm')]
    assert not r['unknown']


def test_resets_accept_a_real_run():
    assert soak_checks.check_resets(seed4_schedule(), SEED4, SEED4_FAULTS, 0) == []


def _resets(lines=SEED4, faults=SEED4_FAULTS, status=0, schedule=None):
    return soak_checks.check_resets(schedule or seed4_schedule(), lines, faults, status)


def test_resets_catch_what_the_policy_forbids():
    def line(i, old, new):
        lines = list(SEED4)
        lines[i] = lines[i].replace(old, new)
        return lines
    assert any('size 2 before, but the last generation had 3' in x
               for x in _resets(line(2, 'size 3 -> 2', 'size 2 -> 2')))
    assert any('not on hold' in x for x in _resets(line(0, '; on hold', '; at hold')))
    assert any('expected 2' in x for x in _resets(SEED4[:1] + SEED4[2:]))
    assert any('joiners at ranks [1]' in x for x in
               _resets(line(1, 'joined: rank 2', 'joined: rank 1')))
    assert any('more than --max-np' in x for x in
               _resets(line(1, 'size 2 -> 3', 'size 2 -> 4')))
    assert any('no fault explains' in x for x in
               _resets(line(2, 'rank 0 on localhost left', 'rank 0 on vm left')))
    assert any('blacklisted True' in x for x in _resets(line(
        0, 'left after SIGTERM; on hold', 'left after SIGTERM; localhost blacklisted; on hold')))
    assert any('fault e1 (term on localhost) struck, but no reset names it' in x for x in
               _resets(faults=SEED4_FAULTS + [dict(id='e1', kind='term', host='localhost')]))
    assert any('but the schedule brings 3 to 5' in x for x in _resets(
        SEED4 + ['chorusrun: generation 5: size 3 -> 3, cause: joined: rank 2 on vm',
                 'chorusrun: generation 6: size 3 -> 3, cause: joined: rank 2 on vm']))
    assert any('first event' in x for x in _resets(line(0, 'rank 1 on', 'rank 0 on')))
    # With a second loss in the first one's reset, the two may come in either order.
    second = seed4_schedule()
    second.events = [soak_schedule.Event('e0', 'term', 'step', 1, step=15),
                     soak_schedule.Event('e1', 'term', 'reset_end', 0, after='e0')]
    swapped = [SEED4[2].replace('generation 3', 'generation 1'),
               SEED4[0].replace('generation 1', 'generation 2').replace('rank 1', 'rank 0')]
    assert not any('first event' in x for x in _resets(swapped, schedule=second))
    assert any('first event' in x for x in _resets(swapped))
    assert any('a cause none of' in x for x in _resets(line(1, 'joined:', 'joint:')))
    assert any('a joining worker was lost' in x for x in _resets(
        SEED4 + ['chorusrun: worker w7 on vm exited with code 1 before it joined; vm '
                 'blacklisted']))


def _formed(gen, size, pids_hosts, step=0):
    return [dict(ev='formed', pid=pid, gen=gen, rank=rank, size=size, host=host, t=gen, step=step)
            for rank, (pid, host) in enumerate(pids_hosts)]


def seed4_records():
    recs = _formed(0, 3, [(10, 'localhost'), (11, 'localhost'), (12, 'vm')])
    recs += _formed(2, 3, [(10, 'localhost'), (12, 'vm'), (13, 'localhost')])
    recs += _formed(4, 3, [(12, 'vm'), (13, 'localhost'), (14, 'localhost')])
    recs += [dict(ev='done', pid=p, gen=g, rank=0, size=3, host='h', t=g, step=1)
             for g, p in ((0, 10), (2, 10), (4, 12))]
    return recs


def _generations(recs, lines=SEED4):
    return soak_checks.check_generations(seed4_schedule(), recs, lines)


def test_generations_accept_a_real_run():
    assert _generations(seed4_records()) == []


def test_generations_catch_what_the_policy_forbids():
    def changed(gen, rank, **kw):
        recs = seed4_records()
        for r in recs:
            if r['ev'] == 'formed' and r['gen'] == gen and r['rank'] == rank:
                r.update(kw)
        return recs
    # Survivors out of order; a newcomer before a survivor; a joiner that is no new worker.
    v = _generations([r if not (r['ev'] == 'formed' and r['gen'] == 2) else
                      dict(r, pid={0: 12, 1: 10, 2: 13}[r['rank']]) for r in seed4_records()])
    assert any('changed order' in x for x in v), v
    v = _generations([r if not (r['ev'] == 'formed' and r['gen'] == 2) else
                      dict(r, pid={0: 10, 1: 13, 2: 12}[r['rank']]) for r in seed4_records()])
    assert any('a new worker ranks before a survivor' in x for x in v), v
    assert any('not a new worker' in x for x in _generations(changed(2, 2, pid=11)))
    assert any('joined on localhost, but pid 13 on vm' in x for x in
               _generations(changed(2, 2, host='vm')))
    # The first world's hosts; a size the line does not say; a world formed on hold.
    assert any('generation 0 has hosts' in x for x in _generations(changed(0, 2, host='x')))
    recs = seed4_records() + _formed(3, 2, [(12, 'vm'), (13, 'localhost')])
    assert any('published on hold' in x for x in _generations(recs))
    recs = [r for r in seed4_records() if not (r['ev'] == 'formed' and r['gen'] == 4 and
                                               r['rank'] == 2)]
    assert any('only ranks [0, 1] of 3' in x for x in _generations(recs))
    # A host over its slots, and a blacklisted host used again.
    assert any('3 workers on localhost' in x for x in _generations(changed(2, 1, host='localhost')))
    lines = list(SEED4)
    lines[2] = lines[2].replace('left after SIGTERM; on hold',
                                'killed by SIGKILL; localhost blacklisted; on hold')
    assert any('uses localhost, gone from the job at generation 3' in x
               for x in _generations(seed4_records(), lines))


def test_joiners_must_join_while_the_job_trains():
    recs = [dict(ev='start', pid=20, gen=-1, rank=-1, size=0, host='vm', t=0.0, worker_id='w5'),
            dict(ev='init', pid=20, gen=-1, rank=-1, size=0, host='vm', t=1.0),
            dict(ev='done', pid=10, gen=1, rank=0, size=1, host='a', t=20.0, step=9)]
    v = soak_checks.check_joiners(recs, [])
    assert v and 'never joined' in v[0]
    assert soak_checks.check_joiners(recs + [dict(recs[1], ev='formed', gen=2)], []) == []
    # Stopped by chorusrun: late, or its host blacklisted.
    late = ['chorusrun: worker w5 on vm did not start chorus within --elastic-timeout=3 s; '
            'stopped']
    assert soak_checks.check_joiners(recs, late) == []
    gone = ['chorusrun: generation 2: -vm (rank 1 killed by SIGKILL, blacklisted), size 2 -> 1, '
            'cause: rank 1 on vm killed by SIGKILL; vm blacklisted']
    assert soak_checks.check_joiners(recs, gone) == []
    assert soak_checks.check_joiners(recs[:2] + [dict(recs[2], t=5.0)], []) == []


def test_cpu_windows():
    busy = [float(t) for t in range(0, 5)]
    samples = [(t / 10, 0.01 * t / 10) for t in range(0, 100)]  # 1% of a core
    samples += [(10 + t / 10, 0.1 + 0.9 * t / 10) for t in range(0, 40)]  # then 90%
    worst, idle, v = soak_checks.check_cpu(samples, 2.0, 0.3, busy)
    assert worst > 0.85 and idle > 0.85 and v
    worst, idle, v = soak_checks.check_cpu(samples[:100], 2.0, 0.3, busy)
    assert worst < 0.02 and not v
