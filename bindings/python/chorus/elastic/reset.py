"""Re-forming chorus for a new membership: the one place a reset happens.

A reset keeps the process, the framework, the training state and the chorus runtime itself
(chorus.h, Note [Re-forming in place]): _C.suspend() stops the background loop (after a failure
it has stopped already), and _C.reform() forms the new world and starts a new loop on it. In an
elastic job started by chorusrun (an elastic worker), between the two this worker adopts
chorusrun's newest generation (chorus._C.elastic_adopt_next): its rank, size, local and cross
ranks, CHORUS_*/HOROVOD_* variables and rendezvous scope are set for it (os.environ follows
after the reform), so the reform forms that generation's world. A worker chorusrun released (its
host left the discovery output) leaves here with SystemExit(0). Outside an elastic job (tests
and programs that simulate a reset) the reform forms the world the launcher gave, again.

Process sets other than the global one are dropped (sets registered before must be added again,
their ProcessSet objects are unregistered). Every rank then syncs from the new rank 0 (the
lowest surviving old rank), whether hosts were added or removed.

Collective: every rank of the new world calls it (a worker that joins the job later calls
init()).
"""

import os

from chorus import _C, basics
from chorus.exceptions import ChorusError



# A worker waits this much longer than chorusrun's own bound (its elastic timeout), so that
# chorusrun, which decides, ends the wait (it fails the job or places the worker) before the
# worker gives up on its own.
_ADOPT_MARGIN_S = 60.0


def _adopt_timeout_s():
    """How long a worker waits for chorusrun's next generation: the job's elastic timeout plus
    the margin above."""
    for name in ('CHORUS_ELASTIC_TIMEOUT', 'HOROVOD_ELASTIC_TIMEOUT'):
        if os.environ.get(name):
            return float(os.environ[name]) + _ADOPT_MARGIN_S
    return 600.0 + _ADOPT_MARGIN_S


def adopt_next_generation():
    """Sets this elastic worker's variables for chorusrun's next generation (see above)."""
    try:
        _C.elastic_adopt_next(_adopt_timeout_s())
    except ChorusError as e:
        basics.exit_if_released(e)
        raise


def reset():
    elastic = _C.elastic_worker()
    if not _C.is_initialized():
        if elastic:
            adopt_next_generation()
        basics.init()
        return
    _C.suspend()
    if elastic:
        adopt_next_generation()
    basics._reform()
