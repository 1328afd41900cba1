"""State objects of elastic training (Horovod's horovod.common.elastic State and ObjectState).

A State is what survives a reset: commit() saves it (and checks for host updates), restore()
returns to the last commit after a failure, sync() makes every rank equal to rank 0's copy.
Framework states (chorus.torch.elastic.TorchState) extend ObjectState.

Threading: a State belongs to the training thread; only on_hosts_updated may be called from
another thread (it records the notification). commit, check_host_updates and sync are
collective: every rank calls them the same number of times, in the same order.
"""

from chorus.elastic.agreement import agree_on_host_updates
from chorus.elastic.notification import (HostUpdateResult, PendingHostUpdates,
                                         notification_manager)
from chorus.exceptions import HostsUpdatedInterrupt


class State:
    """Base of the in-memory state tracked across workers.

    bcast_object: fn(obj) -> rank 0's obj on every rank. get_rank: fn() -> this rank.
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._host_updates = PendingHostUpdates()
        self._last_updated_timestamp = 0
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Adds functions (no arguments) called after every reset event, e.g. to rescale the
        learning rate to the new number of workers."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """Called by elastic.run after chorus was reset: drops the notifications received
        before the reset, calls reset(), then the reset callbacks in registration order."""
        self._host_updates.clear()
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Records a host update (see chorus.elastic.notification); any thread."""
        self._host_updates.notify_hosts_updated(timestamp, update_res)

    def commit(self):
        """Saves the state (save()), then check_host_updates(). Collective.

        Saving copies the state (from GPU memory to host memory for tensors), so committing
        less often than every batch trades lost steps on a failure for speed."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when any rank was notified of a host
        update newer than the last one acted on. Collective (one allreduce, see
        chorus.elastic.agreement), so the ranks raise together or not at all.

        Unlike Horovod (which skips the sync after removals only), the interrupt always asks
        for a sync: after chorus re-forms, every rank takes rank 0's state, whatever the
        change."""
        notification_manager.poll()
        newest, update_res = self._host_updates.take_newer_than(self._last_updated_timestamp)
        prev, newest, update_res = agree_on_host_updates(self._last_updated_timestamp, newest,
                                                         update_res)
        self._last_updated_timestamp = newest
        if newest > prev:
            interrupt = HostsUpdatedInterrupt(False)
            interrupt.update_res = update_res
            raise interrupt

    def save(self):
        """Saves the state to host memory."""
        raise NotImplementedError()

    def restore(self):
        """Restores the last committed state, undoing the uncommitted changes."""
        raise NotImplementedError()

    def sync(self):
        """Makes every rank's state equal to rank 0's. Collective."""
        raise NotImplementedError()

    def reset(self):
        """Adjusts objects after a reset event, before the sync (nothing here)."""


class ObjectState(State):
    """State of plain picklable Python objects, given as keyword arguments and exposed as
    attributes.

    save() keeps the attribute values (references, as Horovod: objects mutated in place are not
    copied); restore() sets the attributes back to them; sync() broadcasts the saved values
    from rank 0 with bcast_object and sets the attributes to them.
    """

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._bcast_object = bcast_object
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: getattr(self, attr) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


__all__ = ["HostUpdateResult", "ObjectState", "State"]
