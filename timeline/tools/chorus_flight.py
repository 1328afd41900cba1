"""`chorus-timeline flight DIR`: where the ranks of a job part, from their flight recorder dumps.

A dump is one JSON file per rank (rank<N>.json, format "chorus-flight-recorder" version 1;
docs/flight_recorder.md), written by chorus when the stall inspector reports, when the
no-progress bound gives up, when the background loop stops on a failure, when a batch fails, and
when asked (SIGUSR2 to a rank or to chorusrun).
Each holds the rank's last batches (one collective each, numbered in the job's global order, so
batch b is the same collective on every rank), the ops it submitted that were not negotiated yet,
and on rank 0 the coordinator's view of those (which ranks submitted each).

The analysis (analyze()):
  job, size  the job analysed: the one that wrote the newest dump (dumps of other jobs or world
             sizes in the directory are listed under `ignored`)
  dumped_ranks, no_dump_ranks  which ranks left a dump and which did not (a rank stopped,
             killed before it could write, or whose dump is on another host's disk)
  reasons    per rank, why it wrote its dump
  last_done  per rank, the last batch it completed
  in_flight  per rank, batches started (or launched on a GPU) and not done: where it is stuck
  failed     batches that failed, with the error every rank delivered
  diverged   the first batch the members of its process set do not all have done, with the
             ranks that did it, that are inside it, and that never started it
  unsubmitted  ops some ranks submitted and others did not: by rank 0's coordinator where its
             dump has it, else by the dumps' pending ops (missing: ranks whose dump lacks it;
             unknown: ranks without a dump; waited_s: how long the first rank had waited for
             the others when it dumped)
  asked      every dump was asked for (SIGUSR2), not written for a stall or a failure: the job
             may be healthy, and an op that waited under YOUNG_S, or a batch started under
             YOUNG_S before the dump, is in progress, not a culprit
  culprit    one line: the rank(s) and tensor to look at first
"""

import glob
import json
import os

FORMAT = "chorus-flight-recorder"
VERSION = 1
REQUIRED = ("reason", "job", "rank", "size", "written_us", "batches", "process_sets", "records",
            "pending")


# In dumps that were all asked for, an op not yet submitted everywhere that waited less than this
# is taken for a step in progress (ranks reach an op microseconds to milliseconds apart).
YOUNG_S = 1.0
ASKED_PREFIX = "asked for"


class FlightError(Exception):
    """A directory or dump that cannot be analysed (the message names it)."""


def load(directory):
    """{rank: dump} of the rank<N>.json files in `directory`."""
    if not os.path.isdir(directory):
        raise FlightError(f"{directory}: not a directory")
    dumps = {}
    for path in sorted(glob.glob(os.path.join(directory, "rank*.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                dump = json.load(f)
        except (OSError, ValueError) as e:
            raise FlightError(f"{path}: not a readable JSON file ({e})") from None
        if not isinstance(dump, dict) or dump.get("format") != FORMAT:
            raise FlightError(f"{path}: not a chorus flight recorder dump")
        if dump.get("version") != VERSION:
            raise FlightError(f"{path}: format version {dump.get('version')!r}; this tool reads "
                              f"version {VERSION}")
        lacking = [k for k in REQUIRED if k not in dump]
        if lacking:
            raise FlightError(f"{path}: not a complete dump (no {', '.join(lacking)})")
        rank = dump["rank"]
        if rank in dumps:
            raise FlightError(f"{path}: a second dump of rank {rank}")
        dump["_path"] = path
        dumps[rank] = dump
    if not dumps:
        raise FlightError(f"{directory}: no flight recorder dumps (rank<N>.json)")
    return dumps


def newest_job(dumps):
    """The dumps of the job that wrote last (same job id and world size as the newest dump),
    and the paths of the others (an earlier or other job's, left in the same directory)."""
    newest = max(dumps.values(), key=lambda d: d["written_us"] or 0)
    keep = {r: d for r, d in dumps.items()
            if d["job"] == newest["job"] and d["size"] == newest["size"]}
    return keep, sorted(d["_path"] for r, d in dumps.items() if r not in keep)


def _describe(record):
    n = record["tensors"]
    names = f"'{record['first_tensor']}'"
    if n > 1:
        names = f"{n} tensors '{record['first_tensor']}' .. '{record['last_tensor']}'"
    size = f", {record['bytes']} bytes" if record["bytes"] else ""
    return f"batch {record['batch']}: {record['op']} of {names} (process set " \
           f"{record['process_set']}{size})"


def _ranks(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def analyze(dumps):
    any_dump = next(iter(dumps.values()))
    size = any_dump["size"]
    sets = {}
    for d in dumps.values():
        for s in d["process_sets"]:
            sets.setdefault(s["id"], s["ranks"])
    missing = [r for r in range(size) if r not in dumps]
    out = {"size": size, "job": any_dump["job"], "dumped_ranks": sorted(dumps), "no_dump_ranks": missing,
           "reasons": {r: d["reason"] for r, d in sorted(dumps.items())},
           "last_done": {}, "in_flight": {}, "failed": [], "diverged": None,
           "unsubmitted": [], "culprit": "",
           "asked": all(d["reason"].startswith(ASKED_PREFIX) for d in dumps.values())}

    records = {}  # batch -> {rank: record}
    for rank, dump in dumps.items():
        done = [r for r in dump["records"] if r["state"] == "done"]
        out["last_done"][rank] = done[-1] if done else None
        out["in_flight"][rank] = [r for r in dump["records"]
                                  if r["state"] in ("started", "launched")]
        for r in dump["records"]:
            records.setdefault(r["batch"], {})[rank] = r

    for batch in sorted(records):
        by_rank = records[batch]
        failed = {rank: r for rank, r in by_rank.items() if r["state"] == "failed"}
        if failed:
            first = next(iter(failed.values()))
            out["failed"].append({"batch": batch, "ranks": sorted(failed),
                                  "what": _describe(first), "error": first.get("error", "")})

    # The first batch not done by every member that left a dump and remembers that far back.
    oldest = {rank: min((r["batch"] for r in d["records"]), default=None)
              for rank, d in dumps.items()}
    next_batch = {rank: d["batches"] for rank, d in dumps.items()}
    for batch in sorted(records):
        by_rank = records[batch]
        sample = next(iter(by_rank.values()))
        # A set no dump knows any more (removed since): its members are those that recorded it.
        members = [m for m in sets.get(sample["process_set"], sorted(by_rank)) if m in dumps]
        covering = [m for m in members if oldest[m] is not None and oldest[m] <= batch]
        done = [m for m in covering if m in by_rank and by_rank[m]["state"] == "done"]
        inside = [m for m in covering
                  if m in by_rank and by_rank[m]["state"] in ("started", "launched")]
        never = [m for m in members if m not in by_rank and next_batch[m] <= batch]
        if out["asked"] and inside and not never and all(
                (dumps[m]["written_us"] - by_rank[m]["started_us"]) / 1e6 < YOUNG_S
                for m in inside):
            continue  # a running job's batch in progress (a GPU batch's device work, say)
        if inside or never or (done and len(done) < len(covering)):
            out["diverged"] = {"batch": batch, "what": _describe(sample), "done": done,
                               "inside": inside, "not_started": never}
            break

    # Ops not submitted everywhere.
    coordinator = dumps.get(0, {}).get("coordinator")
    if coordinator is not None:
        for op in coordinator:
            if op["missing_ranks"]:
                out["unsubmitted"].append({"name": op["name"], "op": op["op"],
                                           "process_set": op["process_set"],
                                           "submitted": op["submitted_ranks"],
                                           "missing": op["missing_ranks"], "unknown": [],
                                           "waited_s": op["waited_s"],
                                           "source": "rank 0's coordinator"})
    seen = {u["name"] for u in out["unsubmitted"]}
    pending = {}  # name -> (first submission time, op, set, ranks holding it, longest wait)
    for rank, dump in dumps.items():
        for op in dump["pending"]:
            t = op.get("submitted_us") or 0
            entry = pending.setdefault(op["name"], [t, op["op"], op["process_set"], set(), 0.0])
            entry[0] = min(entry[0], t)
            entry[3].add(rank)
            if t:
                entry[4] = max(entry[4], (dump["written_us"] - t) / 1e6)
    for name, (t, op, set_id, holders, waited) in sorted(pending.items(), key=lambda kv: kv[1][0]):
        if name in seen:
            continue
        members = sets.get(set_id, sorted(holders))
        absent = [m for m in members if m not in holders and m in dumps]
        unknown = [m for m in members if m not in dumps]
        if absent or unknown:
            out["unsubmitted"].append({"name": name, "op": op, "process_set": set_id,
                                       "submitted": sorted(holders), "missing": absent,
                                       "unknown": unknown, "waited_s": waited,
                                       "source": "the dumps' pending ops"})

    # The op the fewest ranks lack first (a rank that skipped one op makes the others wait for
    # it, and the next op it submitted waits for all the others), then in arrival order.
    out["unsubmitted"].sort(key=lambda u: len(u["missing"]) + len(u["unknown"]))
    suspects = [u for u in out["unsubmitted"] if not out["asked"] or u["waited_s"] >= YOUNG_S]
    if suspects:
        u = suspects[0]
        what = f"{u['op']} '{u['name']}' (submitted by {_ranks(u['submitted'])})"
        if u["missing"]:
            out["culprit"] = f"{_ranks(u['missing'])} never submitted {what}"
        else:
            out["culprit"] = (f"{_ranks(u['unknown'])}, which left no dump (stopped, killed, or on another "
                              f"host), "
                              f"{'is' if len(u['unknown']) == 1 else 'are'} the only rank"
                              f"{'' if len(u['unknown']) == 1 else 's'} not known to have "
                              f"submitted {what}")
    elif out["failed"]:
        f = out["failed"][0]
        out["culprit"] = f"{f['what']} failed: {f['error']}"
    elif out["diverged"]:
        d = out["diverged"]
        stuck = d["inside"] or d["not_started"]
        out["culprit"] = f"{_ranks(stuck)} did not finish {d['what']}"
    elif missing:
        out["culprit"] = f"{_ranks(missing)} left no dump; the others agree on every batch"
    else:
        out["culprit"] = "the ranks agree on every batch and every op"
        if out["unsubmitted"]:
            out["culprit"] = ("the ranks agree on every batch; the ops not submitted everywhere "
                              f"waited under {YOUNG_S:g} s (a step in progress)")
    if missing and suspects and suspects[0]["missing"]:
        out["culprit"] += f"; {_ranks(missing)} left no dump (stopped, killed, or on another host)"
    return out


def format_text(a):
    lines = [f"flight recorder dumps of {a['size']} ranks: from {_ranks(a['dumped_ranks'])}"
             + (f"; none from {_ranks(a['no_dump_ranks'])}" if a["no_dump_ranks"] else "")]
    if a.get("ignored"):
        lines.append(f"ignored, from an earlier or another job: {', '.join(a['ignored'])}")
    lines.append("")
    lines.append(f"culprit: {a['culprit']}")
    lines.append("")
    for u in a["unsubmitted"]:
        parts = [f"submitted by {_ranks(u['submitted'])}"]
        if u["missing"]:
            parts.append(f"not by {_ranks(u['missing'])}")
        if u["unknown"]:
            parts.append(f"unknown for {_ranks(u['unknown'])} (no dump)")
        lines.append(f"not submitted everywhere: {u['op']} '{u['name']}' (process set "
                     f"{u['process_set']}): " + ", ".join(parts)
                     + f", waited {u['waited_s']:.2f} s (from {u['source']})")
    d = a["diverged"]
    if d:
        parts = []
        if d["done"]:
            parts.append(f"done on {_ranks(d['done'])}")
        if d["inside"]:
            parts.append(f"started, not done on {_ranks(d['inside'])}")
        if d["not_started"]:
            parts.append(f"not started on {_ranks(d['not_started'])}")
        lines.append(f"first divergence: {d['what']}: " + "; ".join(parts))
    for f in a["failed"]:
        lines.append(f"failed on {_ranks(f['ranks'])}: {f['what']}: {f['error']}")
    lines.append("")
    lines.append("per rank:")
    for rank in a["dumped_ranks"]:
        last = a["last_done"][rank]
        text = _describe(last) if last else "none"
        stuck = a["in_flight"][rank]
        inside = f"; inside {_describe(stuck[-1])}" if stuck else ""
        lines.append(f"  rank {rank}: last done {text}{inside}")
        lines.append(f"    dumped because: {a['reasons'][rank].splitlines()[0]}")
    for rank in a["no_dump_ranks"]:
        lines.append(f"  rank {rank}: no dump")
    return "\n".join(lines) + "\n"


def run(args):
    dumps, ignored = newest_job(load(args.directory))
    analysis = analyze(dumps)
    analysis["ignored"] = ignored
    if args.json:
        print(json.dumps(analysis, indent=1, sort_keys=True))
    else:
        print(format_text(analysis), end="")
    return 0
