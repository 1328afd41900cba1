"""Host-update notifications on a worker: where a membership change of an elastic job enters.

Contract (the seam the elastic driver plugs into):
  Whatever learns that hosts were added or removed calls
      chorus.elastic.notification_manager.notify_hosts_updated(timestamp, update_res)
  on the ranks it reaches (one rank is enough). `timestamp` is a number that grows with each
  change (the driver's clock); `update_res` is a HostUpdateResult. The call only records the
  change in every registered State (elastic.run registers its state for the duration of the
  run); nothing is interrupted there. The next State.commit() / check_host_updates() makes every
  rank agree on the pending changes through one allreduce and raises HostsUpdatedInterrupt on
  all ranks at the same commit (chorus.elastic.agreement).

Today the callers are tests and programs that simulate a change; the driver's notification
service will call the same function when it is wired in.

Thread-safety: notify_hosts_updated may be called from any thread (a notification service runs
its own); listeners are registered and removed by the training thread.
"""

import enum
import threading


class HostUpdateResult(enum.IntFlag):
    """What changed (Horovod's values): a bit for removed hosts, one for added hosts."""
    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added


class PendingHostUpdates:
    """One State's record of the notifications it has not acted on yet. Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._updates = []  # (timestamp, HostUpdateResult), in arrival order

    def notify_hosts_updated(self, timestamp, update_res):
        """Records a change; called from any thread."""
        with self._lock:
            self._updates.append((timestamp, HostUpdateResult(int(update_res))))

    def take_newer_than(self, last_timestamp):
        """Removes every recorded change and returns (the newest timestamp above
        last_timestamp, or last_timestamp when none is newer; the union of the results of the
        changes newer than last_timestamp)."""
        with self._lock:
            updates, self._updates = self._updates, []
        newest, result = last_timestamp, HostUpdateResult.no_update
        for timestamp, update_res in updates:
            if timestamp > last_timestamp:
                newest = max(newest, timestamp)
                result |= update_res
        return newest, result

    def clear(self):
        """Forgets every recorded change (after a reset, as Horovod does)."""
        with self._lock:
            self._updates = []


class WorkerNotificationManager:
    """Forwards host-update notifications to the registered listeners (States).

    A listener has `on_hosts_updated(timestamp, update_res)`. init() is where the worker's
    notification endpoint will be started and announced to the driver; in this version there is
    no driver connection and init() does nothing.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._listeners = []

    def init(self):
        """Starts receiving the driver's notifications (nothing to start yet; see the module
        docstring)."""

    def register_listener(self, listener):
        with self._lock:
            if listener not in self._listeners:
                self._listeners.append(listener)

    def remove_listener(self, listener):
        with self._lock:
            self._listeners.remove(listener)

    def notify_hosts_updated(self, timestamp, update_res):
        """Records the change `update_res` (a HostUpdateResult) made at `timestamp` in every
        registered listener. Any thread."""
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener.on_hosts_updated(timestamp, update_res)

    # Horovod's name for the same call (its notification service calls it).
    handle_hosts_updated = notify_hosts_updated


notification_manager = WorkerNotificationManager()
