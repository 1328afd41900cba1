"""Framework-independent runtime control: init, shutdown and topology queries.

Thread-safety: these functions may be called from any thread; init and shutdown are
collective (every rank calls them).
"""

import atexit
import os
import re
import sys
import warnings

from chorus import _C
from chorus import handles
from chorus import metrics as _metrics
from chorus import process_sets as _ps
from chorus.exceptions import ChorusError

# Reduction ops: the chorus::ReduceOp values of chorus/types.h, as the extension exports them.
Sum = _C.REDUCE_OPS["Sum"]
Average = _C.REDUCE_OPS["Average"]
Min = _C.REDUCE_OPS["Min"]
Max = _C.REDUCE_OPS["Max"]
Product = _C.REDUCE_OPS["Product"]
Adasum = _C.REDUCE_OPS["Adasum"]
REDUCE_OPS = (Sum, Average, Min, Max, Product, Adasum)

_topology = None

_NOT_INITIALIZED = "chorus has not been initialized; use hvd.init()."


def _mpi_comm_address(comm):
    """(address of the MPI_Comm to run on, the mpi4py communicator keeping it alive) for
    init's comm argument, as Horovod reads it: an mpi4py communicator, or a list of
    MPI_COMM_WORLD ranks (a communicator of those ranks is created). Both need mpi4py.

    A rank outside the list gets ValueError. (Horovod warns and falls back to MPI_COMM_WORLD
    there, whose collectives then wait forever for the ranks that are in the list.)"""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ValueError("init(comm=...) needs mpi4py (Debian: python3-mpi4py): %s" % e)
    if isinstance(comm, MPI.Comm):
        return MPI._addressof(comm), comm
    if isinstance(comm, (list, tuple)) and all(isinstance(r, int) for r in comm):
        world = MPI.COMM_WORLD
        ranks = list(comm)
        if not ranks or any(r < 0 or r >= world.Get_size() for r in ranks):
            raise ValueError("init(comm=%s): ranks must be a non-empty list of MPI_COMM_WORLD "
                             "ranks in [0, %d)" % (ranks, world.Get_size()))
        if world.Get_rank() not in ranks:
            raise ValueError("init(comm=%s): this process (MPI_COMM_WORLD rank %d) is not in "
                             "the list; only the listed ranks may call init with it"
                             % (ranks, world.Get_rank()))
        sub = world.Create_group(world.Get_group().Incl(ranks))
        return MPI._addressof(sub), sub
    raise ValueError("init(comm=...) takes an mpi4py communicator or a list of ranks, not %s"
                     % type(comm).__name__)


_NOT_FOUND = 5  # absl::StatusCode::kNotFound


def exit_if_released(error):
    """An elastic worker that chorusrun released (no place in the generation it was waiting
    for: its host left the job) leaves quietly with status 0, as Horovod's do; any other error
    is the caller's to raise."""
    if getattr(error, 'code', None) == _NOT_FOUND and _C.elastic_worker():
        print(f'chorus: {error}; this worker exits', file=sys.stderr, flush=True)
        raise SystemExit(0)


def init(comm=None, process_sets=None):
    """Starts chorus (collective over the communicator).

    comm: None for MPI_COMM_WORLD, an mpi4py communicator, or a list of MPI_COMM_WORLD ranks
    (see _mpi_comm_address). Ranks, sizes and process sets are then relative to it.
    process_sets: a list of ProcessSet objects or rank lists, registered with ids 1, 2, ...
    (the string "dynamic" is accepted and ignored: sets can always be added later).
    """
    global _topology
    if _C.is_initialized():
        if process_sets:
            warnings.warn("chorus.init: already initialized; process_sets ignored")
        return
    comm_address, comm_object = (0, None) if comm is None else _mpi_comm_address(comm)
    sets = []
    if process_sets is not None and not isinstance(process_sets, str):
        sets = [ps if isinstance(ps, _ps.ProcessSet) else _ps.ProcessSet(ps)
                for ps in process_sets]
    try:
        _C.init([list(ps.ranks) for ps in sets], comm_address)
    except ChorusError as e:
        exit_if_released(e)
        _note_init_failure(e)
        raise
    del comm_object  # chorus runs on its own duplicates of the communicator
    if _C.elastic_worker():
        # The generation init joined may be newer than the environment said (it was replaced
        # while the world formed): os.environ shows this worker's variables for it.
        os.environ.update(_C.elastic_adopted_env())
    _topology = _C.topology()
    _ps._setup(sets)
    _install_failure_report()
    _metrics.serve_from_environment()  # CHORUS_METRICS_PORT; unset or 0: nothing


def _reform():
    """Re-forms the initialized runtime in place (chorus._C.reform; chorus.elastic.reset says
    when). Process sets other than the global one are dropped: their ProcessSet objects are
    unregistered."""
    global _topology
    try:
        _C.reform()
    except ChorusError as e:
        # The generation this worker adopted was replaced while the world formed, and
        # chorusrun released it from the newer one.
        exit_if_released(e)
        raise
    finally:
        _topology = None
        _ps._teardown()
    if _C.elastic_worker():
        os.environ.update(_C.elastic_adopted_env())
    _topology = _C.topology()
    _ps._setup([])
    handles.restart_auto_names()


# The line a rank that dies of an uncaught exception writes to its stderr (after the traceback,
# before the runtime's shutdown at exit tells the other ranks): chorusrun reads it back
# (launcher/process/failure_report.h) to name that rank, not a rank that failed because of it.
FAILURE_REPORT = "chorus: rank %d failed (uncaught exception): %s"
_previous_excepthook = None
# The uncaught exception that ends this process ("RuntimeError: boom"): the shutdown at exit
# tells the other ranks, whose failed ops then say it (Note [Shutdown causes], runtime/
# cycle_policy.h).
_exit_cause = ""


# A failed init's error that is this rank's own starts "rank R: " (the others' name it: "chorus
# init failed on rank R (rank 0 is fine): ..."; runtime/controller.h, AgreeNoProblem).
_OWN_INIT_ERROR = re.compile(r"rank (\d+): ")
# This rank's failed init, when the error was its own: its rank, for the failure report.
_init_failed_rank = None


def _note_init_failure(error):
    """Makes an uncaught init error that is this rank's own (a bad variable here, say) report
    this rank as the one that failed, as an exception after init does."""
    global _init_failed_rank
    own = _OWN_INIT_ERROR.match(str(error))
    if own:
        _init_failed_rank = int(own.group(1))
        _install_failure_report()


def _install_failure_report():
    global _previous_excepthook
    if _previous_excepthook is None:
        _previous_excepthook = sys.excepthook
        sys.excepthook = _report_failure


def _report_failure(kind, value, traceback):
    global _exit_cause
    _previous_excepthook(kind, value, traceback)
    # A collective that failed because another rank ended (ChorusError, not an argument error)
    # is a consequence: only the cause is reported.
    consequence = issubclass(kind, ChorusError) and not issubclass(kind, _C.ChorusValueError)
    rank = _topology["rank"] if _topology is not None else _init_failed_rank
    if rank is None or consequence or issubclass(kind, KeyboardInterrupt):
        return
    text = ("%s: %s" % (kind.__name__, value)) if str(value) else kind.__name__
    text = text.splitlines()[0][:300]  # starts with the type's name: never empty
    _exit_cause = text
    line = FAILURE_REPORT % (rank, text) + "\n"
    try:
        sys.stderr.flush()
        os.write(2, line.encode(errors="replace"))
    except OSError:
        pass


@atexit.register
def _shutdown_at_exit():
    # Like Horovod: a script that never calls shutdown() still stops the runtime cleanly.
    if _C.is_initialized():
        _C.shutdown(_exit_cause)


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
    """As Horovod: NCCL_VERSION_CODE of the NCCL chorus was built with (e.g. 22809 for 2.28.9),
    0 when chorus was built without its NCCL (GPU) data plane."""
    return _C.nccl_version()


def cuda_built():
    """True when chorus was built with CUDA (which comes with its NCCL data plane)."""
    return _C.cuda_built()


def rocm_built():
    return False


def ccl_built():
    return False


def ddl_built():
    return False
