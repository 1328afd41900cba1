"""Process sets: subsets of the world ranks that run collectives among themselves.

A ProcessSet is registered either at init (process_sets=...) or later with add_process_set
(collective over all ranks); registration gives it a process_set_id. global_process_set
(id 0) holds every rank.
"""

import threading

from chorus import _C
from chorus import handles as _handles


class ProcessSet:
    """A set of world ranks. `process_set_id` is None until the set is registered."""

    def __init__(self, ranks):
        self.ranks = sorted(int(r) for r in ranks)
        if len(set(self.ranks)) != len(self.ranks):
            raise ValueError("process set ranks must be unique: %s" % ranks)
        self.process_set_id = None

    def _invalidate(self):
        self.process_set_id = None

    def _world(self):
        from chorus import basics
        return basics

    def size(self):
        """Number of ranks in the set, or None when it is not registered."""
        if self.process_set_id is None:
            return None
        if self.process_set_id == 0:
            return self._world().size()
        return len(self.ranks)

    def rank(self):
        """This process's rank within the set; -1 when not a member; None if unregistered."""
        if self.process_set_id is None:
            return None
        me = self._world().rank()
        if self.process_set_id == 0:
            return me
        return self.ranks.index(me) if me in self.ranks else -1

    def included(self):
        """True when this process belongs to the set; None if unregistered."""
        r = self.rank()
        return None if r is None else r >= 0

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

_lock = threading.Lock()
_registered = {}  # id -> ProcessSet (non-global)


def _setup(sets):
    with _lock:
        _registered.clear()
        for i, ps in enumerate(sets):
            ps.process_set_id = i + 1
            _registered[i + 1] = ps
    global_process_set.process_set_id = 0


def _teardown():
    with _lock:
        for ps in _registered.values():
            ps._invalidate()
        _registered.clear()


def _normalize_ranks(ranks):
    from chorus import basics
    n = basics.size()
    for r in ranks:
        if r < 0 or r >= n:
            raise ValueError("process set rank %d is out of range [0, %d)" % (r, n))


def add_process_set(process_set):
    """Registers a new process set (a ProcessSet or a list of ranks); collective over all ranks.

    Returns the registered ProcessSet.
    """
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.process_set_id is not None:
        raise ValueError("%s is already registered" % ps)
    _normalize_ranks(ps.ranks)
    with _lock:
        for other in _registered.values():
            if other.ranks == ps.ranks:
                raise ValueError("a process set with ranks %s already exists (id %d)"
                                 % (ps.ranks, other.process_set_id))
    spec = _C.OpSpec()
    spec.type = _handles.ADD_PROCESS_SET
    spec.process_set_ranks = ps.ranks
    h = _handles.submit([spec], None, lambda results: results[0].process_set_id)
    new_id = _handles.synchronize(h)
    ps.process_set_id = new_id
    with _lock:
        _registered[new_id] = ps
    return ps


def remove_process_set(process_set):
    """Deregisters a process set (collective over all ranks). Returns True when removed."""
    if process_set.process_set_id is None or process_set.process_set_id == 0:
        return False
    spec = _C.OpSpec()
    spec.type = _handles.REMOVE_PROCESS_SET
    spec.process_set_id = process_set.process_set_id
    h = _handles.submit([spec], None, lambda results: True)
    _handles.synchronize(h)
    with _lock:
        _registered.pop(process_set.process_set_id, None)
    process_set._invalidate()
    return True
