"""Tests of chorus-timeline merge|summary on hand-made traces that follow docs/timeline.md.

The scenario: a world of 2 ranks, 3 tensors (grad/a, grad/b, grad/c), all ALLREDUCE.
Rank 0 (coordinator, marks every rank) records 2 steps; rank 1 records step 1 only, drops 7
events, and its clock runs 1000 us ahead of rank 0's (clock_offset_us = 1000) while its
recording started 500 us later by its own clock (epoch_unix_us = E0 + 500). On rank 0's clock
rank 1's ts = 0 is therefore at E0 - 500, so merge moves rank 1 by -500 us relative to rank 0;
rank 1's first event (CYCLE_START at ts 400, i.e. -100 on rank 0's clock) is the earliest of
all, so the merged trace shifts every event by +100 more.
"""

import json
import os

import pytest

E0 = 1_700_000_000_000_000  # µs since the Unix epoch: too large for float64 to keep ns decimals
HOSTS = {0: "host-a", 1: "host-b"}


class Recorder:
    """Builds the event list one rank's recorder would write (format version 1)."""

    def __init__(self, rank, size=2, epoch=E0, offset=0, version=1):
        self.rank = rank
        self.tids = {}
        self.events = [
            {"name": "chorus_trace", "ph": "M", "pid": rank, "tid": 0,
             "args": {"format": "chorus-timeline", "version": version, "rank": rank,
                      "size": size, "hostname": HOSTS[rank], "epoch_unix_us": epoch,
                      "clock_offset_us": offset}},
            {"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"rank {rank}"}},
            {"name": "process_sort_index", "ph": "M", "pid": rank, "args": {"sort_index": rank}},
            {"name": "thread_name", "ph": "M", "pid": rank, "tid": 0, "args": {"name": "cycles"}},
        ]

    def tid(self, tensor):
        if tensor not in self.tids:
            self.tids[tensor] = len(self.tids) + 1
            self.events.append({"name": "thread_name", "ph": "M", "pid": self.rank,
                                "tid": self.tids[tensor], "args": {"name": tensor}})
        return self.tids[tensor]

    def span(self, tensor, name, ts, dur, args=None):
        ev = {"name": name, "ph": "X", "pid": self.rank, "tid": self.tid(tensor), "ts": ts,
              "dur": dur}
        if args is not None:
            ev["args"] = args
        self.events.append(ev)

    def negotiate(self, tensor, ts, dur, marks, cached=False):
        self.span(tensor, "NEGOTIATE_ALLREDUCE", ts, dur, {"cached": cached})
        for rank, mark_ts in marks:
            self.events.append({"name": str(rank), "ph": "i", "s": "t", "pid": self.rank,
                                "tid": self.tid(tensor), "ts": mark_ts, "args": {"rank": rank}})

    def op(self, tensor, ts, dur, nbytes, batch_id, batch_size, activities):
        self.span(tensor, "ALLREDUCE", ts, dur,
                  {"dtype": "float32", "shape": [nbytes // 4], "bytes": nbytes,
                   "batch_id": batch_id, "batch_size": batch_size, "process_set": 0})
        for name, a_ts, a_dur, *args in activities:
            self.span(tensor, name, a_ts, a_dur, args[0] if args else None)

    def rank_mark(self, name, ts, args, scope="p"):
        self.events.append({"name": name, "ph": "i", "s": scope, "pid": self.rank, "tid": 0,
                            "ts": ts, "args": args})

    def close(self, dropped=0, truncated=False):
        self.events.append({"name": "chorus_trace_end", "ph": "M", "pid": self.rank, "tid": 0,
                            "args": {"events": len(self.events), "dropped_events": dropped,
                                     "truncated": truncated}})
        return self.events


def fused(ts, dur, cb):
    """Activities of a small tensor in a fused allreduce (cb: start of its callback)."""
    return [("QUEUE", ts, 5), ("MEMCPY_IN_FUSION_BUFFER", ts + 5, 5),
            ("MPI_ALLREDUCE", ts + 10, 30), ("MEMCPY_OUT_FUSION_BUFFER", cb - 5, 5),
            ("CALLBACK", cb, 5)]


def rank0_recorder():
    r = Recorder(0)
    r.rank_mark("CYCLE_START", 5, {"cycle": 1})
    # Step 1: a and b fused in batch 1, c alone in batch 2 (large, reduced in place).
    r.negotiate("grad/a", 10, 20, [(0, 10), (1, 30)])  # last ready: 1
    r.negotiate("grad/b", 12, 18, [(0, 12), (1, 30)])  # last ready: 1
    r.negotiate("grad/c", 14, 26, [(1, 14), (0, 40)])  # last ready: 0
    r.op("grad/a", 30, 50, 400, 1, 2, fused(30, 50, 75))
    r.op("grad/b", 30, 52, 800, 1, 2, fused(30, 52, 77))
    r.op("grad/c", 40, 60, 4000, 2, 1,
         [("QUEUE", 40, 42), ("MPI_ALLREDUCE", 82, 16, {"chunks": 2}), ("CALLBACK", 98, 2)])
    # Step 2: a decided by the cache (marks only rank 0), c a tie, all three in batch 3.
    r.rank_mark("CYCLE_START", 1005, {"cycle": 2})
    r.negotiate("grad/a", 1010, 5, [(0, 1010)], cached=True)
    r.negotiate("grad/b", 1012, 8, [(0, 1012), (1, 1020)])  # last ready: 1
    r.negotiate("grad/c", 1014, 6, [(0, 1020), (1, 1020)])  # tie
    r.op("grad/a", 1015, 40, 400, 3, 3,
         [("QUEUE", 1015, 5), ("MPI_ALLREDUCE", 1021, 20), ("CALLBACK", 1041, 2)])
    r.op("grad/b", 1020, 42, 800, 3, 3,
         [("QUEUE", 1020, 1), ("MPI_ALLREDUCE", 1021, 20), ("CALLBACK", 1041, 2)])
    r.op("grad/c", 1020, 44, 4000, 3, 3,
         [("QUEUE", 1020, 1), ("MPI_ALLREDUCE", 1021, 20), ("CALLBACK", 1041, 2)])
    return r


def rank1_recorder(size=2):
    r = Recorder(1, size=size, epoch=E0 + 500, offset=1000)
    r.rank_mark("CYCLE_START", 400, {"cycle": 1})
    # First appearance order b, a, c: tids differ from rank 0's.
    r.negotiate("grad/b", 600.125, 20, [(1, 600.125)])
    r.negotiate("grad/a", 601.3, 22, [(1, 601.3)])
    r.negotiate("grad/c", 602, 30, [(1, 602)])
    r.op("grad/a", 625, 70, 400, 1, 2,
         [("QUEUE", 625, 1), ("MPI_ALLREDUCE", 630, 60), ("CALLBACK", 692, 2)])
    r.op("grad/b", 625, 71, 800, 1, 2,
         [("QUEUE", 625, 1), ("MPI_ALLREDUCE", 630, 60), ("CALLBACK", 693, 2)])
    r.op("grad/c", 635, 90, 4000, 2, 1,
         [("QUEUE", 635, 1), ("MPI_ALLREDUCE", 640, 80, {"chunks": 2}), ("CALLBACK", 722, 2)])
    r.rank_mark("DROPPED_EVENTS", 700, {"dropped_events": 7}, scope="p")
    return r


def rank0_events():
    return rank0_recorder().close()


def rank1_events(size=2):
    return rank1_recorder(size).close(dropped=7)


def trace_text(events, style="trailing", closed=True):
    """The file a recorder writes: one event per line, comma after (trailing) or before (leading)
    each event, or `[` on the first event's line (inline). closed=False leaves out the `]`."""
    lines = [json.dumps(ev) for ev in events]
    if style == "leading":
        text = "[\n" + "\n".join(lines[:1] + ["," + line for line in lines[1:]])
        return text + ("\n]\n" if closed else "\n")
    head = "[" if style == "inline" else "[\n"
    if closed:
        return head + ",\n".join(lines) + "\n]\n"
    return head + "".join(line + ",\n" for line in lines)


def write(path, events, **kwargs):
    path.write_text(trace_text(events, **kwargs))
    return path


@pytest.fixture
def r0(tmp_path):
    return write(tmp_path / "trace.rank0.json", rank0_events())


@pytest.fixture
def r1(tmp_path):
    return write(tmp_path / "trace.rank1.json", rank1_events())


@pytest.fixture
def merged(tmp_path, r0, r1, run_tool):
    out = tmp_path / "all.json"
    p = run_tool("merge", r0, r1, "-o", out)
    assert p.returncode == 0, p.stderr
    return out


def summary_json(run_tool, path, *extra):
    p = run_tool("summary", path, "--json", *extra)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def phase(summary, name):
    rows = [row for row in summary["phases"] if row["name"] == name]
    assert len(rows) == 1, [row["name"] for row in summary["phases"]]
    return rows[0]


def read_events(path):
    return json.loads(path.read_text())


def assert_refused(p, *fragments):
    """Exit code 1, one line on stderr naming each fragment, nothing on stdout."""
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("chorus-timeline: ")
    for fragment in fragments:
        assert str(fragment) in lines[0], (fragment, lines[0])


def test_fixture_event_counts():
    # Rank 0: 7 metadata, 2 cycle marks, 6 NEGOTIATE spans with 11 marks, 6 op spans with 22
    # activities, 1 end. Rank 1: 7 metadata, 1 cycle mark, 3 NEGOTIATE spans with 3 marks,
    # 3 op spans with 9 activities, 1 DROPPED_EVENTS, 1 end. Guards the numbers below.
    assert len(rank0_events()) == 55
    assert len(rank1_events()) == 28


# ---------------------------------------------------------------------------------------------
# merge


def test_merge_keeps_every_event_and_adds_one_header(merged):
    events = read_events(merged)
    assert len(events) == 1 + 55 + 28
    assert events[0] == {"name": "chorus_trace", "ph": "M", "pid": 0, "tid": 0,
                         "args": {"format": "chorus-timeline", "version": 1,
                                  "merged_ranks": [0, 1], "size": 2}}
    pids = [ev["pid"] for ev in events[1:]]
    assert pids == [0] * 55 + [1] * 28
    names = sorted(ev["name"] for ev in events[1:])
    assert names == sorted(ev["name"] for ev in rank0_events() + rank1_events())


def test_merge_writes_one_event_per_line(merged):
    lines = merged.read_text().splitlines()
    assert lines[0] == "[" and lines[-1] == "]"
    assert len(lines) == 2 + 1 + 55 + 28
    for line in lines[1:-1]:
        assert isinstance(json.loads(line.rstrip(",")), dict)


def test_merge_names_processes_after_rank_and_host(merged):
    meta = {(ev["pid"], ev["name"]): ev["args"] for ev in read_events(merged)
            if ev["ph"] == "M" and ev["name"].startswith("process_")}
    assert meta == {
        (0, "process_name"): {"name": "rank 0 (host-a)"},
        (0, "process_sort_index"): {"sort_index": 0},
        (1, "process_name"): {"name": "rank 1 (host-b)"},
        (1, "process_sort_index"): {"sort_index": 1},
    }


def test_merge_keeps_each_rank_header_and_end(merged):
    events = read_events(merged)
    headers = [ev for ev in events[1:] if ev["name"] == "chorus_trace"]
    assert headers == [rank0_events()[0], rank1_events()[0]]
    ends = [ev for ev in events if ev["name"] == "chorus_trace_end"]
    assert [(ev["pid"], ev["args"]) for ev in ends] == [
        (0, {"events": 54, "dropped_events": 0, "truncated": False}),
        (1, {"events": 27, "dropped_events": 7, "truncated": False}),
    ]


def timed(events, pid, name, tid=None):
    return [ev for ev in events
            if ev["pid"] == pid and ev["name"] == name and (tid is None or ev["tid"] == tid)]


def test_merge_moves_ranks_onto_rank0_clock(merged):
    events = read_events(merged)
    # Rank 1's CYCLE_START (ts 400, -100 on rank 0's clock) is the earliest event: now 0.
    assert [ev["ts"] for ev in timed(events, 1, "CYCLE_START")] == [0]
    assert min(ev["ts"] for ev in events if ev["ph"] != "M") == 0
    # Rank 0: ts + 100.
    assert [ev["ts"] for ev in timed(events, 0, "CYCLE_START")] == [105, 1105]
    assert [ev["ts"] for ev in timed(events, 0, "NEGOTIATE_ALLREDUCE", tid=1)] == [110, 1110]
    # Rank 1: ts + 500 - 1000 + 100, nanosecond decimals kept despite the 1.7e15 epochs.
    neg = timed(events, 1, "NEGOTIATE_ALLREDUCE")
    assert neg[0]["ts"] == 200.125
    assert neg[1]["ts"] == pytest.approx(201.3, abs=1e-9)
    assert neg[2]["ts"] == 202
    assert [ev["ts"] for ev in timed(events, 1, "0") + timed(events, 1, "1")] == \
        [200.125, pytest.approx(201.3, abs=1e-9), 202]
    assert [ev["ts"] for ev in timed(events, 1, "ALLREDUCE")] == [225, 225, 235]
    # Durations are not touched.
    assert [ev["dur"] for ev in timed(events, 1, "ALLREDUCE")] == [70, 71, 90]


def recorder_layout(events, closed=True):
    """The byte layout of timeline/json_format.cc: compact JSON, "[\n" + first event, then
    ",\n" + event per event, "\n]\n" at the end; clock_offset_us printed with "%.3f"."""
    text = "[\n" + ",\n".join(json.dumps(ev, separators=(",", ":")) for ev in events)
    text = text.replace('"clock_offset_us":1000.25}', '"clock_offset_us":1000.250}')
    return text + ("\n]\n" if closed else "")


@pytest.mark.parametrize("closed", [True, False])
def test_merge_recorder_layout_with_fractional_offset(tmp_path, run_tool, closed):
    rec = rank1_recorder()
    rec.events[0]["args"]["clock_offset_us"] = 1000.25
    r1 = tmp_path / "r1.json"
    r1.write_text(recorder_layout(rec.close(dropped=7), closed))
    assert '"clock_offset_us":1000.250}' in r1.read_text()
    r0 = tmp_path / "r0.json"
    r0.write_text(recorder_layout(rank0_events(), closed))
    out = tmp_path / "out.json"
    p = run_tool("merge", r0, r1, "-o", out)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("dropped 0 incomplete last lines") == (0 if closed else 2)
    events = read_events(out)
    # Rank 1 moves by 500 - 1000.25; its CYCLE_START (-100.25 on rank 0's clock) becomes 0.
    assert [ev["ts"] for ev in timed(events, 1, "CYCLE_START")] == [0]
    assert [ev["ts"] for ev in timed(events, 0, "CYCLE_START")] == [105.25, 1105.25]
    assert timed(events, 1, "NEGOTIATE_ALLREDUCE")[0]["ts"] == 200.125


def test_merge_output_does_not_depend_on_input_order(tmp_path, r0, r1, merged, run_tool):
    out = tmp_path / "reversed.json"
    p = run_tool("merge", r1, r0, "-o", out)
    assert p.returncode == 0, p.stderr
    assert out.read_text() == merged.read_text()


def test_merge_single_rank_notes_missing_ranks(tmp_path, r1, run_tool):
    out = tmp_path / "only1.json"
    p = run_tool("merge", r1, "-o", out)
    assert p.returncode == 0, p.stderr
    assert "no input for rank 0 of size 2" in p.stderr
    events = read_events(out)
    assert events[0]["args"]["merged_ranks"] == [1]
    assert events[0]["pid"] == 1
    # Alone, rank 1 is shifted so that its own first event is at 0.
    assert [ev["ts"] for ev in timed(events, 1, "NEGOTIATE_ALLREDUCE")] == \
        [200.125, pytest.approx(201.3, abs=1e-9), 202]


def test_merge_adds_missing_process_metadata(tmp_path, run_tool):
    events = [ev for ev in rank0_events() if not ev["name"].startswith("process_")]
    src = write(tmp_path / "bare.json", events)
    out = tmp_path / "out.json"
    assert run_tool("merge", src, "-o", out).returncode == 0
    merged_events = read_events(out)
    assert len(merged_events) == 1 + len(events) + 2
    assert {"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
            "args": {"name": "rank 0 (host-a)"}} in merged_events


def test_merge_of_cut_input_drops_only_the_half_line(tmp_path, r1, run_tool):
    events = rank0_events()[:-1]  # crashed: no chorus_trace_end
    text = trace_text(events, closed=False) + json.dumps(rank0_events()[-1])[:20]
    src = tmp_path / "cut.json"
    src.write_text(text)
    out = tmp_path / "out.json"
    p = run_tool("merge", src, r1, "-o", out)
    assert p.returncode == 0, p.stderr
    assert "dropped 1 incomplete last line" in p.stderr
    assert len(read_events(out)) == 1 + 54 + 28


# ---------------------------------------------------------------------------------------------
# merge refusals


def test_merge_refuses_same_rank_twice(tmp_path, r0, run_tool):
    twin = write(tmp_path / "twin.json", rank0_events())
    out = tmp_path / "out.json"
    assert_refused(run_tool("merge", r0, twin, "-o", out), "rank 0", r0, twin)
    assert not out.exists()


def test_merge_refuses_the_same_file_twice(tmp_path, r0, run_tool):
    assert_refused(run_tool("merge", r0, r0, "-o", tmp_path / "out.json"), "rank 0")


def test_merge_refuses_different_sizes(tmp_path, r0, run_tool):
    other = write(tmp_path / "size3.json", rank1_events(size=3))
    out = tmp_path / "out.json"
    assert_refused(run_tool("merge", r0, other, "-o", out), other, "size 3", "size 2")
    assert not out.exists()


def test_merge_refuses_a_merged_trace(tmp_path, merged, r0, run_tool):
    out = tmp_path / "again.json"
    assert_refused(run_tool("merge", merged, "-o", out), merged, "already a merged trace")
    assert_refused(run_tool("merge", r0, merged, "-o", out), merged, "already a merged trace")
    assert not out.exists()


def test_merge_refuses_to_overwrite_an_input(r0, r1, run_tool):
    before = r0.read_text()
    assert_refused(run_tool("merge", r0, r1, "-o", r0), "overwrite")
    assert r0.read_text() == before


def test_merge_refuses_a_non_chorus_file(tmp_path, r0, run_tool):
    other = tmp_path / "chrome.json"
    other.write_text(json.dumps([{"name": "x", "ph": "X", "pid": 0, "tid": 0, "ts": 1, "dur": 1}]))
    out = tmp_path / "out.json"
    assert_refused(run_tool("merge", r0, other, "-o", out), other, "not a chorus trace")
    assert not out.exists()


def test_merge_reports_an_unwritable_output(tmp_path, r0, run_tool):
    out = tmp_path / "no-such-dir" / "out.json"
    assert_refused(run_tool("merge", r0, "-o", out), out)


# ---------------------------------------------------------------------------------------------
# summary


def test_summary_single_rank_phases(run_tool, r0):
    s = summary_json(run_tool, r0)
    allreduce = phase(s, "ALLREDUCE")
    assert allreduce == {
        "name": "ALLREDUCE", "count": 6, "total_us": 288, "mean_us": 48, "p50_us": 44,
        "p99_us": 60, "bytes": 10400, "batch_size_mean": pytest.approx(2.333),
        "batch_size_max": 3, "batches": 3, "count_by_rank": {"0": 6},
    }
    neg = phase(s, "NEGOTIATE_ALLREDUCE")
    assert (neg["count"], neg["total_us"], neg["p50_us"], neg["p99_us"]) == (6, 83, 8, 26)
    assert neg["mean_us"] == pytest.approx(13.833)
    assert neg["bytes"] is None and neg["batches"] is None and neg["batch_size_max"] is None
    queue = phase(s, "QUEUE")
    assert (queue["count"], queue["total_us"], queue["p50_us"], queue["p99_us"]) == (6, 59, 5, 42)
    mpi = phase(s, "MPI_ALLREDUCE")
    assert (mpi["count"], mpi["total_us"], mpi["p50_us"], mpi["p99_us"]) == (6, 136, 20, 30)
    callback = phase(s, "CALLBACK")
    assert (callback["count"], callback["total_us"], callback["p50_us"]) == (6, 18, 2)
    assert [p["name"] for p in s["phases"]] == [
        "ALLREDUCE", "MPI_ALLREDUCE", "NEGOTIATE_ALLREDUCE", "QUEUE", "CALLBACK",
        "MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER"]
    assert (phase(s, "MEMCPY_IN_FUSION_BUFFER")["count"],
            phase(s, "MEMCPY_IN_FUSION_BUFFER")["total_us"]) == (2, 10)


def test_summary_single_rank_last_ready(run_tool, r0):
    n = summary_json(run_tool, r0)["negotiation"]
    expected = {"spans": 6, "cached": 1, "with_marks": 5, "ties": 1,
                "last_ready": {"0": 1, "1": 3}}
    assert n == dict(expected, by_recorder={"0": expected})


def test_summary_non_coordinator_has_no_last_ready(run_tool, r1):
    n = summary_json(run_tool, r1)["negotiation"]
    assert (n["spans"], n["with_marks"], n["ties"], n["last_ready"]) == (3, 0, 0, {})


def test_summary_slowest_ops_name_tensors_per_rank(run_tool, r0, r1, merged):
    assert summary_json(run_tool, r0, "--top", "2")["slowest"] == [
        {"rank": 0, "tensor": "grad/c", "op": "ALLREDUCE", "ts_us": 40, "dur_us": 60,
         "bytes": 4000},
        {"rank": 0, "tensor": "grad/b", "op": "ALLREDUCE", "ts_us": 30, "dur_us": 52,
         "bytes": 800},
    ]
    slowest = summary_json(run_tool, merged, "--top", "4")["slowest"]
    assert [(o["rank"], o["tensor"], o["dur_us"], o["ts_us"]) for o in slowest] == [
        (1, "grad/c", 90, 235), (1, "grad/b", 71, 225), (1, "grad/a", 70, 225),
        (0, "grad/c", 60, 140)]
    assert summary_json(run_tool, r0, "--top", "0")["slowest"] == []
    assert len(summary_json(run_tool, r0)["slowest"]) == 6  # default 10, 6 op spans


def test_summary_merged_aggregates_ranks(run_tool, merged):
    s = summary_json(run_tool, merged)
    assert s["merged"] is True and s["size"] == 2
    allreduce = phase(s, "ALLREDUCE")
    assert (allreduce["count"], allreduce["total_us"], allreduce["p50_us"],
            allreduce["p99_us"]) == (9, 519, 52, 90)
    assert allreduce["mean_us"] == pytest.approx(57.667)
    assert allreduce["bytes"] == 15600
    assert allreduce["batches"] == 5  # batch ids 1, 2 exist on both ranks: counted per rank
    assert allreduce["batch_size_mean"] == pytest.approx(2.111)
    assert allreduce["batch_size_max"] == 3
    assert allreduce["count_by_rank"] == {"0": 6, "1": 3}
    neg = phase(s, "NEGOTIATE_ALLREDUCE")
    assert (neg["count"], neg["total_us"], neg["p50_us"], neg["p99_us"]) == (9, 155, 20, 30)
    assert neg["count_by_rank"] == {"0": 6, "1": 3}


def test_summary_merged_last_ready_by_recorder(run_tool, merged):
    n = summary_json(run_tool, merged)["negotiation"]
    assert (n["spans"], n["cached"], n["with_marks"], n["ties"], n["last_ready"]) == \
        (9, 1, 5, 1, {"0": 1, "1": 3})
    assert n["by_recorder"] == {
        "0": {"spans": 6, "cached": 1, "with_marks": 5, "ties": 1,
              "last_ready": {"0": 1, "1": 3}},
        "1": {"spans": 3, "cached": 0, "with_marks": 0, "ties": 0, "last_ready": {}},
    }


def test_summary_dropped_and_truncated(run_tool, r0, r1, merged):
    s0 = summary_json(run_tool, r0)
    assert (s0["dropped_events"], s0["truncated"]) == (0, False)
    assert s0["ranks"] == [{"rank": 0, "hostname": "host-a", "closed": True, "events": 54,
                            "dropped_events": 0, "truncated": False}]
    s1 = summary_json(run_tool, r1)
    assert (s1["dropped_events"], s1["truncated"]) == (7, False)
    s = summary_json(run_tool, merged)
    assert (s["dropped_events"], s["truncated"]) == (7, False)
    assert [(r["rank"], r["hostname"], r["dropped_events"]) for r in s["ranks"]] == \
        [(0, "host-a", 0), (1, "host-b", 7)]


def test_summary_size_capped_trace(tmp_path, run_tool):
    rec = rank1_recorder()
    rec.rank_mark("TRACE_TRUNCATED", 730, {"max_bytes": 1 << 20}, scope="g")
    closed = write(tmp_path / "capped.json", rec.close(dropped=7, truncated=True))
    s = summary_json(run_tool, closed)
    assert (s["dropped_events"], s["truncated"], s["ranks"][0]["closed"]) == (7, True, True)
    # Crashed after the cap: no chorus_trace_end; the marks still tell.
    crashed = write(tmp_path / "capped-crash.json", rec.events[:-1], closed=False)
    s = summary_json(run_tool, crashed)
    assert (s["dropped_events"], s["truncated"], s["ranks"][0]["closed"]) == (7, True, False)
    assert s["ranks"][0]["events"] is None


def test_summary_json_keys(run_tool, merged):
    s = summary_json(run_tool, merged, "--top", "1")
    assert set(s) == {"file", "merged", "size", "ranks", "dropped_events", "truncated", "input",
                      "phases", "slowest", "negotiation"}
    assert s["file"] == str(merged)
    assert s["input"] == {"complete": True, "lines_dropped": 0}
    assert set(s["ranks"][0]) == {"rank", "hostname", "closed", "events", "dropped_events",
                                  "truncated"}
    for row in s["phases"]:
        assert set(row) == {"name", "count", "total_us", "mean_us", "p50_us", "p99_us", "bytes",
                            "batch_size_mean", "batch_size_max", "batches", "count_by_rank"}
    assert set(s["slowest"][0]) == {"rank", "tensor", "op", "ts_us", "dur_us", "bytes"}
    assert set(s["negotiation"]) == {"spans", "cached", "with_marks", "ties", "last_ready",
                                     "by_recorder"}
    assert set(s["negotiation"]["by_recorder"]["0"]) == {"spans", "cached", "with_marks", "ties",
                                                         "last_ready"}


def test_summary_text_tables(run_tool, merged):
    p = run_tool("summary", merged)
    assert p.returncode == 0 and p.stderr == ""
    lines = p.stdout.splitlines()
    assert lines[0] == f"trace {merged}: ranks 0, 1 of size 2 (merged)"
    assert lines[1] == "dropped_events 7, truncated no"
    start = lines.index("phases (us)") + 1
    header = lines[start]
    assert header.split() == ["phase", "count", "total", "mean", "p50", "p99", "bytes",
                              "batch_mean", "batch_max", "batches"]
    table = lines[start:start + 8]
    assert len({len(line) for line in table}) == 1  # right-aligned numbers: one width
    assert table[1].split() == ["ALLREDUCE", "9", "519.000", "57.667", "52.000", "90.000",
                                "15600", "2.111", "3", "5"]
    # Every number column ends under its header.
    for word in ("count", "total", "p50", "batches"):
        end = header.index(word) + len(word)
        assert table[1][end - 1] != " " and (end == len(table[1]) or table[1][end] == " ")
    assert "negotiation: 9 NEGOTIATE spans (1 cached), 5 with ready marks of >= 2 ranks, " \
        "ties 1" in lines
    last = lines.index("last ready")
    assert lines[last + 1].split() == ["recorded_by", "last_ready_rank", "spans"]
    assert [line.split() for line in lines[last + 2:]] == [["0", "0", "1"], ["0", "1", "3"]]
    slow = lines.index("slowest op spans (9)")
    assert lines[slow + 2].split() == ["1", "grad/c", "ALLREDUCE", "90.000", "4000", "235.000"]


# ---------------------------------------------------------------------------------------------
# Reading whole, cut and malformed files


@pytest.mark.parametrize("style", ["trailing", "leading", "inline"])
def test_closed_layouts_read_alike(tmp_path, run_tool, r0, style):
    path = write(tmp_path / f"{style}.json", rank0_events(), style=style)
    p = run_tool("summary", path, "--json")
    assert p.returncode == 0 and p.stderr == ""
    reference = summary_json(run_tool, r0)
    got = json.loads(p.stdout)
    assert dict(got, file=None) == dict(reference, file=None)


@pytest.mark.parametrize("style", ["trailing", "leading", "inline"])
def test_missing_bracket_only(tmp_path, run_tool, r0, style):
    path = write(tmp_path / f"open-{style}.json", rank0_events(), style=style, closed=False)
    p = run_tool("summary", path, "--json")
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines() == [
        f"chorus-timeline: {path}: trace not closed (no final ']'), read 55 events, "
        "dropped 0 incomplete last lines"]
    got = json.loads(p.stdout)
    assert got["input"] == {"complete": False, "lines_dropped": 0}
    reference = summary_json(run_tool, r0)
    assert got["phases"] == reference["phases"]
    assert got["negotiation"] == reference["negotiation"]


@pytest.mark.parametrize("style", ["trailing", "leading"])
def test_half_written_last_line_is_dropped(tmp_path, run_tool, style):
    events = rank0_events()
    # Crash while writing the last ALLREDUCE span (step 2, grad/c): nothing after it exists.
    last_op = max(i for i, ev in enumerate(events) if ev["name"] == "ALLREDUCE")
    text = trace_text(events[:last_op], style=style, closed=False)
    half = json.dumps(events[last_op])[:37]
    text += ("," + half) if style == "leading" else half
    path = tmp_path / "cut.json"
    path.write_text(text)
    p = run_tool("summary", path, "--json")
    assert p.returncode == 0, p.stderr
    assert "dropped 1 incomplete last line" in p.stderr
    assert f"read {last_op} events" in p.stderr
    s = json.loads(p.stdout)
    assert s["input"] == {"complete": False, "lines_dropped": 1}
    allreduce = phase(s, "ALLREDUCE")
    assert (allreduce["count"], allreduce["total_us"], allreduce["bytes"]) == (5, 244, 6400)
    assert s["ranks"][0]["closed"] is False and s["ranks"][0]["events"] is None


def test_trailing_comma_before_bracket_is_accepted(tmp_path, run_tool):
    path = tmp_path / "comma.json"
    path.write_text("[\n" + "".join(json.dumps(ev) + ",\n" for ev in rank0_events()) + "]\n")
    p = run_tool("summary", path, "--json")
    assert p.returncode == 0 and p.stderr == ""
    assert phase(json.loads(p.stdout), "ALLREDUCE")["count"] == 6


def test_corrupt_middle_line_is_refused(tmp_path, run_tool):
    lines = trace_text(rank0_events(), closed=False).splitlines()
    lines[10] = lines[10][:15]
    path = tmp_path / "corrupt.json"
    path.write_text("\n".join(lines) + "\n")
    assert_refused(run_tool("summary", path), path, "not JSON", "line 11")


def header_with(**changes):
    events = rank0_events()
    events[0] = dict(events[0], args=dict(events[0]["args"], **changes))
    return events


NOT_A_TRACE = {
    "not-json.json": ("hello, world\n", "not JSON"),
    "empty.json": ("", "not JSON"),
    "object.json": ('{"traceEvents": []}', "not an array of events"),
    "numbers.json": ("[1, 2, 3]", "not an array of objects"),
    "cut-numbers.json": ("[\n1,\n2,\n", "not an array of objects"),
    "empty-array.json": ("[]", "no chorus_trace metadata event"),
    "only-bracket.json": ("[\n", "no chorus_trace metadata event"),
    "chrome.json": (trace_text([ev for ev in rank0_events() if ev["name"] != "chorus_trace"]),
                    "no chorus_trace metadata event"),
    "version2.json": (trace_text(header_with(version=2)),
                      "unsupported chorus trace version 2"),
    "version-true.json": (trace_text(header_with(version=True)),
                          "unsupported chorus trace version True"),
    "format.json": (trace_text(header_with(format="other")), "not a chorus trace"),
    "no-offset.json": (trace_text(header_with(clock_offset_us=None)), "'clock_offset_us'"),
    "bad-rank.json": (trace_text(header_with(rank=2)), "'rank'"),
    "bad-ts.json": (trace_text(rank0_events()[:5] + [dict(rank0_events()[5], ts="5")]),
                    "event #6: 'ts' is not a number"),
    "binary.json": ("\udcff", "not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(NOT_A_TRACE))
@pytest.mark.parametrize("command", ["summary", "merge"])
def test_refuses_what_is_not_a_chorus_trace(tmp_path, run_tool, name, command):
    text, problem = NOT_A_TRACE[name]
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    out = tmp_path / "out.json"
    args = ["summary", path] if command == "summary" else ["merge", path, "-o", out]
    assert_refused(run_tool(*args), path, problem)
    assert not out.exists()


@pytest.mark.parametrize("command", ["summary", "merge"])
def test_missing_file(tmp_path, run_tool, command):
    path = tmp_path / "absent.json"
    args = ["summary", path] if command == "summary" else ["merge", path, "-o", tmp_path / "o"]
    assert_refused(run_tool(*args), path, "No such file")


def test_directory_is_refused(tmp_path, run_tool):
    assert_refused(run_tool("summary", tmp_path), tmp_path)


# ---------------------------------------------------------------------------------------------
# Command line


@pytest.mark.parametrize("args", [
    [], ["frobnicate"], ["merge"], ["merge", "a.json"], ["summary"],
    ["summary", "a.json", "--top", "-1"], ["summary", "a.json", "--top", "x"],
    ["summary", "a.json", "--bogus"], ["summary", "a.json", "b.json"],
])
def test_usage_errors_exit_2(run_tool, args):
    p = run_tool(*args)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "usage:" in p.stderr and p.stdout == ""


def test_help(run_tool):
    top = run_tool("--help")
    assert top.returncode == 0 and "merge" in top.stdout and "summary" in top.stdout
    merge = run_tool("merge", "--help")
    assert merge.returncode == 0
    for word in ("-o OUT", "IN", "clock_offset_us", "same rank", "different sizes",
                 "merged", "no final ']'"):
        assert word in " ".join(merge.stdout.split()), word
    summary = run_tool("summary", "--help")
    assert summary.returncode == 0
    for word in ("--json", "--top N", "default 10", "p50", "p99", "nearest rank", "dropped"):
        assert word in " ".join(summary.stdout.split()), word


def test_tool_is_executable_python():
    from conftest import REPO_ROOT
    path = os.path.join(REPO_ROOT, "timeline", "tools", "chorus_timeline.py")
    assert os.access(path, os.X_OK)
    with open(path) as f:
        assert f.readline() == "#!/usr/bin/python3\n"
