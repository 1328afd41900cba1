"""Framework-independent runtime control: init, shutdown and topology queries.

Thread-safety: these functions may be called from any thread; init and shutdown are
collective (every rank calls them).
"""

import atexit
import warnings

from chorus import _C
from chorus import process_sets as _ps

# Reduction ops: the chorus::ReduceOp values of chorus/types.h.
Sum = 0
Average = 1
Min = 2
Max = 3
Product = 4
Adasum = 5
REDUCE_OPS = (Sum, Average, Min, Max, Product, Adasum)

_topology = None

_NOT_INITIALIZED = "chorus has not been initialized; use hvd.init()."


def init(comm=None, process_sets=None):
    """Starts chorus on every rank of MPI_COMM_WORLD (collective).

    comm: only None is supported; anything else is ignored with a warning.
    process_sets: a list of ProcessSet objects or rank lists, registered with ids 1, 2, ...
    (the string "dynamic" is accepted and ignored: sets can always be added later).
    """
    global _topology
    if _C.is_initialized():
        if process_sets:
            warnings.warn("chorus.init: already initialized; process_sets ignored")
        return
    if comm is not None:
        warnings.warn("chorus.init: the comm argument is not supported and is ignored; "
                      "chorus runs on MPI_COMM_WORLD")
    sets = []
    if process_sets is not None and not isinstance(process_sets, str):
        sets = [ps if isinstance(ps, _ps.ProcessSet) else _ps.ProcessSet(ps)
                for ps in process_sets]
    _C.init([list(ps.ranks) for ps in sets])
    _topology = _C.topology()
    _ps._setup(sets)


@atexit.register
def _shutdown_at_exit():
    # Like Horovod: a script that never calls shutdown() still stops the runtime cleanly.
    if _C.is_initialized():
        _C.shutdown()


def shutdown():
    """Stops chorus (collective). Pending ops complete with an error."""
    global _topology
    _C.shutdown()
    _topology = None
    _ps._teardown()


def start_timeline(file_path, mark_cycles=False):
    """Creates a timeline file at `file_path` and begins recording (docs/timeline.md).

    mark_cycles: mark each background cycle on the timeline (default: False).
    Raises ValueError if chorus is not initialized, or if CHORUS_TIMELINE (HOROVOD_TIMELINE) was
    not set at init (set it to DYNAMIC to use start_timeline), as Horovod does. Only rank 0
    records, unless CHORUS_TIMELINE_ALL_RANKS=1 or the path contains "{rank}".
    """
    if not _C.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    try:
        _C.start_timeline(str(file_path), bool(mark_cycles))
    except _C.ChorusError as e:
        raise ValueError(str(e)) from None


def stop_timeline():
    """Stops the active timeline recording and closes the file.

    Raises ValueError if chorus is not initialized.
    """
    if not _C.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    try:
        _C.stop_timeline()
    except _C.ChorusError as e:
        raise ValueError(str(e)) from None


def is_initialized():
    return _C.is_initialized()


def _topo():
    if _topology is None or not _C.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    return _topology


def rank():
    return _topo()["rank"]


def size():
    return _topo()["size"]


def local_rank():
    return _topo()["local_rank"]


def local_size():
    return _topo()["local_size"]


def cross_rank():
    return _topo()["cross_rank"]


def cross_size():
    return _topo()["cross_size"]


def is_homogeneous():
    return _topo()["is_homogeneous"]


def mpi_threads_supported():
    return True


def _controller():
    return _C.controller_name() if _C.is_initialized() else ""


def mpi_enabled():
    """True when collectives run over MPI (under mpirun; the default)."""
    return _controller() != "UCX"


def mpi_built():
    return True


def gloo_enabled():
    """True in chorus's MPI-less mode (chorusrun --gloo: collectives over UCX), which stands in
    for Horovod's Gloo mode."""
    return _controller() == "UCX"


def gloo_built():
    """True: this build has the MPI-less mode that chorusrun --gloo starts."""
    return True


def nccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


def ccl_built():
    return False


def ddl_built():
    return False
