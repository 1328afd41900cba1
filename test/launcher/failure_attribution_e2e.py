#!/usr/bin/python3
"""Generated failures: a random rank of a 2- or 3-rank chorus.torch job fails at a random step
(test/launcher/failing_worker.py) while the others wait in an allreduce: it dies of a random
uncaught exception, ends with sys.exit(3) or is killed by SIGKILL; or its init fails (a bad
variable there), which fails every rank's init. chorusrun's last line must
name that rank and its host every time (and the exception, for an exception), in MPI mode and
with --gloo, although the ranks that fail because of it often exit first. A rank
whose op failed because of it and that said so before chorusrun stopped it must name the same
rank and its host: the -H name under --gloo (CHORUS_HOSTNAME), the machine's name under mpirun;
and for an exception, the exception too (the cause the failing rank's shutdown sent them).

Usage: failure_attribution_e2e.py --chorusrun PATH [--seeds A-B,C,...] [--python /usr/bin/python3]
Prints one line per run; exits 1 if any run named the wrong rank (or none).
"""

import argparse
import os
import random
import re
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ["RuntimeError", "ValueError", "KeyError", "ZeroDivisionError", "Custom", "exit", "kill"]
WORDS = ["bad", "batch", "nan", "loss", "shard", "missing", "step", "grad"]


def schedule(seed):
    rng = random.Random(seed)
    np = rng.choice([2, 3])
    s = {
        "mode": "--gloo" if seed % 2 else "--mpi",
        "np": np,
        "rank": rng.randrange(np),
        "step": rng.randrange(0, 8),
        "kind": rng.choice(KINDS),
        "message": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))),
        # Drawn last, so that the seeds drawn before this kind existed keep their schedules.
        "init": rng.random() < 0.2,
    }
    if s.pop("init"):
        s["kind"] = "init"
    return s


def expected_line(s):
    """The last line chorusrun must print, or a pattern of it (exit and kill: the failing rank
    is named, by its own end or by the other ranks' failed ops, whichever chorusrun saw first)."""
    if s["kind"] == "init":
        # Its own report (the variable's error), or the others' failed init naming it.
        prefix = r"chorusrun: job failed" + ("" if s["mode"] == "--gloo" else r" \(mpirun exit status 1\)")
        return re.compile(prefix + r": rank %d on localhost (raised ChorusValueError: rank %d: "
                          r"CHORUS_LOG_LEVEL=\"verbose\"|failed chorus init)" % (s["rank"], s["rank"]))
    if s["kind"] in ("exit", "kill"):
        if s["mode"] == "--gloo":
            prefix = "chorusrun: job failed: "
            mpirun = ""
        else:
            # A killed rank under mpirun: mpirun's own words name it.
            prefix = r"chorusrun: job failed \(mpirun exit status \d+\): "
            mpirun = r"|rank %d with PID \d+ on node \S+ exited on signal 9 \(Killed\)" % s["rank"]
        return re.compile(prefix + r"(rank %d on localhost (exited with code 3|killed by SIGKILL|"
                          r"ended while the other ranks ran ops)%s)" % (s["rank"], mpirun))
    cause = "rank %d on localhost raised %s" % (s["rank"], exception_text(s))
    if s["mode"] == "--gloo":
        return "chorusrun: job failed: " + cause
    return "chorusrun: job failed (mpirun exit status 1): " + cause


def exception_text(s):
    """What the failing rank's exception prints as: "ValueError: bad batch"."""
    text = repr(s["message"]) if s["kind"] == "KeyError" else s["message"]  # str(KeyError(m))
    return "%s: %s" % (s["kind"], text)


def matches(want, got):
    return want.match(got) is not None if isinstance(want, re.Pattern) else got == want


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chorusrun", required=True)
    parser.add_argument("--seeds", default="0-11", help="A-B, or a comma-separated list of them")
    parser.add_argument("--python", default="/usr/bin/python3")
    opts = parser.parse_args()
    seeds = []
    for part in opts.seeds.split(","):
        first, _, last = part.partition("-")
        seeds.extend(range(int(first), int(last or first) + 1))
    wrong = []
    blaming = 0  # runs where a stopped rank named the failing one
    with_cause = 0  # ... and the exception it died of
    for seed in seeds:
        s = schedule(seed)
        argv = [opts.chorusrun, "-np", str(s["np"]), "-H", "localhost:%d" % s["np"], s["mode"],
                opts.python, os.path.join(HERE, "failing_worker.py"), str(s["rank"]),
                str(s["step"]), s["kind"], s["message"]]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        lines = p.stderr.strip().splitlines()
        got = lines[-1] if lines else ""
        want = expected_line(s)
        # A rank stopped by the failure that said so before it ended names the failing rank
        # (chorusrun may stop the others before they print anything).
        # An exception: named with it ("chorus was shut down by rank 1 on n1 (ValueError: bad)").
        host = "localhost" if s["mode"] == "--gloo" else socket.gethostname()
        blamed = set(re.findall(r"chorus was shut down by rank (\d+(?: on \S+)?(?: \([^()]*\))?)",
                                p.stderr))
        exited = s["kind"] in ("exit", "kill")
        right = "%d on %s" % (s["rank"], host)
        if not exited:
            right += " (%s)" % exception_text(s)
        status_ok = p.returncode != 0 if exited else p.returncode == 1
        if s["kind"] == "init":
            # The ranks that were fine name the one whose init failed, and no rank ran an op.
            blamed = set(re.findall(r"chorus init failed on (ranks? [\d, ]+) \(", p.stderr))
            right = "rank %d" % s["rank"]
            exited = True  # no exception of its own to pass on
        ok = status_ok and matches(want, got) and blamed <= {right}
        print("seed %d: %s -np %d, rank %d fails (%s) at step %d: status %d, %s"
              % (seed, s["mode"], s["np"], s["rank"], s["kind"], s["step"], p.returncode,
                 "OK" if ok else "WRONG\n  want: %s\n  got:  %s\n  the others blamed: %s"
                 % (getattr(want, "pattern", want), got, sorted(blamed))), flush=True)
        blaming += 1 if blamed else 0
        with_cause += 1 if blamed and not exited else 0
        if not ok:
            wrong.append(seed)
            print(p.stderr[-3000:], flush=True)
    runs = len(seeds)
    print("failure_attribution_e2e: %d runs, %d named the failing rank, wrong: %s; in %d the "
          "stopped ranks named it and its host (in %d with its exception)"
          % (runs, runs - len(wrong), wrong, blaming, with_cause), flush=True)
    if (blaming == 0 or with_cause == 0) and runs >= 4:
        print("failure_attribution_e2e: no stopped rank named the failing one (with its "
              "exception) in any run: the survivors' message was not checked", flush=True)
        sys.exit(1)
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
