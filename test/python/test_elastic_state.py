"""chorus.torch.elastic.TorchState and chorus.elastic.ObjectState: commit, restore, sync, and
the collective host-update check, on every rank of the job (each rank starts with different
values, so a sync that does not take rank 0's values is caught)."""

import threading

import pytest
import torch

import chorus.elastic as elastic
import chorus.torch as hvd


def rank_model(rank):
    torch.manual_seed(100 + rank)  # a different model on every rank
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def local_step(model, optimizer, scale):
    """One optimizer step on this rank's own gradient (no collective)."""
    optimizer.zero_grad()
    for p in model.parameters():
        p.grad = torch.full_like(p, float(scale))
    optimizer.step()


def clone_state(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: clone_state(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(clone_state(v) for v in obj)
    return obj


def assert_same(a, b):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), (a, b)
    elif isinstance(a, dict):
        assert sorted(a) == sorted(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        assert a == b, (a, b)


def flat(model):
    return torch.cat([v.reshape(-1) for v in model.state_dict().values()])


def test_torch_state_restore_returns_exactly_the_committed_values(world):
    rank, _ = world
    model = rank_model(rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    local_step(model, optimizer, rank + 1)  # momentum buffers exist
    state = hvd.elastic.TorchState(model, optimizer, epoch=rank, batch=10 + rank)

    # Restore without a commit: the values at construction.
    model_0, optim_0 = clone_state(model.state_dict()), clone_state(optimizer.state_dict())
    local_step(model, optimizer, 7)
    state.epoch, state.batch = 50, 60
    state.restore()
    assert_same(model.state_dict(), model_0)
    assert_same(optimizer.state_dict(), optim_0)
    assert (state.epoch, state.batch) == (rank, 10 + rank)

    # Change, commit, change again, restore: the committed values.
    local_step(model, optimizer, 3)
    state.epoch, state.batch = 2, 30
    model_1, optim_1 = clone_state(model.state_dict()), clone_state(optimizer.state_dict())
    state.commit()
    assert not torch.equal(flat(model), torch.cat([v.reshape(-1) for v in model_0.values()]))
    local_step(model, optimizer, -5)
    state.epoch, state.batch = 3, 31
    state.restore()
    assert_same(model.state_dict(), model_1)
    assert_same(optimizer.state_dict(), optim_1)
    assert (state.epoch, state.batch) == (2, 30)
    # The parameters were restored in place: the optimizer still steps the model's tensors.
    assert optimizer.param_groups[0]["params"][0] is next(model.parameters())


def test_torch_state_sync_takes_rank_0_everywhere(world):
    rank, size = world
    model = rank_model(rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    local_step(model, optimizer, rank + 1)  # momentum buffer = rank + 1 everywhere
    state = hvd.elastic.TorchState(model, optimizer, epoch=rank, batch=[rank] * 3)
    root_params = flat(rank_model(0))
    state.sync()

    # Every rank now holds rank 0's values: its parameters after its step with gradient 1.
    m0 = rank_model(0)
    o0 = torch.optim.SGD(m0.parameters(), lr=0.1, momentum=0.9)
    local_step(m0, o0, 1)
    root_params_after_step = flat(m0)
    assert not torch.equal(root_params, root_params_after_step)
    assert torch.equal(flat(model), root_params_after_step)
    for s in optimizer.state_dict()["state"].values():
        assert torch.equal(s["momentum_buffer"], torch.ones_like(s["momentum_buffer"]))
    assert state.epoch == 0 and state.batch == [0, 0, 0]
    everyone = hvd.allgather(flat(model).unsqueeze(0), name="elastic.sync.params")
    assert everyone.shape[0] == size
    for r in range(size):
        assert torch.equal(everyone[r], everyone[0])
    # sync() does not commit (as Horovod): once committed, a restore returns to rank 0's values.
    state.commit()
    local_step(model, optimizer, 4)
    state.restore()
    assert torch.equal(flat(model), root_params_after_step)


def test_torch_state_sync_of_an_optimizer_without_state(world):
    rank, _ = world
    model = rank_model(rank)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer)
    state.sync()
    everyone = hvd.allgather(flat(model).unsqueeze(0), name="elastic.sync.adam.params")
    assert all(torch.equal(row, everyone[0]) for row in everyone)
    states = optimizer.state_dict()["state"]
    assert len(states) == len(list(model.parameters()))
    steps = hvd.allgather_object([float(s["step"]) for s in states.values()], name="adam.steps")
    assert all(s == steps[0] for s in steps)


def test_assigning_a_handled_attribute_saves_it(world):
    rank, _ = world
    state = hvd.elastic.TorchState(rank_model(rank))
    other = rank_model(rank + 10)
    state.model = other
    saved = clone_state(other.state_dict())
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    state.restore()
    assert state.model is other
    assert_same(other.state_dict(), saved)


def test_commit_copies_of_gpu_tensors_live_in_host_memory(world):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False)")
    rank, _ = world
    model = rank_model(rank).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    local_step(model, optimizer, 1)
    state = hvd.elastic.TorchState(model, optimizer)
    committed = clone_state(model.state_dict())
    handler = state._handlers["model"]
    assert all(t.device.type == "cpu" for t in handler._saved_model_state.values())
    local_step(model, optimizer, 2)
    state.restore()
    assert_same(model.state_dict(), committed)
    assert all(p.is_cuda for p in model.parameters())
    for s in optimizer.state_dict()["state"].values():
        assert s["momentum_buffer"].is_cuda


def test_object_state_save_restore_sync_with_rank_dependent_values(world):
    rank, size = world
    state = elastic.ObjectState(bcast_object=hvd.broadcast_object, get_rank=hvd.rank,
                                step=rank, name="rank%d" % rank, seen=(rank, rank * 2))
    state.step, state.name = 100 + rank, "changed"
    state.restore()
    assert (state.step, state.name, state.seen) == (rank, "rank%d" % rank, (rank, rank * 2))
    state.step = 7 * (rank + 1)
    state.save()
    state.step = -1
    state.restore()
    assert state.step == 7 * (rank + 1)
    state.sync()
    assert (state.step, state.name, state.seen) == (7, "rank0", (0, 0))
    gathered = hvd.allgather_object((state.step, state.name, state.seen), name="objstate")
    assert gathered == [(7, "rank0", (0, 0))] * size


def commits_until_interrupt(state, limit):
    """Commits until HostsUpdatedInterrupt; returns (commits that passed, the interrupt)."""
    for passed in range(limit):
        try:
            state.commit()
        except hvd.HostsUpdatedInterrupt as e:
            return passed, e
    return limit, None


def test_a_notification_on_one_rank_interrupts_every_rank_at_the_same_commit(world):
    rank, size = world
    state = elastic.ObjectState(bcast_object=hvd.broadcast_object, get_rank=hvd.rank, x=rank)
    elastic.notification_manager.register_listener(state)
    try:
        passed, interrupt = commits_until_interrupt(state, 3)
        assert (passed, interrupt) == (3, None)  # nothing pending: no interrupt

        # The last rank alone learns of an addition before its 3rd commit.
        for i in range(2):
            state.commit()
            if rank == size - 1 and i == 1:
                elastic.notification_manager.notify_hosts_updated(
                    1000, elastic.HostUpdateResult.added)
        passed, interrupt = commits_until_interrupt(state, 5)
        assert passed == 0 and interrupt is not None
        assert interrupt.skip_sync is False  # every rank syncs from rank 0 after the reset
        assert interrupt.update_res == elastic.HostUpdateResult.added
        assert hvd.allgather_object(passed, name="interrupt.at") == [0] * size

        # The same change is not reported twice; an older timestamp is ignored.
        if rank == 0:
            state.on_hosts_updated(999, elastic.HostUpdateResult.removed)
        assert commits_until_interrupt(state, 2) == (2, None)

        # Different changes on different ranks: one interrupt with their union.
        state.on_hosts_updated(2000 + rank,
                               elastic.HostUpdateResult.removed if rank == 0
                               else elastic.HostUpdateResult.added)
        passed, interrupt = commits_until_interrupt(state, 3)
        assert passed == 0
        expected = (elastic.HostUpdateResult.mixed if size > 1
                    else elastic.HostUpdateResult.removed)
        assert interrupt.update_res == expected
        assert state._last_updated_timestamp == 2000 + size - 1
    finally:
        elastic.notification_manager.remove_listener(state)


def test_a_reset_drops_notifications_received_before_it(world):
    rank, _ = world
    state = elastic.ObjectState(bcast_object=hvd.broadcast_object, get_rank=hvd.rank, x=rank)
    called = []
    state.register_reset_callbacks([lambda: called.append("a"), lambda: called.append("b")])
    state.on_hosts_updated(5000, elastic.HostUpdateResult.added)
    state.on_reset()
    assert called == ["a", "b"]
    assert commits_until_interrupt(state, 2) == (2, None)


def test_a_notification_from_another_thread_is_seen_at_the_next_commit(world):
    rank, size = world
    state = elastic.ObjectState(bcast_object=hvd.broadcast_object, get_rank=hvd.rank, x=rank)
    elastic.notification_manager.register_listener(state)
    try:
        if rank == 0:
            # A notification service runs its own thread.
            t = threading.Thread(target=elastic.notification_manager.notify_hosts_updated,
                                 args=(7.5, elastic.HostUpdateResult.removed))
            t.start()
            t.join()
        passed, interrupt = commits_until_interrupt(state, 2)
        assert passed == 0 and interrupt.update_res == elastic.HostUpdateResult.removed
        assert state._last_updated_timestamp == 7.5
    finally:
        elastic.notification_manager.remove_listener(state)
    # A state that is no longer registered is not notified.
    elastic.notification_manager.notify_hosts_updated(8, elastic.HostUpdateResult.added)
    assert commits_until_interrupt(state, 1) == (1, None)


def test_torch_state_commits_reuse_their_copy_without_aliasing(world):
    # Commits copy into the buffers of the previous commit; a restore must still hand out
    # values that later training does not change, and a second restore must give the commit.
    rank, _ = world
    model = rank_model(rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    local_step(model, optimizer, rank + 1)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer)
    saved_before = state._handlers["model"]._saved_model_state
    local_step(model, optimizer, 2)
    state.save()
    committed = (clone_state(model.state_dict()), clone_state(optimizer.state_dict()))
    saved_after = state._handlers["model"]._saved_model_state
    assert all(saved_after[k].data_ptr() == saved_before[k].data_ptr() for k in saved_after)
    for _ in range(2):
        local_step(model, optimizer, 5)  # uncommitted progress
        state.restore()
        assert_same(model.state_dict(), committed[0])
        assert_same(optimizer.state_dict(), committed[1])
    # A parameter whose shape changed gets a fresh copy instead of a mismatched buffer.
    model[0].weight = torch.nn.Parameter(torch.ones(5, 3))
    state.save()
    assert torch.equal(state._handlers["model"]._saved_model_state["0.weight"], torch.ones(5, 3))
