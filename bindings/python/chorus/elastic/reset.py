"""Re-forming chorus for a new membership: the one place a reset happens.

In this version a reset is shutdown() followed by init(): the runtime is stopped (pending ops
fail), then started again on the world the launcher provides, with the process-set registry
re-created empty (only the global set; sets registered before must be added again, their
ProcessSet objects are unregistered). Every rank then syncs from the new rank 0 (the lowest
surviving old rank), whether hosts were added or removed.

Later versions replace this with an in-process re-forming of the communicator (no full
shutdown: the UCX world is re-formed from the addresses the driver's rendezvous hands out) and
with the driver telling each worker its new rank; the call sites (chorus.elastic.run_fn through
chorus.torch.elastic.run) stay as they are.

Collective: every rank of the old world that survives calls it.
"""

from chorus import basics


def reset():
    basics.shutdown()
    basics.init()
