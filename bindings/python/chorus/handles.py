"""The Python handle table: one handle per submitted op or group of ops.

Each entry keeps the tensors the runtime reads or writes alive until the op is released
(chorus_release), and a `finish` callable that turns the C results into the Python value
synchronize() returns. Failures are raised at synchronize as ChorusError.

Thread-safety: every access to the table is one dict operation (and handle numbers come from
an itertools.count), each atomic under the GIL, so no lock is taken; one handle is synchronized
by one thread.
"""

import collections
import itertools
import threading

from chorus import _C

# OpType values of chorus/types.h, as the extension exports them.
ALLREDUCE = _C.OP_TYPES["allreduce"]
ALLGATHER = _C.OP_TYPES["allgather"]
BROADCAST = _C.OP_TYPES["broadcast"]
ALLTOALL = _C.OP_TYPES["alltoall"]
REDUCESCATTER = _C.OP_TYPES["reducescatter"]
BARRIER = _C.OP_TYPES["barrier"]
JOIN = _C.OP_TYPES["join"]
ADD_PROCESS_SET = _C.OP_TYPES["add_process_set"]
REMOVE_PROCESS_SET = _C.OP_TYPES["remove_process_set"]

_name_lock = threading.Lock()
_noname_counters = collections.defaultdict(int)  # process set id -> next auto-name index


def op_name(kind, name, process_set):
    """Horovod's op naming: '<kind>.<name>', or '<kind>.noname.<n>' when name is None.

    n counts the unnamed ops of the process set (of every front end: chorus.torch and
    chorus.numpy share the counter), so the k-th unnamed op gets the same name on every rank as
    long as every member submits its ops in the same order.
    """
    if name:
        if type(name) is str:
            return kind + "." + name
        return "%s.%s" % (kind, name)
    with _name_lock:
        n = _noname_counters[process_set.process_set_id]
        _noname_counters[process_set.process_set_id] = n + 1
    return "%s.noname.%d" % (kind, n)


def restart_auto_names():
    """Numbers unnamed ops from zero again (chorus was re-formed in place: a worker joining the
    new world starts from zero too, so every rank names the k-th unnamed op alike)."""
    with _name_lock:
        _noname_counters.clear()


def set_id(process_set):
    """The id of a registered process set; ValueError for one not (or no longer) registered."""
    if process_set.process_set_id is None:
        raise ValueError("%s is not registered; use add_process_set() first" % process_set)
    return process_set.process_set_id


# handle -> (list of C handles, keepalive, finish): see submit; or
# handle -> (C handle (an int), keepalive, finish or None): see submit_op.
_pending = {}
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
    h = next(_next_handle)
    _pending[h] = (c_handles, (keepalive, specs), finish)
    return h


def submit_op(c_handle, keepalive, finish):
    """Registers one op already enqueued (e.g. by _C.enqueue_op) and returns a new handle.

    synchronize() returns finish() (a callable without arguments), or `keepalive` itself when
    finish is None. Results are not fetched: for ops without a runtime-allocated output.
    """
    h = next(_next_handle)
    _pending[h] = (c_handle, keepalive, finish)
    return h


def poll(handle):
    """True once the op (every op of a group) has completed. Unknown handles are done."""
    entry = _pending.get(handle)
    if entry is None:
        return True
    c_handles = entry[0]
    if type(c_handles) is int:
        return _C.poll(c_handles)
    return all(_C.poll(c) for c in c_handles)


def synchronize(handle):
    """Waits (without the GIL) and returns finish(results); None for an unknown handle."""
    entry = _pending.pop(handle, None)
    if entry is None:
        return None
    c_handles, keepalive, finish = entry
    if type(c_handles) is int:  # submit_op
        status = _C.release_status(c_handles)
        if status is not None:
            del keepalive
            err = _C.ChorusError(status[1])
            err.code = status[0]
            raise err
        return keepalive if finish is None else finish()
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
    return handle in _pending
