"""The Python handle table: one handle per submitted op or group of ops.

Each entry keeps the tensors the runtime reads or writes alive until the op is released
(chorus_release), and a `finish` callable that turns the C results into the Python value
synchronize() returns. Failures are raised at synchronize as ChorusError.

Thread-safety: the table is guarded by a lock; one handle is synchronized by one thread.
"""

import itertools
import threading

from chorus import _C

# OpType values of chorus/types.h.
ALLREDUCE = 0
ALLGATHER = 1
BROADCAST = 2
ALLTOALL = 3
REDUCESCATTER = 4
BARRIER = 5
JOIN = 6
ADD_PROCESS_SET = 7
REMOVE_PROCESS_SET = 8

_lock = threading.Lock()
_pending = {}  # handle -> (list of C handles, keepalive, finish)
_next_handle = itertools.count(1)


def submit(specs, keepalive, finish, group=False):
    """Enqueues `specs` (a list of _C.OpSpec) and returns a new handle.

    finish(results) receives the list of _C.Result (all successful) and returns the value of
    synchronize(). Local errors raise here (ChorusValueError for bad arguments).
    """
    if group:
        c_handles = _C.enqueue_group(specs)
    else:
        c_handles = [_C.enqueue(s) for s in specs]
    with _lock:
        h = next(_next_handle)
        _pending[h] = (c_handles, (keepalive, specs), finish)
    return h


def poll(handle):
    """True once the op (every op of a group) has completed. Unknown handles are done."""
    with _lock:
        entry = _pending.get(handle)
    if entry is None:
        return True
    return all(_C.poll(c) for c in entry[0])


def synchronize(handle):
    """Waits (without the GIL) and returns finish(results); None for an unknown handle."""
    with _lock:
        entry = _pending.pop(handle, None)
    if entry is None:
        return None
    c_handles, keepalive, finish = entry
    # Every op of the entry is released (so has completed) before its tensors may go.
    results, failure = [], None
    for c in c_handles:
        try:
            results.append(_C.release(c))
        except _C.ChorusError as e:  # unknown to the runtime: nothing of it is in flight
            failure = failure or e
    del keepalive
    if failure is not None:
        raise failure
    for r in results:
        if r.code != 0:
            err = _C.ChorusError(r.message)
            err.code = r.code
            raise err
    return finish(results)


def is_pending(handle):
    with _lock:
        return handle in _pending
