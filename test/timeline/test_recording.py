"""Timeline recording across real 2- and 3-rank jobs (mpirun), checked with a JSON parser.

Needs the chorus Python package (PYTHONPATH) and the chorus-timeline tool
(CHORUS_TIMELINE_TOOL); ctest sets both. Each test runs test/timeline/timeline_job.py.
"""

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "timeline_job.py")
TOOL = os.environ.get("CHORUS_TIMELINE_TOOL",
                      os.path.join(HERE, "..", "..", "timeline", "tools", "chorus_timeline.py"))
SMALL = 4  # timeline_job.SMALL
ACTIVITY_ORDER = ["QUEUE", "WAIT_FOR_DATA", "MEMCPY_IN_FUSION_BUFFER", "MPI_ALLREDUCE",
                  "MPI_ALLGATHER", "MPI_BROADCAST", "MEMCPY_OUT_FUSION_BUFFER", "CALLBACK"]
EPS = 0.0015  # µs: times are printed with three decimals


def run_job(np, env, *job_args, expect_ok=True):
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun not found"
    full_env = dict(os.environ)
    full_env.update(env)
    full_env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(np)]
    for name in sorted(env):
        cmd += ["-x", name]
    for name in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE"):
        if name in full_env:
            cmd += ["-x", name]
    cmd += [sys.executable, JOB] + list(job_args)
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=600)
    if expect_ok:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def load(path):
    with open(path) as f:
        events = json.load(f)
    assert isinstance(events, list) and events[0]["name"] == "chorus_trace"
    return events


def rows(events):
    """tid -> tensor name, per pid."""
    names = {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "thread_name" and e["tid"] != 0:
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    return names


def by_tensor(events):
    """(pid, tensor name) -> its events in file order."""
    names = rows(events)
    out = defaultdict(list)
    for e in events:
        if e["ph"] in ("X", "i") and e.get("tid", 0) != 0:
            out[(e["pid"], names[(e["pid"], e["tid"])])].append(e)
    return out


def inside(child, parent):
    return (child["ts"] >= parent["ts"] - EPS and
            child["ts"] + child["dur"] <= parent["ts"] + parent["dur"] + EPS)


def check_tensor(events_of, op, expect_collective):
    """One submission's spans: NEGOTIATE_<OP> then <OP>, activities nested and in order."""
    spans = [e for e in events_of if e["ph"] == "X"]
    negotiations = [e for e in spans if e["name"] == "NEGOTIATE_" + op]
    ops = [e for e in spans if e["name"] == op]
    assert len(negotiations) == 1 and len(ops) == 1, [e["name"] for e in spans]
    negotiate, span = negotiations[0], ops[0]
    assert negotiate["ts"] + negotiate["dur"] <= span["ts"] + EPS
    activities = [e for e in spans if e is not negotiate and e is not span]
    for a in activities:
        assert inside(a, span), (a, span)
        assert a["name"] in ACTIVITY_ORDER, a["name"]
    ranks = [ACTIVITY_ORDER.index(a["name"]) for a in sorted(activities, key=lambda a: a["ts"])]
    assert ranks == sorted(ranks), [a["name"] for a in activities]
    names = {a["name"] for a in activities}
    assert {"QUEUE", "CALLBACK", expect_collective} <= names, names
    return negotiate, span


def check_job_trace(events, steps, size, pid):
    tensors = by_tensor(events)
    assert all(e["pid"] == pid for e in events)
    for step in range(steps):
        small = ["s%d.w%d" % (step, i) for i in range(SMALL)]
        batches = set()
        for name in small + ["s%d.big" % step]:
            negotiate, span = check_tensor(tensors[(pid, "allreduce." + name)], "ALLREDUCE",
                                           "MPI_ALLREDUCE")
            args = span["args"]
            assert args["dtype"] == "float32" and args["process_set"] == 0
            if name in small:
                batches.add((args["batch_id"], args["batch_size"]))
                n = 10 * (int(name.split(".w")[1]) + 1)
                assert args["shape"] == [n] and args["bytes"] == 4 * n
            else:
                assert args["shape"] == [300000] and args["bytes"] == 1200000
                collective = [e for e in tensors[(pid, "allreduce." + name)]
                              if e["name"] == "MPI_ALLREDUCE"]
                assert collective[0]["args"]["chunks"] == 1
        # The small tensors were fused. Usually into one batch; a loaded machine may split the
        # burst over cycles, so check what must hold whatever the split: every batch id is
        # shared by exactly batch_size of the step's allreduces, and some batch fused several.
        ids = defaultdict(int)
        for name in small + ["s%d.big" % step]:
            for e in tensors[(pid, "allreduce." + name)]:
                if e["ph"] == "X" and e["name"] == "ALLREDUCE":
                    ids[e["args"]["batch_id"]] += 1
        for batch_id, batch_size in batches:
            assert ids[batch_id] == batch_size, (batches, dict(ids))
        assert max(size for _, size in batches) >= 2, batches
        check_tensor(tensors[(pid, "allgather.s%d.gather" % step)], "ALLGATHER", "MPI_ALLGATHER")
        check_tensor(tensors[(pid, "broadcast.s%d.bcast" % step)], "BROADCAST", "MPI_BROADCAST")
    return tensors


def ready_marks(events_of):
    return sorted(e["args"]["rank"] for e in events_of if e["ph"] == "i")


@pytest.mark.parametrize("np", [2, 3])
def test_rank0_trace_has_every_tensor_nested_in_order(tmp_path, np):
    path = tmp_path / "trace.json"
    run_job(np, {"CHORUS_TIMELINE": str(path), "CHORUS_CACHE_CAPACITY": "0"}, "--steps", "3")
    events = load(path)
    assert events[-1]["name"] == "chorus_trace_end"
    assert events[-1]["args"]["dropped_events"] == 0 and not events[-1]["args"]["truncated"]
    header = events[0]["args"]
    assert header["rank"] == 0 and header["size"] == np and header["version"] == 1
    tensors = check_job_trace(events, 3, np, pid=0)
    # Without the cache every tensor is negotiated: rank 0 marks every rank as it reports ready,
    # inside the negotiation span.
    for (pid, name), evs in tensors.items():
        assert ready_marks(evs) == list(range(np)), name
        negotiate = [e for e in evs if e["name"].startswith("NEGOTIATE_")][0]
        for mark in (e for e in evs if e["ph"] == "i"):
            assert mark["name"] == str(mark["args"]["rank"])
            assert negotiate["ts"] - EPS <= mark["ts"] <= negotiate["ts"] + negotiate["dur"] + EPS
    # Only rank 0 records by default.
    assert sorted(os.listdir(tmp_path)) == ["trace.json"]


def test_cached_steps_are_marked_cached(tmp_path):
    path = tmp_path / "trace.json"
    run_job(2, {"CHORUS_TIMELINE": str(path)}, "--steps", "3")
    tensors = check_job_trace(load(path), 3, 2, pid=0)
    first = [e for e in tensors[(0, "allreduce.s0.w0")] if e["name"] == "NEGOTIATE_ALLREDUCE"]
    assert first[0]["args"]["cached"] is False


def test_every_rank_records_then_merge_and_summary_count_right(tmp_path):
    pattern = str(tmp_path / "rank{rank}.json")
    run_job(3, {"CHORUS_TIMELINE": pattern, "CHORUS_CACHE_CAPACITY": "0"}, "--steps", "2")
    files = [str(tmp_path / ("rank%d.json" % r)) for r in range(3)]
    for r, f in enumerate(files):
        events = load(f)
        assert events[0]["args"]["rank"] == r
        tensors = check_job_trace(events, 2, 3, pid=r)
        # A non-coordinator rank marks only itself.
        if r != 0:
            assert all(ready_marks(evs) == [r] for evs in tensors.values())
    merged = str(tmp_path / "all.json")
    subprocess.run([sys.executable, TOOL, "merge"] + files + ["-o", merged], check=True)
    all_events = json.load(open(merged))
    spans = [e for e in all_events if e["ph"] == "X"]
    assert sorted({e["pid"] for e in spans}) == [0, 1, 2]
    per_rank_ops = defaultdict(int)
    for e in spans:
        if e["name"] == "ALLREDUCE":
            per_rank_ops[e["pid"]] += 1
    assert dict(per_rank_ops) == {0: 2 * (SMALL + 1), 1: 2 * (SMALL + 1), 2: 2 * (SMALL + 1)}
    summary = subprocess.run([sys.executable, TOOL, "summary", merged, "--json"], check=True,
                             capture_output=True, text=True)
    report = json.loads(summary.stdout)
    phases = {p["name"]: p for p in report["phases"]}
    assert phases["ALLREDUCE"]["count"] == 3 * 2 * (SMALL + 1)
    assert phases["NEGOTIATE_ALLREDUCE"]["count"] == 3 * 2 * (SMALL + 1)
    assert phases["ALLGATHER"]["count"] == 3 * 2
    assert phases["BROADCAST"]["count"] == 3 * 2
    small_bytes = sum(4 * 10 * (i + 1) for i in range(SMALL))
    assert phases["ALLREDUCE"]["bytes"] == 3 * 2 * (small_bytes + 1200000)


def test_start_and_stop_at_run_time_record_just_that_window(tmp_path):
    path = tmp_path / "window.json"
    run_job(2, {"CHORUS_TIMELINE": "DYNAMIC"}, "--steps", "5", "--mode", "dynamic", "--path",
            str(path))
    events = load(path)
    assert events[-1]["name"] == "chorus_trace_end"
    tensors = by_tensor(events)
    ran = {name.split(".")[1] for (_, name), evs in tensors.items()
           if any(e["ph"] == "X" for e in evs)}
    assert ran == {"s1", "s2"}, ran
    # Rank 1 may submit step 3 before rank 0's stop_timeline returns: rank 0 then records the
    # request it heard (a mark for rank 1), but nothing of step 3 ran while it recorded.
    for (_, name), evs in tensors.items():
        if name.split(".")[1] not in ran:
            assert name.split(".")[1] == "s3", name
            assert [(e["ph"], e["args"]["rank"]) for e in evs] == [("i", 1)], (name, evs)
    check_job_trace([e for e in events], 0, 2, pid=0)
    for step in (1, 2):
        for i in range(SMALL):
            check_tensor(tensors[(0, "allreduce.s%d.w%d" % (step, i))], "ALLREDUCE",
                         "MPI_ALLREDUCE")


def test_size_cap_holds_and_the_file_stays_valid(tmp_path):
    path = tmp_path / "capped.json"
    cap_mb = 0.02
    run_job(2, {"CHORUS_TIMELINE": str(path), "CHORUS_TIMELINE_MAX_MB": str(cap_mb)},
            "--steps", "30")
    assert os.path.getsize(path) <= cap_mb * 1048576
    events = load(path)
    assert [e["name"] for e in events].count("TRACE_TRUNCATED") == 1
    assert events[-2]["name"] == "TRACE_TRUNCATED"
    assert events[-1]["args"]["truncated"] is True


def test_a_full_queue_drops_events_and_says_so(tmp_path):
    path = tmp_path / "dropped.json"
    run_job(2, {"CHORUS_TIMELINE": str(path), "CHORUS_TIMELINE_QUEUE_EVENTS": "4"},
            "--steps", "3")
    events = load(path)
    dropped = events[-1]["args"]["dropped_events"]
    assert dropped > 0
    marks = [e for e in events if e["name"] == "DROPPED_EVENTS"]
    assert marks and marks[-1]["args"]["dropped_events"] <= dropped
    written = [e for e in events if e["ph"] in ("X", "i") and e["name"] != "DROPPED_EVENTS"]
    assert len(written) > 0


def test_mark_cycles_and_cycle_window(tmp_path):
    path = tmp_path / "cycles.json"
    run_job(2, {"CHORUS_TIMELINE": str(path), "CHORUS_TIMELINE_MARK_CYCLES": "1",
                "CHORUS_TIMELINE_START_CYCLE": "3", "CHORUS_TIMELINE_STOP_CYCLE": "9"},
            "--steps", "6")
    events = load(path)
    cycles = [e["args"]["cycle"] for e in events if e["name"] == "CYCLE_START"]
    assert cycles == list(range(3, 9)), cycles
    assert events[-1]["name"] == "chorus_trace_end"


def test_a_bad_timeline_path_fails_init_on_every_rank(tmp_path):
    proc = run_job(2, {"CHORUS_TIMELINE": str(tmp_path / "no" / "such" / "dir" / "t.json")},
                   expect_ok=False)
    assert proc.returncode != 0
    assert "cannot create timeline file" in proc.stdout + proc.stderr
    assert "timeline job done" not in proc.stdout


def test_a_crashed_job_leaves_whole_events_the_tool_reads(tmp_path):
    path = tmp_path / "crash.json"
    proc = run_job(2, {"CHORUS_TIMELINE": str(path)}, "--steps", "3", "--mode", "crash",
                   expect_ok=False)
    assert proc.returncode != 0
    text = path.read_text()
    assert not text.rstrip().endswith("]")
    lines = text.split("\n")
    assert lines[0] == "["
    for line in lines[1:]:
        if line:
            json.loads(line.lstrip(",").rstrip(","))  # every line is one whole event
    summary = subprocess.run([sys.executable, TOOL, "summary", str(path), "--json"],
                             capture_output=True, text=True)
    assert summary.returncode == 0, summary.stderr
    phases = {p["name"]: p for p in json.loads(summary.stdout)["phases"]}
    assert phases["ALLREDUCE"]["count"] >= SMALL + 1
