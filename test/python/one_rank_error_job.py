"""An argument error raised on one rank only (run with 2 ranks: ctest python_one_rank_error).

Not a pytest file: it needs its own stall settings (CHORUS_STALL_CHECK_TIME_SECONDS=1,
CHORUS_STALL_SHUTDOWN_TIME_SECONDS=3), which the session-wide init of the suite does not use.

Rank 0 passes a root that does not exist, gets ValueError at once, catches it and moves on to
its next collective; rank 1 passed a valid root and waits in its broadcast. Neither op can
complete. The stall inspector must say so, naming both tensors and the ranks they wait for
(rank 0 logs it: the script reads its own stderr back), and after the shutdown time both ops
fail on their rank: the job ends instead of hanging.
"""

import os
import re
import sys
import tempfile

import torch

import chorus.torch as hvd


def check(cond, what):
    if not cond:
        print("one_rank_error_job: rank %d: FAILED: %s" % (hvd.rank(), what), flush=True)
        sys.exit(1)


class CapturedStderr:
    """Sends file descriptor 2 (where the runtime logs) to a file until release()."""

    def __init__(self):
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)

    def release(self):
        os.dup2(self._saved, 2)
        self._file.seek(0)
        text = self._file.read().decode(errors="replace")
        sys.stderr.write(text)
        return text


def main():
    captured = CapturedStderr()
    hvd.init()
    check(hvd.size() == 2, "run with 2 ranks")
    rank = hvd.rank()
    if rank == 0:
        try:
            hvd.broadcast(torch.ones(3), root_rank=7, name="one_rank.bcast")
            check(False, "a root of 7 in a world of 2 was accepted")
        except ValueError as e:
            check("root rank 7" in str(e) and "one_rank.bcast" in str(e), "message: %s" % e)
        pending = "one_rank.next"
        op = lambda: hvd.allreduce(torch.ones(3), name=pending)
    else:
        pending = "one_rank.bcast"
        op = lambda: hvd.broadcast(torch.ones(3), root_rank=0, name=pending)
    try:
        op()
        check(False, "%s completed although the other rank never submitted it" % pending)
    except hvd.HorovodInternalError as e:
        check(pending in str(e), "the stalled op's error names it: %s" % e)
    hvd.shutdown()
    log = captured.release()
    if rank == 0:
        for name, missing in (("broadcast.one_rank.bcast", 0), ("allreduce.one_rank.next", 1)):
            check(re.search(r"stalled \w+ of tensor '%s'.*missing ranks \[%d\]"
                            % (re.escape(name), missing), log),
                  "no stall warning for %s missing rank %d in:\n%s" % (name, missing, log))
    print("one_rank_error_job: rank %d: PASS (%s failed after the stall)" % (rank, pending),
          flush=True)


if __name__ == "__main__":
    main()
