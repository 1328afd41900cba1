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

In an elastic job started by chorusrun, the runtime's membership watcher (a C++ thread that
long-polls chorusrun: runtime/elastic/membership_watcher.h) records the changes chorusrun
announces; poll() takes them and notifies them here. State.check_host_updates() polls before it
agrees, so a change announced before a commit is acted on at that commit. Tests and programs that
simulate a change call notify_hosts_updated themselves.

Thread-safety: notify_hosts_updated may be called from any thread (a notification service runs
its own); listeners are registered and removed by the training thread.
"""

import enum
import threading

from chorus import _C


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

    A listener has `on_hosts_updated(timestamp, update_res)`. The connection to chorusrun is
    the runtime's (started by chorus init in an elastic worker), so init() has nothing to start.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._listeners = []

    def init(self):
        """Horovod's entry point; the runtime's watcher already receives the notifications."""

    def poll(self):
        """Notifies the listeners of the changes chorusrun announced since the last poll (none
        outside elastic jobs). Training thread."""
        timestamp, update_res = _C.elastic_take_host_updates()
        if timestamp:
            self.notify_hosts_updated(timestamp, update_res)

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
