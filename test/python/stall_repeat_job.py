"""A stalled op is reported again every stall warning time, for as long as it waits (run with
2 ranks: ctest python_stall_repeat, python_stall_repeat_gloo).

Not a pytest file: it needs its own stall settings (CHORUS_STALL_CHECK_TIME_SECONDS=1 and no
shutdown time), which the session-wide init of the suite does not use.

Rank 1 holds back its allreduce until rank 0 has seen the stall inspector warn about it three
times (rank 0 reads its own stderr back): each warning names the tensor and the missing rank,
counts itself, says how long the op has waited (longer each time) and, with no shutdown time
set, how to make a deadlocked job end. Rank 1 then submits (told through a file in the
directory given as argv[1]) and the allreduce completes with the right sum on both ranks.
"""

import os
import re
import sys
import tempfile
import time

import torch

import chorus.torch as hvd

NAME = "stall.late"
WARNINGS = 3
PATIENCE_S = 120  # a job that never sees its warnings fails instead of hanging


def check(cond, what):
    if not cond:
        print("stall_repeat_job: rank %d: FAILED: %s" % (hvd.rank(), what), flush=True)
        sys.exit(1)


def seconds(text):
    """absl's duration text (1.5s, 2m3s, 250ms) in seconds."""
    total = 0.0
    for value, unit in re.findall(r"([0-9.]+)(h|ms|m|s)", text):
        total += float(value) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3}[unit]
    return total


def main():
    marker = os.path.join(sys.argv[1], "rank1_may_submit")
    log = tempfile.TemporaryFile()
    saved = os.dup(2)
    os.dup2(log.fileno(), 2)  # where the runtime logs
    hvd.init()
    check(hvd.size() == 2, "run with 2 ranks")
    rank = hvd.rank()
    tensor = torch.full((4,), float(rank + 1))
    if rank == 0:
        if os.path.exists(marker):
            os.unlink(marker)
        handle = hvd.allreduce_async_(tensor, name=NAME, op=hvd.Sum)
        pattern = re.compile(r"stalled allreduce of tensor 'allreduce\.%s' \(process set 0\): "
                             r"waited (\S+); submitted by ranks \[0\], missing ranks \[1\]; "
                             r"warning (\d+), repeated every 1s while it waits; "
                             r"if a rank never submits it the job is deadlocked: "
                             r"CHORUS_STALL_SHUTDOWN_TIME_SECONDS=N" % re.escape(NAME))
        deadline = time.monotonic() + PATIENCE_S
        while True:
            log.seek(0)
            text = log.read().decode(errors="replace")
            found = pattern.findall(text)
            if len(found) >= WARNINGS or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        os.dup2(saved, 2)
        sys.stderr.write(text)
        check(len(found) >= WARNINGS,
              "%d stall warnings for %s in %d s, expected %d; log:\n%s"
              % (len(found), NAME, PATIENCE_S, WARNINGS, text))
        numbers = [int(n) for _, n in found]
        waits = [seconds(w) for w, _ in found]
        check(numbers == list(range(1, len(found) + 1)), "warnings numbered %s" % numbers)
        check(all(b > a for a, b in zip(waits, waits[1:])), "waits not increasing: %s" % waits)
        check(waits[0] >= 1.0, "first warning before the warning time: %s" % waits[0])
        with open(marker, "w"):
            pass
        result = hvd.synchronize(handle)
    else:
        deadline = time.monotonic() + PATIENCE_S
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        os.dup2(saved, 2)
        check(os.path.exists(marker), "rank 0 never let rank 1 submit")
        result = hvd.allreduce_(tensor, name=NAME, op=hvd.Sum)
    check(torch.equal(result, torch.full((4,), 3.0)), "sum %s, expected 3s" % result)
    hvd.shutdown()
    if rank == 0:
        os.unlink(marker)
        print("stall_repeat_job: rank 0: PASS (%d warnings, waits %s s)"
              % (len(found), ", ".join("%.1f" % w for w in waits)), flush=True)


if __name__ == "__main__":
    main()
