"""A training loop in which one rank fails (failure_attribution_e2e.py).

Usage: failing_worker.py RANK STEP KIND MESSAGE
Every rank runs allreduces step after step; at step STEP rank RANK raises KIND(MESSAGE) (KIND:
a builtin exception's name, or Custom for an exception class of this script), or ends with
sys.exit(3) (KIND exit) or kills itself with SIGKILL (KIND kill). The others are in or about to
enter an allreduce that can never complete: they fail because of it. KIND init: rank RANK sets a
bad variable (CHORUS_LOG_LEVEL=verbose) before init, which then fails on every rank.
"""

import os
import signal
import sys

import torch

import chorus.torch as hvd


class Custom(Exception):
    pass


def main():
    failing, step, kind, message = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    rank = os.environ.get("CHORUS_RANK", os.environ.get("OMPI_COMM_WORLD_RANK"))
    if kind == "init" and rank == str(failing):
        os.environ["CHORUS_LOG_LEVEL"] = "verbose"
    hvd.init()
    x = torch.ones(16)
    for s in range(1000):
        if hvd.rank() == failing and s == step:
            if kind == "exit":
                sys.exit(3)
            if kind == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise (Custom if kind == "Custom" else getattr(__builtins__, kind))(message)
        x = hvd.allreduce(x, name="step", op=hvd.Average)
    print("failing_worker: rank %d finished without the failure" % hvd.rank(), flush=True)


if __name__ == "__main__":
    main()
