#!/usr/bin/python3
"""chorus-timeline: merge and summarise chorus timeline traces (docs/timeline.md, format version 1).

    chorus-timeline merge rank0.json rank1.json ... -o all.json
    chorus-timeline summary trace.json [--json] [--top N]
    chorus-timeline flight DIR [--json]      (flight recorder dumps: chorus_flight.py)

Input. A trace is a JSON array of Trace Event Format events holding a `chorus_trace` metadata
event (`"ph": "M"`, args format "chorus-timeline", version 1). A file cut off by a crash (no
closing `]`, maybe a trailing comma, maybe a half-written last line) is read line by line: the
last line is dropped if it does not parse, and a note on stderr says how many lines were dropped.
Events may start with or end with the separating comma. Anything else is refused.

merge. Writes one trace with one process row per rank (pid = rank, process_name
"rank R (hostname)", process_sort_index R). Every timed event's ts is moved onto rank 0's clock,
epoch_unix_us + ts - clock_offset_us, then the whole trace is shifted so that its earliest
non-metadata event is at ts 0; dur is kept. Metadata events are kept as they are (pid aside), the
inputs' `chorus_trace` events included; the output starts with its own `chorus_trace` event,
args {"format": "chorus-timeline", "version": 1, "merged_ranks": [...], "size": n}. Refused:
two inputs with the same rank, inputs with different sizes, a merged trace as an input, an
output path that is one of the inputs.

summary. Durations are in µs. p50 and p99 use the nearest-rank method (the smallest duration
with at least p% of the spans at or below it). An op span is an X event named after an op
(ALLREDUCE, ALLGATHER, BROADCAST, ALLTOALL, REDUCESCATTER, BARRIER, JOIN, ADD_PROCESS_SET,
REMOVE_PROCESS_SET). "Last ready": for every NEGOTIATE_* span whose row (pid, tid) holds ready
marks of at least 2 distinct ranks inside [ts, ts + dur] (ends included; a rank's first mark in
the interval counts), the rank whose mark is latest; a span whose latest mark is shared by
several ranks counts as a tie and credits nobody.

`summary --json` prints one object:
  file            the input path
  merged          true for a trace written by `merge`
  size            the world size recorded
  ranks           [{rank, hostname, closed, events, dropped_events, truncated}] per rank:
                  closed = a chorus_trace_end event is present; events = its args.events (null
                  when not closed); dropped_events = the larger of chorus_trace_end's count and
                  the last DROPPED_EVENTS mark; truncated = chorus_trace_end says so or a
                  TRACE_TRUNCATED mark is present
  dropped_events  sum over ranks
  truncated       true if any rank is truncated
  input           {complete: file ended with `]`, lines_dropped: lines dropped from a cut file}
  phases          [{name, count, total_us, mean_us, p50_us, p99_us, bytes, batch_size_mean,
                  batch_size_max, batches, count_by_rank}] per X event name, sorted by total_us
                  descending then name. bytes = sum of args.bytes, batch_size_mean/max over
                  args.batch_size, batches = distinct (pid, batch_id): op spans only, null for
                  other phases. count_by_rank = {"<pid>": count}.
  slowest         [{rank, tensor, op, ts_us, dur_us, bytes}] the --top slowest op spans, longest
                  first (ties: lower rank, then earlier ts); tensor from thread_name metadata
  negotiation     {spans, cached, with_marks, ties, last_ready, by_recorder}: NEGOTIATE_* spans,
                  those with args.cached true, those with marks of >= 2 ranks, ties,
                  last_ready = {"<rank>": spans it was last ready for}, by_recorder =
                  {"<pid>": {spans, cached, with_marks, ties, last_ready}} per recording rank
Times are rounded to 3 decimals (ns).

Exit codes: 0 success; 1 a file is missing, unreadable, not a chorus trace, or refused by merge
(one line on stderr naming the file); 2 usage error.
"""

import argparse
import bisect
import json
import math
import os
import sys

PROG = "chorus-timeline"
FORMAT = "chorus-timeline"
VERSION = 1
OPS = frozenset({
    "ALLREDUCE", "ALLGATHER", "BROADCAST", "ALLTOALL", "REDUCESCATTER", "BARRIER", "JOIN",
    "ADD_PROCESS_SET", "REMOVE_PROCESS_SET"
})
NEGOTIATE_PREFIX = "NEGOTIATE_"
# Times carry nanosecond decimals: marks closer than half a nanosecond to a span end are at it.
EPS_US = 0.0005


class TraceError(Exception):
    """A problem with one input; str() is the one-line message (without the file name)."""


class Trace:
    """One input file, read and checked.

    events: the list of event dicts, in file order.
    header: args of the first chorus_trace metadata event.
    merged: the header comes from `merge`.
    complete: the file was a whole JSON array; lines_dropped: lines dropped from a cut file.
    """

    def __init__(self, path, events, header, complete, lines_dropped):
        self.path = path
        self.events = events
        self.header = header
        self.merged = "merged_ranks" in header
        self.complete = complete
        self.lines_dropped = lines_dropped


# ---------------------------------------------------------------------------------------------
# Reading


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def read_trace(path):
    """Returns the Trace in `path`. Raises TraceError for any problem; notes recovery on stderr."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TraceError(e.strerror or str(e)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TraceError("not JSON (not UTF-8 text)") from None
    events, complete, dropped = parse_events(text)
    check_events(events)
    header = check_header(events)
    if not complete:
        print(f"{PROG}: {path}: trace not closed (no final ']'), read {len(events)} events, "
              f"dropped {dropped} incomplete last line{'' if dropped == 1 else 's'}",
              file=sys.stderr)
    return Trace(path, events, header, complete, dropped)


def parse_events(text):
    """Returns (events, complete, lines_dropped) for a whole or cut-off JSON array."""
    try:
        value = json.loads(text)
    except ValueError:
        return parse_cut_array(text)
    if not isinstance(value, list):
        raise TraceError(f"JSON but not an array of events (top level is {json_kind(value)})")
    return value, True, 0


def parse_cut_array(text):
    """Reads an array cut off after any line: one event per line, comma before or after."""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1)]
    lines = [(n, line) for n, line in lines if line.strip(",").strip()]
    if not lines or not lines[0][1].startswith("["):
        raise TraceError("not JSON")
    lines[0] = (lines[0][0], lines[0][1][1:])
    events = []
    for i, (n, line) in enumerate(lines):
        last = i == len(lines) - 1
        item = line.strip().strip(",").strip()
        if not item:
            continue
        if item == "]" and last:
            return events, True, 0  # a closed array with a trailing comma before `]`
        try:
            events.append(json.loads(item))
        except ValueError:
            if last:
                return events, False, 1
            raise TraceError(f"not JSON (line {n} does not parse)") from None
    return events, False, 0


def json_kind(value):
    return {dict: "an object", list: "an array", str: "a string"}.get(type(value), "a scalar")


def check_events(events):
    """Checks the fields this tool reads, so that a malformed event gives a one-line message."""
    for i, ev in enumerate(events, start=1):
        if not isinstance(ev, dict):
            raise TraceError(f"JSON but not an array of objects (event #{i} is {json_kind(ev)})")
        problem = event_problem(ev)
        if problem:
            raise TraceError(f"event #{i}: {problem}")


def event_problem(ev):
    if not isinstance(ev.get("ph"), str):
        return "no 'ph' string"
    for key, ok, what in (("name", lambda v: isinstance(v, str), "a string"),
                          ("pid", is_int, "an integer"), ("tid", is_int, "an integer"),
                          ("ts", is_number, "a number"), ("dur", is_number, "a number"),
                          ("args", lambda v: isinstance(v, dict), "an object")):
        if key in ev and not ok(ev[key]):
            return f"'{key}' is not {what}"
    if ev["ph"] in ("X", "i") and "ts" not in ev:
        return f"'{ev['ph']}' event without 'ts'"
    if ev["ph"] == "X" and "dur" not in ev:
        return "'X' event without 'dur'"
    return None


def is_meta(ev, name):
    return ev.get("ph") == "M" and ev.get("name") == name


def args_of(ev):
    return ev.get("args", {})


def check_header(events):
    """Returns the args of the first chorus_trace metadata event, checked."""
    header = next((args_of(ev) for ev in events if is_meta(ev, "chorus_trace")), None)
    if header is None:
        raise TraceError("not a chorus trace (no chorus_trace metadata event)")
    if header.get("format") != FORMAT:
        raise TraceError(f"not a chorus trace (chorus_trace format is {header.get('format')!r})")
    if not is_int(header.get("version")) or header["version"] != VERSION:
        raise TraceError(f"unsupported chorus trace version {header.get('version')!r} "
                         f"(this tool reads version {VERSION})")
    if not is_int(header.get("size")) or header["size"] < 1:
        raise TraceError("chorus_trace metadata: 'size' is not a positive integer")
    if "merged_ranks" in header:
        ranks = header["merged_ranks"]
        if not isinstance(ranks, list) or not all(is_int(r) for r in ranks):
            raise TraceError("chorus_trace metadata: 'merged_ranks' is not a list of integers")
        return header
    if not is_int(header.get("rank")) or not 0 <= header["rank"] < header["size"]:
        raise TraceError("chorus_trace metadata: 'rank' is not an integer in [0, size)")
    for key in ("epoch_unix_us", "clock_offset_us"):
        if not is_number(header.get(key)):
            raise TraceError(f"chorus_trace metadata: '{key}' is not a number")
    if not isinstance(header.get("hostname"), str):
        raise TraceError("chorus_trace metadata: 'hostname' is not a string")
    return header


# ---------------------------------------------------------------------------------------------
# merge


def check_mergeable(traces):
    """Raises TraceError (with the offending path) unless `traces` can be merged."""
    by_rank = {}
    first = traces[0]
    for t in traces:
        if t.merged:
            ranks = ", ".join(str(r) for r in t.header["merged_ranks"])
            raise TraceError(f"{t.path}: already a merged trace (ranks {ranks}); "
                             "merge the per-rank files instead")
        if t.header["size"] != first.header["size"]:
            raise TraceError(f"{t.path}: size {t.header['size']} differs from size "
                             f"{first.header['size']} in {first.path}")
        rank = t.header["rank"]
        if rank in by_rank:
            raise TraceError(f"{t.path}: rank {rank} is also in {by_rank[rank].path}")
        by_rank[rank] = t


def clock_deltas(traces):
    """Returns {rank: delta} with rank 0's clock = delta + ts + a constant common to all ranks.

    Differences are taken before sums so that ~1e15 µs epochs keep the ts nanosecond decimals.
    """
    ref = traces[0].header
    return {
        t.header["rank"]: (t.header["epoch_unix_us"] - ref["epoch_unix_us"]) -
                          (t.header["clock_offset_us"] - ref["clock_offset_us"])
        for t in traces
    }


def merge_origin(traces, deltas):
    """The earliest non-metadata event on the common clock (the ts = 0 points if none)."""
    times = [ev["ts"] + deltas[t.header["rank"]] for t in traces for ev in t.events
             if ev["ph"] != "M" and "ts" in ev]
    return min(times) if times else min(deltas.values())


def merged_rank_events(trace, delta, origin):
    """Trace's events on the merged clock, pid = rank, with its process name and sort index."""
    rank, host = trace.header["rank"], trace.header["hostname"]
    names = {
        "process_name": {"name": f"rank {rank} ({host})"},
        "process_sort_index": {"sort_index": rank}
    }
    out, seen = [], set()
    for ev in trace.events:
        ev = dict(ev)
        ev["pid"] = rank
        if ev["ph"] == "M" and ev.get("name") in names:
            seen.add(ev["name"])
            ev["args"] = names[ev["name"]]
        elif ev["ph"] != "M" and "ts" in ev:
            ev["ts"] = round(ev["ts"] + delta - origin, 3)
        out.append(ev)
    missing = [{"name": n, "ph": "M", "pid": rank, "tid": 0, "args": a}
               for n, a in names.items() if n not in seen]
    return missing + out


def merge_traces(traces):
    """Returns the merged event list. REQUIRES: check_mergeable(traces) passed."""
    traces = sorted(traces, key=lambda t: t.header["rank"])
    deltas = clock_deltas(traces)
    origin = merge_origin(traces, deltas)
    ranks = [t.header["rank"] for t in traces]
    events = [{
        "name": "chorus_trace", "ph": "M", "pid": ranks[0], "tid": 0,
        "args": {"format": FORMAT, "version": VERSION, "merged_ranks": ranks,
                 "size": traces[0].header["size"]}
    }]
    for t in traces:
        events += merged_rank_events(t, deltas[t.header["rank"]], origin)
    return events


def write_trace(path, events):
    """Writes `events` as a JSON array, one event per line. Raises OSError."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(ev) for ev in events))
        f.write("\n]\n")


def run_merge(args):
    traces = [load(path) for path in args.inputs]
    check_mergeable(traces)
    out = os.path.realpath(args.output)
    for t in traces:
        if os.path.realpath(t.path) == out:
            raise TraceError(f"{args.output}: the output would overwrite an input")
    events = merge_traces(traces)
    try:
        write_trace(args.output, events)
    except OSError as e:
        raise TraceError(f"{args.output}: {e.strerror or e}") from None
    size = traces[0].header["size"]
    missing = sorted(set(range(size)) - {t.header["rank"] for t in traces})
    if missing:
        print(f"{PROG}: note: no input for rank{'s' if len(missing) > 1 else ''} "
              f"{', '.join(map(str, missing))} of size {size}", file=sys.stderr)
    return 0


def load(path):
    try:
        return read_trace(path)
    except TraceError as e:
        raise TraceError(f"{path}: {e}") from None


# ---------------------------------------------------------------------------------------------
# summary


def us(x):
    """A time for the output: float µs, rounded to ns."""
    return round(float(x), 3)


def percentile(sorted_values, p):
    """Nearest-rank percentile of a non-empty sorted list."""
    return sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)]


def rank_headers(trace):
    """{rank: chorus_trace args} of the ranks recorded in `trace`."""
    if not trace.merged:
        return {trace.header["rank"]: trace.header}
    found = {ev.get("pid"): args_of(ev) for ev in trace.events
             if is_meta(ev, "chorus_trace") and "merged_ranks" not in args_of(ev)}
    return {r: found.get(r, {}) for r in trace.header["merged_ranks"]}


def rank_status(trace):
    """The `ranks` list of the summary."""
    rows = []
    for rank, header in sorted(rank_headers(trace).items()):
        mine = [ev for ev in trace.events if not trace.merged or ev.get("pid") == rank]
        end = next((args_of(ev) for ev in mine if is_meta(ev, "chorus_trace_end")), None)
        marks = [args_of(ev).get("dropped_events") for ev in mine
                 if ev["ph"] == "i" and ev.get("name") == "DROPPED_EVENTS"]
        counts = [d for d in marks + [end and end.get("dropped_events")] if is_int(d)]
        cut = any(ev["ph"] == "i" and ev.get("name") == "TRACE_TRUNCATED" for ev in mine)
        rows.append({
            "rank": rank,
            "hostname": header.get("hostname"),
            "closed": end is not None,
            "events": end.get("events") if end else None,
            "dropped_events": max(counts, default=0),
            "truncated": bool(cut or (end and end.get("truncated") is True)),
        })
    return rows


def spans(events):
    return [ev for ev in events if ev["ph"] == "X"]


def phase_row(name, group):
    durs = sorted(ev["dur"] for ev in group)
    row = {
        "name": name,
        "count": len(durs),
        "total_us": us(sum(durs)),
        "mean_us": us(sum(durs) / len(durs)),
        "p50_us": us(percentile(durs, 50)),
        "p99_us": us(percentile(durs, 99)),
        "bytes": None, "batch_size_mean": None, "batch_size_max": None, "batches": None,
    }
    if name in OPS:
        sizes = [s for s in (args_of(ev).get("batch_size") for ev in group) if is_number(s)]
        row["bytes"] = sum(b for b in (args_of(ev).get("bytes") for ev in group) if is_number(b))
        row["batch_size_mean"] = round(sum(sizes) / len(sizes), 3) if sizes else None
        row["batch_size_max"] = max(sizes, default=None)
        row["batches"] = len({(ev.get("pid"), args_of(ev)["batch_id"]) for ev in group
                              if isinstance(args_of(ev).get("batch_id"), (int, str))})
    by_rank = {}
    for ev in group:
        key = str(ev.get("pid"))
        by_rank[key] = by_rank.get(key, 0) + 1
    row["count_by_rank"] = dict(sorted(by_rank.items(), key=lambda kv: rank_key(kv[0])))
    return row


def rank_key(s):
    return (0, int(s)) if s.lstrip("-").isdigit() else (1, s)


def phase_rows(events):
    groups = {}
    for ev in spans(events):
        groups.setdefault(ev.get("name", ""), []).append(ev)
    rows = [phase_row(name, group) for name, group in groups.items()]
    return sorted(rows, key=lambda r: (-r["total_us"], r["name"]))


def thread_names(events):
    return {(ev.get("pid"), ev.get("tid")): args_of(ev).get("name") for ev in events
            if is_meta(ev, "thread_name")}


def slowest_ops(events, top):
    names = thread_names(events)
    ops = [ev for ev in spans(events) if ev.get("name") in OPS]
    ops.sort(key=lambda ev: (-ev["dur"], ev.get("pid", 0), ev["ts"]))
    return [{
        "rank": ev.get("pid"),
        "tensor": names.get((ev.get("pid"), ev.get("tid")), f"tid {ev.get('tid')}"),
        "op": ev["name"],
        "ts_us": us(ev["ts"]),
        "dur_us": us(ev["dur"]),
        "bytes": args_of(ev).get("bytes"),
    } for ev in ops[:top]]


def ready_marks(events):
    """{(pid, tid): sorted [(ts, rank)]} of the ready marks on tensor rows."""
    rows = {}
    for ev in events:
        rank = args_of(ev).get("rank")
        if ev["ph"] == "i" and ev.get("tid", 0) != 0 and is_int(rank):
            rows.setdefault((ev.get("pid"), ev.get("tid")), []).append((ev["ts"], rank))
    for marks in rows.values():
        marks.sort()
    return rows


def last_ready_rank(span, marks):
    """(counted, rank): counted if >= 2 ranks marked inside the span; rank None on a tie."""
    lo = bisect.bisect_left(marks, (span["ts"] - EPS_US, -math.inf))
    hi = bisect.bisect_right(marks, (span["ts"] + span["dur"] + EPS_US, math.inf))
    first = {}
    for ts, rank in marks[lo:hi]:
        first.setdefault(rank, ts)
    if len(first) < 2:
        return False, None
    latest = max(first.values())
    at_latest = [r for r, ts in first.items() if ts >= latest - EPS_US]
    return True, (at_latest[0] if len(at_latest) == 1 else None)


def new_negotiation_tally():
    return {"spans": 0, "cached": 0, "with_marks": 0, "ties": 0, "last_ready": {}}


def tally_span(tally, span, counted, rank):
    tally["spans"] += 1
    tally["cached"] += args_of(span).get("cached") is True
    if not counted:
        return
    tally["with_marks"] += 1
    if rank is None:
        tally["ties"] += 1
    else:
        tally["last_ready"][str(rank)] = tally["last_ready"].get(str(rank), 0) + 1


def sort_tally(tally):
    tally["last_ready"] = dict(sorted(tally["last_ready"].items(), key=lambda kv: int(kv[0])))
    return tally


def negotiation(events):
    marks = ready_marks(events)
    total, by_pid = new_negotiation_tally(), {}
    for span in spans(events):
        if not span.get("name", "").startswith(NEGOTIATE_PREFIX):
            continue
        counted, rank = last_ready_rank(span, marks.get((span.get("pid"), span.get("tid")), []))
        tally_span(total, span, counted, rank)
        tally_span(by_pid.setdefault(str(span.get("pid")), new_negotiation_tally()), span,
                   counted, rank)
    total["by_recorder"] = {
        pid: sort_tally(t) for pid, t in sorted(by_pid.items(), key=lambda kv: rank_key(kv[0]))
    }
    return sort_tally(total)


def summarize(trace, top):
    ranks = rank_status(trace)
    return {
        "file": trace.path,
        "merged": trace.merged,
        "size": trace.header["size"],
        "ranks": ranks,
        "dropped_events": sum(r["dropped_events"] for r in ranks),
        "truncated": any(r["truncated"] for r in ranks),
        "input": {"complete": trace.complete, "lines_dropped": trace.lines_dropped},
        "phases": phase_rows(trace.events),
        "slowest": slowest_ops(trace.events, top),
        "negotiation": negotiation(trace.events),
    }


# ---------------------------------------------------------------------------------------------
# Text output


def cell(value):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def format_table(headers, rows, left=(0,)):
    """Aligned lines: the columns numbered in `left` left-aligned, the others right-aligned."""
    table = [list(headers)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[c]) for r in table) for c in range(len(headers))]
    return [
        "  ".join(v.ljust(w) if c in left else v.rjust(w)
                  for c, (v, w) in enumerate(zip(r, widths))).rstrip() for r in table
    ]


def text_report(s):
    """The default output of `summary`, as a list of lines."""
    ranks = ", ".join(str(r["rank"]) for r in s["ranks"])
    lines = [f"trace {s['file']}: ranks {ranks} of size {s['size']}"
             f"{' (merged)' if s['merged'] else ''}",
             f"dropped_events {s['dropped_events']}, truncated {cell(s['truncated'])}"]
    if not s["input"]["complete"]:
        lines.append(f"file not closed: {s['input']['lines_dropped']} incomplete line(s) dropped")
    lines += [""] + format_table(
        ["rank", "hostname", "closed", "events", "dropped_events", "truncated"],
        [[r["rank"], r["hostname"], r["closed"], r["events"], r["dropped_events"],
          r["truncated"]] for r in s["ranks"]], left=(0, 1, 2, 5))
    lines += ["", "phases (us)"] + format_table(
        ["phase", "count", "total", "mean", "p50", "p99", "bytes", "batch_mean", "batch_max",
         "batches"],
        [[p["name"], p["count"], p["total_us"], p["mean_us"], p["p50_us"], p["p99_us"],
          p["bytes"], p["batch_size_mean"], p["batch_size_max"], p["batches"]]
         for p in s["phases"]])
    lines += ["", f"slowest op spans ({len(s['slowest'])})"] + format_table(
        ["rank", "tensor", "op", "dur_us", "bytes", "ts_us"],
        [[o["rank"], o["tensor"], o["op"], o["dur_us"], o["bytes"], o["ts_us"]]
         for o in s["slowest"]], left=(0, 1, 2))
    n = s["negotiation"]
    lines += ["", f"negotiation: {n['spans']} NEGOTIATE spans ({n['cached']} cached), "
              f"{n['with_marks']} with ready marks of >= 2 ranks, ties {n['ties']}",
              "last ready"] + format_table(
        ["recorded_by", "last_ready_rank", "spans"],
        [[pid, rank, count] for pid, t in n["by_recorder"].items()
         for rank, count in t["last_ready"].items()], left=())
    return lines


def run_summary(args):
    s = summarize(load(args.input), args.top)
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        print("\n".join(text_report(s)))
    return 0


# ---------------------------------------------------------------------------------------------
# Command line


def non_negative(text):
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {n}")
    return n


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG, description="Merge and summarise chorus timeline traces (format version 1, "
        "docs/timeline.md). Exit codes: 0 ok, 1 bad or refused input, 2 usage error.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{merge,summary,flight}")
    merge = sub.add_parser(
        "merge", help="merge per-rank traces into one trace",
        description="Merge per-rank chorus traces into one trace with one process row per rank "
        "(pid = rank, named 'rank R (hostname)'). Each rank's ts is moved onto rank 0's clock "
        "(epoch_unix_us + ts - clock_offset_us), then all are shifted so the earliest event is "
        "at 0. Every input event is kept. Refuses: two inputs with the same rank, inputs of "
        "different sizes, an already merged trace, a file that is not a chorus trace. A trace "
        "cut off by a crash (no final ']') is accepted; its incomplete last line is dropped.")
    merge.add_argument("inputs", nargs="+", metavar="IN", help="per-rank trace files")
    merge.add_argument("-o", "--output", required=True, metavar="OUT",
                       help="merged trace to write (must not be an input)")
    merge.set_defaults(run=run_merge)
    summary = sub.add_parser(
        "summary", help="print per-phase statistics, slowest ops, last-ready ranks",
        description="Summarise a per-rank or merged chorus trace: per phase (X event name) the "
        "count, total, mean, p50 and p99 duration in us (nearest rank), and for op spans the "
        "bytes, fusion batch sizes (mean, max) and distinct batches; the slowest op spans; for "
        "negotiation, per recording rank, the rank whose ready mark came last; dropped events "
        "and truncation. A trace cut off by a crash (no final ']') is accepted; its incomplete "
        "last line is dropped.")
    summary.add_argument("input", metavar="IN", help="trace file (per-rank or merged)")
    summary.add_argument("--json", action="store_true",
                         help="print one JSON object (keys listed in the module docstring of "
                         "chorus_timeline.py) instead of text tables")
    summary.add_argument("--top", type=non_negative, default=10, metavar="N",
                         help="how many slowest op spans to list (default 10)")
    summary.set_defaults(run=run_summary)
    flight = sub.add_parser(
        "flight", help="name the rank and tensor where a job's ranks part, from flight recorder "
        "dumps", description="Read the flight recorder dumps (rank<N>.json) chorus wrote into "
        "DIR (CHORUS_FLIGHT_RECORDER_DIR; by default chorus-flight under $TMPDIR or /tmp, on "
        "each host) and print: the rank(s) and tensor to look at first; the ops some ranks "
        "submitted and others did not; the first collective the ranks did not all complete, "
        "with who finished it, who is inside it and who never started it; failed collectives; "
        "and each rank's last completed collective (docs/flight_recorder.md).")
    flight.add_argument("directory", metavar="DIR", help="directory of rank<N>.json dumps")
    flight.add_argument("--json", action="store_true",
                        help="print the analysis as one JSON object (keys: the docstring of "
                        "chorus_flight.py)")
    flight.set_defaults(run=run_flight)
    return parser


def run_flight(args):
    # chorus_flight.py is installed beside this script (build/bin, <prefix>/bin, the package).
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
    import chorus_flight  # pylint: disable=import-outside-toplevel
    try:
        return chorus_flight.run(args)
    except chorus_flight.FlightError as e:
        raise TraceError(str(e)) from None


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except TraceError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader of stdout stopped early (`| head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
