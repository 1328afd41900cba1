"""The elastic run loop (Horovod's horovod.common.elastic.run_fn).

    wrapper(state, *args, **kwargs):
      1. state.sync() then state.save() (unless the last reset said skip_sync), then return
         func(state, ...);
      2. HorovodInternalError (a collective failed): state.restore() (back to the last commit),
         then reset; the next round syncs;
      3. HostsUpdatedInterrupt (hosts were added or removed): the state is kept as it is, then
         reset; the next round syncs unless the interrupt's skip_sync is set;
      4. reset: `reset()` re-forms chorus, then state.on_reset() (reset callbacks); back to 1.

The save after the sync makes the synced state (rank 0's: the job's last commit) the one a
failure returns to on every rank. Horovod does not save there, so a worker that joined returns
to the state it was started with if a collective fails before its first commit: its model,
optimizer and sampler from its own start, its plain attributes from rank 0 (ObjectState.sync
keeps them as committed). Should the workers it synced from be gone, that worker becomes rank 0
and the job would go on from its start state with rank 0's counters.

As in Horovod, the loop is the same in every job, elastic or not: outside an elastic job no host
update is ever notified, so only a HorovodInternalError leads to a reset there. Every other
exception propagates, and so does ChorusValueError (the runtime rejected an op's arguments:
Horovod raises those as ValueError, which its loop does not catch). The state is registered with
chorus.elastic.notification_manager while the wrapper runs.
"""

import functools

from chorus.elastic.notification import notification_manager
from chorus.exceptions import HorovodInternalError, HostsUpdatedInterrupt


def run_fn(func, reset):
    """Wraps func(state, *args, **kwargs) in the elastic loop; `reset` re-forms chorus."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        notification_manager.init()
        notification_manager.register_listener(state)
        skip_sync = False
        try:
            while True:
                try:
                    if not skip_sync:
                        state.sync()
                        state.save()  # the synced state is the last commit (see above)
                    return func(state, *args, **kwargs)
                except HorovodInternalError as e:
                    if isinstance(e, ValueError):
                        raise
                    state.restore()
                    skip_sync = False
                except HostsUpdatedInterrupt as e:
                    skip_sync = e.skip_sync
                reset()
                state.on_reset()
        finally:
            notification_manager.remove_listener(state)

    return wrapper
