"""The collective decision behind State.check_host_updates: every rank learns the same pending
membership change, so that HostsUpdatedInterrupt is raised on all ranks at the same commit or on
none.

Protocol (one allreduce of four float64 values with Max over the global process set):
  1. each rank contributes [its last acted-on timestamp, the newest timestamp it was notified
     of, 1.0 if a removal is pending else 0.0, 1.0 if an addition is pending else 0.0];
  2. the maxima are the same on every rank: the agreed previous timestamp, the agreed newest
     timestamp, and the union of the pending changes (a bit is set if any rank has it);
  3. a change is pending everywhere iff the agreed newest timestamp exceeds the agreed previous
     one.
A rank that was notified alone (the notification reached one rank) thereby makes every rank
interrupt. Timestamps are exact up to 2**53.
"""

import numpy as np

from chorus import numpy as _chorus_np
from chorus.elastic.notification import HostUpdateResult

_NAME = "chorus.elastic.check_host_updates"


def agree_on_host_updates(last_timestamp, newest_timestamp, update_res):
    """Collective over every rank. Returns (agreed last timestamp, agreed newest timestamp,
    agreed HostUpdateResult). Timestamps come back as float when they are not integral."""
    local = np.array([last_timestamp, newest_timestamp,
                      1.0 if update_res & HostUpdateResult.removed else 0.0,
                      1.0 if update_res & HostUpdateResult.added else 0.0], dtype=np.float64)
    agreed = _chorus_np.allreduce(local, op=_chorus_np.Max, name=_NAME)
    result = HostUpdateResult.no_update
    if agreed[2] > 0:
        result |= HostUpdateResult.removed
    if agreed[3] > 0:
        result |= HostUpdateResult.added
    return _number(agreed[0]), _number(agreed[1]), result


def _number(value):
    value = float(value)
    return int(value) if value.is_integer() else value
