"""The flight recorder across real processes (ctest flight_recorder_e2e): jobs with an injected
fault leave one dump per rank, and `chorus-timeline flight` names the rank and the tensor.

  skip      3 ranks (mpirun): rank 1 skips 'grad.3' in the third step; the stall inspector
            (CHORUS_STALL_CHECK_TIME_SECONDS=1) reports, every rank dumps; the job, hung as a
            user's would be, is then ended by this script. Expect: rank 1 never submitted
            'grad.3' (from rank 0's coordinator), every rank's last completed batch the same.
  stop      3 ranks (mpirun, then chorusrun --gloo): rank 2 stops itself (SIGSTOP) before its
            third step; the no-progress bound (3 s) ends the job. Expect: rank 2 left no dump and
            is the one rank not known to have submitted the step's first tensor.
  shape     2 ranks (mpirun): rank 1 submits 'grad.bad' with 5 elements, rank 0 with 4. Expect:
            the failed batch on both ranks, its error naming the tensor and both shapes.
  ask       3 ranks of a healthy job, asked for their dumps (Note [Flight dump on demand]):
            SIGUSR2 to rank 1 (mpirun), to chorusrun (MPI mode: passed through mpirun), to
            chorusrun --gloo (passed to its local workers). Expect: every rank dumps, asked for,
            the ranks agree, no culprit; the job then ends normally (exit 0).
  ask_stuck 2 ranks (mpirun): rank 1 stops itself (SIGSTOP), the no-progress bound is 120 s;
            SIGUSR2 to rank 0, whose loop waits in the cycle's exchange. Expect: rank 0 dumps
            alone, from inside that call, and the analysis names rank 1 (read then: a copy of
            the directory). Then rank 1 resumes (SIGCONT): the loop answers the same request
            from its next cycle, and both ranks dump.

Usage: check_flight_recorder.py --chorusrun PATH --timeline-tool PATH [--only SCENARIO]
(a worker: check_flight_recorder.py --worker SCENARIO). Prints PASS and exits 0 when every
check held; else prints what differed and exits 1.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

STEPS = 3
TENSORS = 5
JOB_LIMIT_S = 180  # a hang of the job under test ends the test, not the machine's patience


def worker(scenario):
    import numpy as np
    import chorus.numpy as hvd
    hvd.init()
    rank = hvd.rank()
    if scenario in ("ask", "ask_stuck"):
        # Steps until the driver's stop file appears (rank 0 looks; every rank learns it from the
        # step's "stop" allreduce, so all run the same steps). After step 2 each rank leaves its
        # pid for the driver.
        marks = os.environ["CHECK_FLIGHT_MARKS"]
        step = 0
        while True:
            if scenario == "ask_stuck" and rank == 1 and step == 3:
                os.kill(os.getpid(), signal.SIGSTOP)
            for i in range(TENSORS):
                hvd.allreduce(np.ones(4, np.float32), name=f"grad.{i}")
            if step == 2:
                with open(os.path.join(marks, f"rank{rank}.pid.tmp"), "w") as f:
                    f.write(str(os.getpid()))
                os.rename(os.path.join(marks, f"rank{rank}.pid.tmp"),
                          os.path.join(marks, f"rank{rank}.pid"))
            stop = rank == 0 and os.path.exists(os.path.join(marks, "stop"))
            if hvd.allreduce(np.array([float(stop)], np.float32), name="stop")[0] > 0:
                return
            step += 1
            time.sleep(0.02)
    if scenario == "shape":
        for i in range(3):
            hvd.allreduce(np.ones(4, np.float32), name=f"grad.{i}")
        try:
            hvd.allreduce(np.ones(5 if rank == 1 else 4, np.float32), name="grad.bad")
        except Exception as e:  # every rank gets the error; the dump is what is checked
            print(f"rank {rank}: {type(e).__name__}", flush=True)
        return
    for step in range(STEPS + 1):
        if scenario == "stop" and rank == 2 and step == 2:
            os.kill(os.getpid(), signal.SIGSTOP)
        for i in range(TENSORS):
            if scenario == "skip" and rank == 1 and step == 2 and i == 3:
                continue
            hvd.allreduce(np.ones(4, np.float32), name=f"grad.{i}")


def run_job(command, env, until_dumps=None):
    """Runs the job to its end, or (until_dumps: a directory and a count) until that many dumps
    are there, then ends it. Returns its output."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True)
    deadline = time.monotonic() + JOB_LIMIT_S
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if until_dumps is not None:
                directory, count = until_dumps
                names = os.listdir(directory) if os.path.isdir(directory) else []
                if sum(n.startswith("rank") and n.endswith(".json") for n in names) >= count:
                    break
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        out = proc.communicate()[0]
    return out


def wait_for(predicate, limit_s):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def count_dumps(directory):
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return sum(n.startswith("rank") and n.endswith(".json") for n in names)


def run_asked_job(command, env, marks, dumps, np_, target, stuck):
    """Starts the job, waits for every rank's pid, sends SIGUSR2 to `target` ("chorusrun" or
    "rank<N>"), waits for the dumps (np_, or rank 0's alone when `stuck`: then copied to
    `dumps`.stuck before rank 1 resumes), then stops the job. Returns (dumps seen in time, the
    job's exit status or None when it had to be killed, its output)."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True)
    pids = {}
    status, dumped = None, False
    try:
        if wait_for(lambda: all(os.path.exists(os.path.join(marks, f"rank{r}.pid"))
                                for r in range(np_)) or proc.poll() is not None, JOB_LIMIT_S):
            for r in range(np_):
                path = os.path.join(marks, f"rank{r}.pid")
                if os.path.exists(path):
                    with open(path) as f:
                        pids[r] = int(f.read())
        if len(pids) == np_:
            if stuck:
                # Rank 1 stopped itself; give rank 0 time to be inside the cycle's exchange.
                wait_for(lambda: process_state(pids[1]) == "T", 60)
                time.sleep(1.5)
            os.kill(proc.pid if target == "chorusrun" else pids[int(target[4:])], signal.SIGUSR2)
            want = 1 if stuck else np_
            dumped = wait_for(lambda: count_dumps(dumps) >= want, 60)
        if stuck and dumped:
            shutil.copytree(dumps, dumps + ".stuck")
        if stuck and 1 in pids:
            os.kill(pids[1], signal.SIGCONT)
        open(os.path.join(marks, "stop"), "w").close()
        try:
            status = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out = proc.communicate()[0]
    return dumped, status, out


def process_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def analyze(tool, directory):
    result = subprocess.run([sys.executable, tool, "flight", directory, "--json"],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return None, result.stderr
    text = subprocess.run([sys.executable, tool, "flight", directory], capture_output=True,
                          text=True, check=True).stdout
    return json.loads(result.stdout), text


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker")
    parser.add_argument("--chorusrun")
    parser.add_argument("--timeline-tool")
    parser.add_argument("--only", help="run only this scenario (skip, stop, shape, ask, ask_stuck)")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return 0

    failures = []

    def check(cond, what, detail=""):
        print(("ok      " if cond else "FAILED  ") + what, flush=True)
        if not cond:
            failures.append(what)
            if detail:
                print(detail, flush=True)

    me = os.path.abspath(__file__)
    mpirun = ["mpirun", "--oversubscribe", "--bind-to", "none"]
    for name, np_, launcher, extra, until in (
            ("skip", 3, "mpi", {"CHORUS_STALL_CHECK_TIME_SECONDS": "1"}, True),
            ("stop", 3, "mpi", {"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS": "3"}, False),
            ("stop", 3, "gloo", {"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS": "3"}, False),
            ("shape", 2, "mpi", {}, False),
            ("ask", 3, "mpi", {}, "rank1"),
            ("ask", 3, "chorusrun", {}, "chorusrun"),
            ("ask", 3, "gloo", {}, "chorusrun"),
            ("ask_stuck", 2, "mpi", {"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS": "120"}, "rank0")):
        if args.only and name != args.only:
            continue
        with tempfile.TemporaryDirectory(prefix="chorus_flight_") as tmp:
            dumps = os.path.join(tmp, "dumps")
            marks = os.path.join(tmp, "marks")
            os.mkdir(marks)
            env = dict(os.environ, CHORUS_FLIGHT_RECORDER_DIR=dumps, CHECK_FLIGHT_MARKS=marks,
                       **extra)
            if launcher == "mpi":
                command = mpirun + ["-np", str(np_)]
                for var in ["PYTHONPATH", "CHORUS_FLIGHT_RECORDER_DIR", "CHECK_FLIGHT_MARKS"] + \
                        list(extra):
                    command += ["-x", var]
            elif launcher == "chorusrun":
                command = [args.chorusrun, "-np", str(np_)]
            else:
                command = [args.chorusrun, "--gloo", "-np", str(np_)]
            command += [sys.executable, me, "--worker", name]
            label = f"{name} ({launcher}, {np_} ranks, SIGUSR2 to {until})" \
                if name.startswith("ask") else f"{name} ({launcher}, {np_} ranks)"
            if name.startswith("ask"):
                dumped, status, out = run_asked_job(command, env, marks, dumps, np_, until,
                                                    stuck=name == "ask_stuck")
                check(dumped, f"{label}: the dumps were written", out)
                if name == "ask":
                    check(status == 0, f"{label}: the job went on and ended normally",
                          f"exit status {status}\n{out}")
            else:
                out = run_job(command, env, (dumps, np_) if until else None)
            if name == "ask_stuck":
                # The request answered by the loop once rank 1 resumed: both ranks dumped.
                final, text = analyze(args.timeline_tool, dumps)
                check(final is not None and final["dumped_ranks"] == [0, 1] and all(
                    r == "asked for (SIGUSR2 to a rank of this job)"
                    for r in final["reasons"].values()),
                    f"{label}: once rank 1 resumed, the loop answered for every rank",
                    str(final and final["reasons"]) + "\n" + text)
                dumps += ".stuck"
            analysis, text = analyze(args.timeline_tool, dumps)
            check(analysis is not None, f"{label}: the dumps are analysed", f"{text}\n{out}")
            if analysis is None:
                continue
            print(text, flush=True)
            culprit = analysis["culprit"]
            if name == "skip":
                check(analysis["dumped_ranks"] == [0, 1, 2], f"{label}: every rank dumped")
                u = analysis["unsubmitted"][0] if analysis["unsubmitted"] else {}
                check(u.get("name") == "allreduce.grad.3" and u.get("missing") == [1]
                      and u.get("submitted") == [0, 2],
                      f"{label}: rank 1 never submitted 'grad.3', ranks 0 and 2 did", str(u))
                check(u.get("source") == "rank 0's coordinator", f"{label}: from the coordinator")
                check(culprit.startswith("rank 1 never submitted allreduce 'allreduce.grad.3'"),
                      f"{label}: the culprit line names rank 1 and 'grad.3'", culprit)
                last = {r["batch"] for r in analysis["last_done"].values()}
                check(last == {2 * TENSORS + 2},
                      f"{label}: every rank's last batch is the one before 'grad.3'", str(last))
            elif name == "stop":
                check(2 in analysis["no_dump_ranks"] and analysis["dumped_ranks"],
                      f"{label}: the stopped rank 2 left no dump, another rank did",
                      str(analysis["dumped_ranks"]))
                u = analysis["unsubmitted"][0] if analysis["unsubmitted"] else {}
                check(u.get("name") == "allreduce.grad.0" and u.get("missing") == []
                      and u.get("unknown") == [2]
                      and u.get("submitted") == analysis["dumped_ranks"],
                      f"{label}: rank 2 is the one rank not known to have submitted 'grad.0'",
                      str(u))
                check("rank 2" in culprit and "'allreduce.grad.0'" in culprit,
                      f"{label}: the culprit line names rank 2 and 'grad.0'", culprit)
                reasons = list(analysis["reasons"].values())
                check(all("no progress for 3s" in r for r in reasons),
                      f"{label}: dumped for the no-progress bound", str(reasons))
            elif name == "shape":
                check(analysis["dumped_ranks"] == [0, 1], f"{label}: both ranks dumped")
                failed = analysis["failed"][0] if analysis["failed"] else {}
                check(failed.get("batch") == 3 and failed.get("ranks") == [0, 1],
                      f"{label}: batch 3 failed on both ranks", str(failed))
                check("'allreduce.grad.bad'" in failed.get("error", "")
                      and "rank 0 [4], rank 1 [5]" in failed.get("error", ""),
                      f"{label}: its error names the tensor and each rank's shape", str(failed))
                check("'allreduce.grad.bad'" in culprit, f"{label}: the culprit line names it",
                      culprit)
            elif name == "ask":
                check(analysis["dumped_ranks"] == [0, 1, 2], f"{label}: every rank dumped")
                reasons = list(analysis["reasons"].values())
                check(analysis["asked"] and all(r.startswith("asked for (SIGUSR2") for r in reasons),
                      f"{label}: every dump says it was asked for", str(reasons))
                last = {r["batch"] for r in analysis["last_done"].values() if r}
                check(len(last) == 1 and min(last) >= 3 * (TENSORS + 1) - 2,
                      f"{label}: the ranks dumped after the same batch, past step 2", str(last))
                check(culprit.startswith("the ranks agree on every batch"),
                      f"{label}: no culprit in a healthy job", culprit)
            elif name == "ask_stuck":
                check(analysis["dumped_ranks"] == [0], f"{label}: rank 0 alone dumped",
                      str(analysis["dumped_ranks"]))
                reason = analysis["reasons"].get("0", analysis["reasons"].get(0, ""))
                check(reason.startswith("asked for (SIGUSR2) while this rank was inside "
                                        "MPI_Iallreduce (the cycle's bit vector) for "),
                      f"{label}: from inside the cycle's exchange", reason)
                check("rank 1" in culprit, f"{label}: the analysis names rank 1", culprit)
    if failures:
        print(f"check_flight_recorder: {len(failures)} check(s) failed", flush=True)
        return 1
    print("check_flight_recorder: PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
