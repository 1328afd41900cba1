"""chorus's Prometheus metrics scraped by a real Prometheus server (ctest metrics_prometheus_e2e).

A Prometheus server (Debian's `prometheus`, on a loopback port of its own, scraping every
second) scrapes the ranks of two 2-rank jobs, one through chorusrun in MPI mode and one under
chorusrun --gloo, each started with CHORUS_METRICS_PORT (rank r serves on the base port + its
local rank). Each rank runs STEPS steps of TENSORS synchronous allreduces of ELEMENTS float32
and one allgather of GATHER float32, then waits for this script. The script asks Prometheus's
query API, not the ranks, and checks per rank: the tensors and bytes of each op, one batch per
synchronous call, the histogram's count equal to the batches, no failed batch, and chorus_info's
controller. Then the jobs end normally.

Usage: check_metrics.py --chorusrun PATH (a worker: check_metrics.py --worker). Prints PASS and
exits 0 when every check held; else what differed, and exits 1.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

STEPS = 10
TENSORS = 3
ELEMENTS = 1024
GATHER = 8
LIMIT_S = 120  # a hang ends the test, not the machine's patience


def worker():
    import numpy as np
    import chorus.numpy as hvd
    hvd.init()
    for step in range(STEPS):
        for i in range(TENSORS):
            hvd.allreduce(np.ones(ELEMENTS, np.float32), name=f"grad.{i}")
        hvd.allgather(np.ones(GATHER, np.float32), name="gathered")
    marks = os.environ["CHECK_METRICS_MARKS"]
    open(os.path.join(marks, f"rank{hvd.rank()}.done"), "w").close()
    deadline = time.monotonic() + LIMIT_S
    while not os.path.exists(os.path.join(marks, "stop")) and time.monotonic() < deadline:
        time.sleep(0.1)


def free_ports(count, consecutive):
    """`count` free loopback ports (consecutive ones when asked)."""
    for _ in range(200):
        base = random.randint(20000, 60000 - count)
        ports = list(range(base, base + count)) if consecutive else \
            [random.randint(20000, 60000) for _ in range(count)]
        socks = []
        try:
            for p in ports:
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return ports
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


def query(web, expr):
    url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        answer = json.load(r)
    if answer.get("status") != "success":
        raise RuntimeError(f"Prometheus: {answer}")
    return {(s["metric"].get("instance"), s["metric"].get("rank")): float(s["value"][1])
            for s in answer["data"]["result"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--chorusrun")
    parser.add_argument("--prometheus", default=shutil.which("prometheus"))
    args = parser.parse_args()
    if args.worker:
        worker()
        return 0
    if not args.prometheus:
        print("check_metrics: no prometheus binary (Debian: prometheus; scripts/setup.sh "
              "installs it)", flush=True)
        return 1

    failures = []

    def check(cond, what, detail=""):
        print(("ok      " if cond else "FAILED  ") + what, flush=True)
        if not cond:
            failures.append(what)
            if detail:
                print(detail, flush=True)

    me = os.path.abspath(__file__)
    jobs = {"mpi": free_ports(2, True), "gloo": free_ports(2, True)}
    web = free_ports(1, False)[0]
    with tempfile.TemporaryDirectory(prefix="chorus_metrics_") as tmp:
        targets = [f"127.0.0.1:{p}" for ports in jobs.values() for p in ports]
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
                    "scrape_configs:\n  - job_name: chorus\n    static_configs:\n"
                    f"      - targets: {json.dumps(targets)}\n")
        prometheus = subprocess.Popen(
            [args.prometheus, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(tmp, 'data')}",
             f"--web.listen-address=127.0.0.1:{web}", "--log.level=warn"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        procs = []
        try:
            ready = False
            deadline = time.monotonic() + LIMIT_S
            while not ready and time.monotonic() < deadline and prometheus.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{web}/-/ready", timeout=2):
                        ready = True
                except OSError:
                    time.sleep(0.2)
            check(ready, "Prometheus is up", "" if prometheus.poll() is None
                  else prometheus.communicate()[0])
            if not ready:
                return 1
            for mode, ports in jobs.items():
                marks = os.path.join(tmp, f"marks.{mode}")
                os.mkdir(marks)
                env = dict(os.environ, CHORUS_METRICS_PORT=str(ports[0]),
                           CHECK_METRICS_MARKS=marks)
                command = [args.chorusrun, "-np", "2"] + (["--gloo"] if mode == "gloo" else [])
                command += [sys.executable, me, "--worker"]
                procs.append((mode, marks, subprocess.Popen(
                    command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True, start_new_session=True)))
            deadline = time.monotonic() + LIMIT_S
            while time.monotonic() < deadline and not all(
                    os.path.exists(os.path.join(marks, f"rank{r}.done"))
                    for _, marks, _ in procs for r in range(2)):
                if any(p.poll() is not None for _, _, p in procs):
                    break
                time.sleep(0.2)
            # Every rank has finished its steps: wait until Prometheus has scraped the final
            # totals of all four (the query, not the ranks, is what is checked).
            want_tensors = STEPS * TENSORS
            deadline = time.monotonic() + LIMIT_S
            tensors = {}
            while time.monotonic() < deadline:
                tensors = query(web, 'chorus_tensors_total{op="allreduce"}')
                if len(tensors) == 4 and all(v == want_tensors for v in tensors.values()):
                    break
                time.sleep(0.5)
            for mode, ports in jobs.items():
                for rank, port in enumerate(ports):
                    key = (f"127.0.0.1:{port}", str(rank))
                    label = f"{mode} rank {rank}"

                    def value(expr):
                        return query(web, expr).get(key)

                    check(tensors.get(key) == want_tensors,
                          f"{label}: {want_tensors} allreduced tensors", str(tensors))
                    check(value('chorus_bytes_total{op="allreduce"}') ==
                          want_tensors * ELEMENTS * 4, f"{label}: their bytes")
                    batches = value('chorus_batches_total{op="allreduce"}')
                    check(batches == want_tensors,
                          f"{label}: one batch per synchronous allreduce", str(batches))
                    check(value('chorus_batch_seconds_count{op="allreduce"}') == batches,
                          f"{label}: the histogram counts every batch")
                    check(value('chorus_batch_seconds_bucket{op="allreduce",le="+Inf"}') ==
                          batches, f"{label}: its +Inf bucket holds every batch")
                    check((value('chorus_batch_seconds_sum{op="allreduce"}') or 0) > 0,
                          f"{label}: the batches took some time")
                    check(value('chorus_tensors_total{op="allgather"}') == STEPS and
                          value('chorus_bytes_total{op="allgather"}') == STEPS * 2 * GATHER * 4,
                          f"{label}: the allgathers and their gathered bytes")
                    check(not value('chorus_batches_failed_total{op="allreduce"}'),
                          f"{label}: no failed batch")
                    check((value("chorus_cycles_total") or 0) > 0, f"{label}: cycles counted")
                    info = query(web, 'chorus_info{controller="%s",size="2"}'
                                 % ("UCX" if mode == "gloo" else "MPI"))
                    check(info.get(key) == 1, f"{label}: chorus_info names the controller",
                          str(info))
        finally:
            for _, marks, _ in procs:
                open(os.path.join(marks, "stop"), "w").close()
            for mode, _, p in procs:
                try:
                    out = p.communicate(timeout=60)[0]
                    check(p.returncode == 0, f"{mode}: the job ended normally",
                          f"exit status {p.returncode}\n{out}")
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    check(False, f"{mode}: the job ended", p.communicate()[0])
            os.killpg(prometheus.pid, signal.SIGTERM)
            try:
                prometheus.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(prometheus.pid, signal.SIGKILL)
    if failures:
        print(f"check_metrics: {len(failures)} check(s) failed", flush=True)
        return 1
    print("check_metrics: PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
