"""chorus.elastic: the framework-independent part of elastic training on a worker (Horovod's
horovod.common.elastic): State and ObjectState, the run loop (run_fn), the reset
(chorus.elastic.reset.reset) and the host-update notifications (the seam the elastic driver
plugs into).

Framework frontends bind them: chorus.torch.elastic (TorchState, ElasticSampler, run).
"""

from chorus.elastic.notification import (HostUpdateResult, WorkerNotificationManager,
                                         notification_manager)
from chorus.elastic.run import run_fn
from chorus.elastic.state import ObjectState, State
from chorus.exceptions import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["HorovodInternalError", "HostUpdateResult", "HostsUpdatedInterrupt", "ObjectState",
           "State", "WorkerNotificationManager", "notification_manager", "run_fn"]
