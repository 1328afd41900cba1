"""Runs examples/elastic/pytorch_synthetic_benchmark_elastic.py as a real elastic job and checks
its report: chorusrun starts it on one host (localhost), a second host (127.0.0.1) is added to
the discovery output once rank 0 has reported iteration 1, and the job must then

  - go through one reset to size 2 (rank 0 prints "Reset: size now 2"),
  - report every iteration exactly once (the one the host update interrupted starts over),
    the first ones at size 1 and the last at size 2, every rate positive,
  - end with status 0, a summary for 2 ranks, and identical parameters on both ranks.

    check_elastic_benchmark.py --chorusrun PATH --example PATH [--iters 40]

The new worker joins at a commit once its process is ready (it imports PyTorch meanwhile, off
rank 0's critical path), so the job runs enough iterations for that to happen well before it
ends.

Prints "check_elastic_benchmark: PASS" and exits 0, or says what is wrong and exits 1. The job
is bounded (240 s, then killed: a failure, not a hang).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

ITER = re.compile(r"Iter #(\d+): ([0-9.]+) img/sec per rank, size (\d+)")
DIGEST = re.compile(r"rank (\d+): parameters sha256 ([0-9a-f]{64})")
BOUND_S = 240


def write_hosts(directory, text):
    tmp = os.path.join(directory, "hosts.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(directory, "hosts"))


def run_job(args, directory):
    """The job's output lines and exit status; adds the second host after iteration 1."""
    write_hosts(directory, "localhost:1\n")
    script = os.path.join(directory, "discover.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\ncat %s\n" % os.path.join(directory, "hosts"))
    os.chmod(script, 0o755)
    env = dict(os.environ, CHORUS_ELASTIC_DISCOVERY_INTERVAL="0.05")
    command = [args.chorusrun, "-np", "1", "--max-np", "2", "--host-discovery-script", script,
               sys.executable, args.example, "--no-cuda", "--num-iters", str(args.iters),
               "--num-batches-per-iter", "3", "--batch-size", "8"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, stdin=subprocess.DEVNULL)
    timer = threading.Timer(BOUND_S, proc.kill)
    timer.start()
    lines = []
    try:
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line)
            m = ITER.search(line)
            if m and int(m.group(1)) == 1:
                write_hosts(directory, "localhost:1\n127.0.0.1:1\n")
        status = proc.wait()
    finally:
        timer.cancel()
    return lines, status


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chorusrun", required=True)
    parser.add_argument("--example", required=True)
    parser.add_argument("--iters", type=int, default=40)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="elastic_benchmark_")
    try:
        lines, status = run_job(args, directory)
    finally:
        shutil.rmtree(directory)
    text = "".join(lines)
    problems = []
    if status != 0:
        problems.append("the job exited with %d (killed after %d s: -9)" % (status, BOUND_S))
    iters = [(int(i), float(rate), int(size)) for i, rate, size in ITER.findall(text)]
    if [i for i, _, _ in iters] != list(range(args.iters)):
        problems.append("iterations reported %s, expected each of 0..%d once"
                        % ([i for i, _, _ in iters], args.iters - 1))
    if any(rate <= 0 for _, rate, _ in iters):
        problems.append("a rate is not positive: %s" % iters)
    sizes = [size for _, _, size in iters]
    if not sizes or sizes[0] != 1 or sizes[-1] != 2 or sizes != sorted(sizes):
        problems.append("sizes per iteration %s, expected 1 first and 2 at the end" % sizes)
    if text.count("Reset: size now 2") != 1:
        problems.append("expected one reset to size 2, got %d" % text.count("Reset: size now"))
    if "Total img/sec on 2 rank(s)" not in text:
        problems.append("no summary for 2 ranks")
    digests = dict(DIGEST.findall(text))
    if sorted(digests) != ["0", "1"] or len(set(digests.values())) != 1:
        problems.append("parameter digests %s: expected one, equal, from ranks 0 and 1" % digests)
    if problems:
        print("check_elastic_benchmark: FAIL: " + "; ".join(problems))
        return 1
    print("check_elastic_benchmark: PASS (iterations %d, sizes %s)" % (len(iters), sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
