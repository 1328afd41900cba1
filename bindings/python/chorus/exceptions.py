"""The exceptions elastic training reacts to (horovod.common.exceptions' names).

HorovodInternalError is chorus's ChorusError: a collective failed (a lost peer, shutdown, ranks
that disagree). ChorusValueError, raised when the runtime rejects an op's arguments, is a
subclass of it and of ValueError; elastic.run treats it as an argument error, not a failure to
recover from (see chorus.elastic.run).
"""

from chorus._C import ChorusError

HorovodInternalError = ChorusError


class HostsUpdatedInterrupt(RuntimeError):
    """The set of hosts of an elastic job changed: elastic.run resets chorus and calls the
    training function again from the current state (no rollback to the last commit).

    skip_sync: True when the state need not be broadcast from rank 0 after the reset.
    """

    def __init__(self, skip_sync):
        super().__init__(skip_sync)
        self.skip_sync = skip_sync
