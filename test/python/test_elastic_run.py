"""hvd.elastic.run: recovery from a failed collective (back to the last commit), host updates
(state kept), the reset with its callbacks, and the plain single call when nothing happens.
Each reset really re-forms chorus (shutdown, then init) on every rank."""

import pytest
import torch

import chorus
import chorus.elastic as elastic
import chorus.torch as hvd


def weight_model(rank):
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(10.0 * (rank + 1))  # rank 0: 10.0
    return model


class Counts:
    def __init__(self, state):
        self.calls, self.resets, self.restores, self.syncs = [], 0, 0, 0
        state.register_reset_callbacks([self.on_reset])
        restore, sync = state.restore, state.sync

        def counted_restore():
            self.restores += 1
            restore()

        def counted_sync():
            self.syncs += 1
            sync()

        state.restore, state.sync = counted_restore, counted_sync

    def on_reset(self):
        assert hvd.is_initialized()
        self.resets += 1


def gathered_weights(model, name):
    return hvd.allgather(model.weight.detach().reshape(1, -1), name=name)


def test_internal_error_resumes_from_the_last_commit(world):
    rank, size = world
    model = weight_model(rank)
    state = hvd.elastic.TorchState(model, None, step=0, executed=0)
    counts = Counts(state)
    failed, steps_run = [], []

    @hvd.elastic.run
    def train(state, steps, fail_at):
        counts.calls.append(state.step)
        while state.step < steps:
            with torch.no_grad():
                state.model.weight.add_(1.0)
            state.step += 1
            state.executed += 1
            steps_run.append(state.step)
            # Every collective of the step: a failure anywhere would end here.
            hvd.allreduce(torch.ones(1), name="elastic.run.step")
            if state.step % 3 == 0:
                state.commit()
            if state.step == fail_at and not failed:
                failed.append(state.step)
                raise hvd.HorovodInternalError("injected failure at step %d" % state.step)
        return state.step

    assert train(state, 10, fail_at=5) == 10
    # Steps 4 and 5 were lost (not committed) and done again after the restore to step 3.
    assert counts.calls == [0, 3]
    assert (counts.resets, counts.restores, counts.syncs) == (1, 1, 2)
    assert steps_run == [1, 2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 10]
    assert state.executed == 10  # the restore rolled it back to 3 too
    assert torch.equal(model.weight, torch.full((1, 2), 10.0 + 10))
    everyone = gathered_weights(model, "elastic.run.weights")
    assert all(torch.equal(row, everyone[0]) for row in everyone) and everyone.shape[0] == size
    assert hvd.is_initialized() and hvd.size() == size and hvd.rank() == rank


def test_a_failure_before_the_first_commit_restores_the_synced_state(world):
    # Every rank starts with a state of its own, as a worker that joins a running job does: the
    # sync gives it the job's (rank 0's). A failure before its first commit must take it back
    # to that state, model and plain attributes alike, not to the one it was started with:
    # should the workers it took the state from be gone, it is the job's only copy.
    rank, size = world
    model = weight_model(rank)
    state = hvd.elastic.TorchState(model, None, step=100 * rank)
    restored = []
    restore = state.restore

    def recorded_restore():
        restore()
        restored.append((float(state.model.weight[0, 0]), state.step))

    state.restore = recorded_restore
    failed = []

    @hvd.elastic.run
    def train(state):
        with torch.no_grad():
            state.model.weight.add_(1.0)
        state.step += 1
        if not failed:
            failed.append(True)
            raise hvd.HorovodInternalError("injected failure before the first commit")
        return state.step

    assert train(state) == 1
    assert restored == [(10.0, 0)]  # rank 0's initial state, on every rank
    assert torch.equal(model.weight, torch.full((1, 2), 11.0))


def test_hosts_updated_keeps_the_state_and_resets(world):
    rank, size = world
    model = weight_model(rank)
    state = hvd.elastic.TorchState(model, None, step=0)
    counts = Counts(state)
    sizes_at_reset = []
    state.register_reset_callbacks([lambda: sizes_at_reset.append(hvd.size())])
    notified = []

    @hvd.elastic.run
    def train(state):
        counts.calls.append(state.step)
        while state.step < 8:
            with torch.no_grad():
                state.model.weight.mul_(2.0)
            state.step += 1
            if state.step == 4 and rank == size - 1 and not notified:
                # What the driver's notification will do: reach one worker.
                notified.append(True)
                elastic.notification_manager.notify_hosts_updated(
                    1, elastic.HostUpdateResult.added)
            if state.step % 2 == 0:
                state.commit()
        return state.step

    assert train(state) == 8
    # The interrupt came at the commit of step 4 on every rank; nothing was rolled back.
    assert counts.calls == [0, 4]
    assert (counts.resets, counts.restores, counts.syncs) == (1, 0, 2)
    assert sizes_at_reset == [size]
    assert torch.equal(model.weight, torch.full((1, 2), 10.0 * 2 ** 8))
    everyone = gathered_weights(model, "elastic.hosts.weights")
    assert all(torch.equal(row, everyone[0]) for row in everyone)


def test_hosts_updated_with_skip_sync_keeps_uncommitted_progress(world):
    rank, _ = world
    model = weight_model(0)
    state = hvd.elastic.TorchState(model, None, rounds=0)
    counts = Counts(state)
    interrupted = []

    @hvd.elastic.run
    def train(state):
        counts.calls.append(float(state.model.weight[0, 0]))
        if not interrupted:
            with torch.no_grad():
                state.model.weight.add_(rank + 1)  # uncommitted, rank-dependent
            interrupted.append(True)
            raise hvd.HostsUpdatedInterrupt(True)
        return float(state.model.weight[0, 0])

    assert train(state) == 10.0 + rank + 1  # kept, and not synced from rank 0
    assert counts.calls == [10.0, 10.0 + rank + 1]
    assert (counts.resets, counts.restores, counts.syncs) == (1, 0, 1)


def test_a_function_that_returns_is_called_once(world):
    rank, size = world
    state = hvd.elastic.TorchState(weight_model(rank), None, tag="rank%d" % rank)
    counts = Counts(state)

    @hvd.elastic.run
    def train(state, a, b=0):
        counts.calls.append(state.tag)
        return a + b

    assert train(state, 2, b=3) == 5
    assert counts.calls == ["rank0"]  # synced from rank 0 first, as Horovod does
    assert (counts.resets, counts.restores, counts.syncs) == (0, 0, 1)
    assert train.__name__ == "train"


@pytest.mark.parametrize("error", [ValueError("bad"), KeyError("k"),
                                   chorus.ChorusValueError("the runtime refused an argument")])
def test_other_errors_propagate_without_a_reset(world, error):
    rank, _ = world
    state = hvd.elastic.TorchState(weight_model(rank), None)
    counts = Counts(state)

    @hvd.elastic.run
    def train(state):
        counts.calls.append(1)
        raise error

    # ChorusValueError is a HorovodInternalError too, but an argument error: not recovered from.
    with pytest.raises(type(error)):
        train(state)
    assert counts.calls == [1]
    assert (counts.resets, counts.restores) == (0, 0)
