"""Tests of `chorus-timeline flight` on hand-made dumps that follow docs/flight_recorder.md.

3 ranks: a rank stuck inside a collective the others finished; an op one rank did not submit; an
earlier job's dump left in the directory; dumps asked for (SIGUSR2) in a running job, where an op
that waited under a second is a step in progress and an older one the culprit. Then the refusals: not a directory, no dumps, another
format, an incomplete dump, another version, two dumps of one rank.
"""

import json

E0 = 1_700_000_000_000_000


def record(batch, state="done", name=None):
    name = name or f"grad.{batch}"
    return {"batch": batch, "cycle": batch, "op": "allreduce", "dtype": "float32", "device": -1,
            "process_set": 0, "tensors": 1, "bytes": 16, "first_tensor": name,
            "last_tensor": "", "first_shape": [4], "first_shape_cut": False, "state": state,
            "started_us": E0 + batch, "ended_us": None if state == "started" else E0 + batch + 1}


def dump(rank, records, batches, size=3, version=1, pending=(), coordinator=None, job="job-1",
         written=E0 + 1000, reason="a test"):
    d = {"format": "chorus-flight-recorder", "version": version, "reason": reason,
         "job": job, "rank": rank, "size": size, "host": f"h{rank}", "pid": 100 + rank,
         "written_us": written, "cycles": 9, "batches": batches,
         "process_sets": [{"id": 0, "ranks": list(range(size))}],
         "hosts": [f"h{r}" for r in range(size)], "records": records, "pending": list(pending)}
    if coordinator is not None:
        d["coordinator"] = coordinator
    return d


def write(directory, dumps):
    for d in dumps:
        (directory / f"rank{d['rank']}.json").write_text(json.dumps(d))


def test_a_rank_stuck_inside_a_collective(tmp_path, run_tool):
    done = [record(b) for b in range(5)]
    write(tmp_path, [dump(0, done + [record(5)], 6, coordinator=[]),
                     dump(1, done + [record(5, "started")], 6),
                     dump(2, done + [record(5)], 6)])
    result = run_tool("flight", tmp_path, "--json")
    assert result.returncode == 0, result.stderr
    a = json.loads(result.stdout)
    assert a["dumped_ranks"] == [0, 1, 2] and a["no_dump_ranks"] == []
    assert a["diverged"]["batch"] == 5
    assert a["diverged"]["done"] == [0, 2] and a["diverged"]["inside"] == [1]
    assert a["culprit"].startswith("rank 1 did not finish batch 5: allreduce of 'grad.5'")
    assert a["last_done"]["1"]["batch"] == 4 and a["last_done"]["0"]["batch"] == 5
    text = run_tool("flight", tmp_path).stdout
    assert "first divergence: batch 5: allreduce of 'grad.5' (process set 0, 16 bytes): done " \
           "on ranks 0, 2; started, not done on rank 1" in text


def test_pending_ops_name_the_rank_that_did_not_submit(tmp_path, run_tool):
    done = [record(b) for b in range(3)]
    pending = {"name": "grad.x", "op": "allreduce", "dtype": "float32", "shape": [4],
               "process_set": 0, "device": -1, "submitted_us": E0 + 50}
    write(tmp_path, [dump(0, done, 3, pending=[pending]), dump(2, done, 3, pending=[pending]),
                     dump(1, done, 3)])
    a = json.loads(run_tool("flight", tmp_path, "--json").stdout)
    u = a["unsubmitted"][0]
    assert (u["name"], u["submitted"], u["missing"], u["unknown"]) == ("grad.x", [0, 2], [1], [])
    assert a["culprit"] == "rank 1 never submitted allreduce 'grad.x' (submitted by ranks 0, 2)"


def test_asked_for_dumps_of_a_running_job(tmp_path, run_tool):
    done = [record(b) for b in range(3)]
    asked = "asked for (SIGUSR2 to a rank of this job)"

    def op(name, submitted):
        return {"name": name, "op": "allreduce", "dtype": "float32", "shape": [4],
                "process_set": 0, "device": -1, "submitted_us": submitted}

    written = E0 + 10_000_000
    # Rank 0 submitted grad.3 20 ms before the dump, the others not yet: a step in progress.
    young = op("grad.3", written - 20_000)
    write(tmp_path, [dump(r, done, 3, pending=[young] if r == 0 else [], written=written,
                          reason=asked) for r in range(3)])
    a = json.loads(run_tool("flight", tmp_path, "--json").stdout)
    assert a["asked"] is True
    assert a["unsubmitted"][0]["name"] == "grad.3"
    assert abs(a["unsubmitted"][0]["waited_s"] - 0.02) < 1e-9
    assert a["culprit"] == ("the ranks agree on every batch; the ops not submitted everywhere "
                            "waited under 1 s (a step in progress)")
    # Ranks 0 and 2 have waited 5 s for rank 1's grad.3: rank 1 is the culprit.
    old = op("grad.3", written - 5_000_000)
    write(tmp_path, [dump(r, done, 3, pending=[old] if r != 1 else [], written=written,
                          reason=asked) for r in range(3)])
    a = json.loads(run_tool("flight", tmp_path, "--json").stdout)
    assert a["culprit"] == "rank 1 never submitted allreduce 'grad.3' (submitted by ranks 0, 2)"
    assert "waited 5.00 s (from the dumps' pending ops)" in run_tool("flight", tmp_path).stdout
    # A GPU batch launched 2 ms before the dumps on every rank, its device work not done: in
    # progress. The same batch started 5 s before: rank 1 never finished it.
    launched = dict(record(3, "launched"), started_us=written - 2_000)
    write(tmp_path, [dump(r, done + [launched], 4, written=written, reason=asked)
                     for r in range(3)])
    a = json.loads(run_tool("flight", tmp_path, "--json").stdout)
    assert a["diverged"] is None
    assert a["culprit"] == "the ranks agree on every batch and every op"
    stuck = dict(launched, started_us=written - 5_000_000)
    finished = dict(stuck, state="done", ended_us=written - 4_000_000)
    write(tmp_path, [dump(r, done + [stuck if r == 1 else finished], 4, written=written,
                          reason=asked) for r in range(3)])
    a = json.loads(run_tool("flight", tmp_path, "--json").stdout)
    assert a["diverged"]["batch"] == 3 and a["diverged"]["inside"] == [1]
    # Not asked for (a stall's dumps): any op not submitted everywhere is a suspect, however young.
    write(tmp_path, [dump(r, done, 3, pending=[young] if r == 0 else [], written=written)
                     for r in range(3)])
    a = json.loads(run_tool("flight", tmp_path, "--json").stdout)
    assert a["asked"] is False
    assert a["culprit"] == "ranks 1, 2 never submitted allreduce 'grad.3' (submitted by rank 0)"


def test_an_earlier_jobs_dumps_are_left_out(tmp_path, run_tool):
    done = [record(b) for b in range(3)]
    # An earlier 4-rank job left rank3.json; this 3-rank job wrote ranks 0-2 later.
    write(tmp_path, [dump(r, done, 3) for r in range(3)]
          + [dump(3, [record(0, "started")], 1, size=4, job="job-0", written=E0)])
    result = run_tool("flight", tmp_path, "--json")
    a = json.loads(result.stdout)
    assert a["job"] == "job-1" and a["size"] == 3 and a["dumped_ranks"] == [0, 1, 2]
    assert a["ignored"] == [str(tmp_path / "rank3.json")]
    assert a["culprit"] == "the ranks agree on every batch and every op"
    assert "ignored, from an earlier or another job" in run_tool("flight", tmp_path).stdout


def test_refusals(tmp_path, run_tool):
    result = run_tool("flight", tmp_path / "absent")
    assert result.returncode == 1 and "not a directory" in result.stderr
    result = run_tool("flight", tmp_path)
    assert result.returncode == 1 and "no flight recorder dumps" in result.stderr
    (tmp_path / "rank0.json").write_text("{\"format\": \"something else\"}")
    result = run_tool("flight", tmp_path)
    assert result.returncode == 1 and "not a chorus flight recorder dump" in result.stderr
    (tmp_path / "rank0.json").write_text(json.dumps({"format": "chorus-flight-recorder",
                                                     "version": 1, "rank": 0}))
    result = run_tool("flight", tmp_path)
    assert result.returncode == 1 and "not a complete dump (no reason, job" in result.stderr
    write(tmp_path, [dump(0, [], 0, version=2)])
    result = run_tool("flight", tmp_path)
    assert result.returncode == 1 and "format version 2" in result.stderr
    write(tmp_path, [dump(0, [], 0)])
    (tmp_path / "rank00.json").write_text(json.dumps(dump(0, [], 0)))
    result = run_tool("flight", tmp_path)
    assert result.returncode == 1 and "a second dump of rank 0" in result.stderr
