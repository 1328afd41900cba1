#!/usr/bin/python3
"""chorusrun flags a new user meets, across real chorus.torch processes (ctest
launcher_first_hour_e2e):
  - --tcp under --gloo: the workers' UCX is restricted to TCP (UCX_TLS=tcp) and a 2-rank
    allreduce still gives the right sum;
  - an elastic job asked for -np 4 whose discovery finds 2 slots starts at size 2 and says so
    on chorusrun's stderr, then trains to the end.
Usage: first_hour_e2e.py --chorusrun PATH
"""

import argparse
import os
import stat
import subprocess
import sys
import tempfile

ALLREDUCE = """
import os, chorus.torch as hvd, torch
hvd.init()
x = hvd.allreduce(torch.full((4,), float(hvd.rank() + 1)), op=hvd.Sum)
print("rank %d of %d: UCX_TLS=%s sum=%s" % (hvd.rank(), hvd.size(), os.environ.get("UCX_TLS"),
                                            x.tolist()), flush=True)
"""

failures = 0


def check(name, ok, detail):
    global failures
    print("%s %s" % ("PASS" if ok else "FAIL", name), flush=True)
    if not ok:
        failures += 1
        print(detail[-4000:], flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chorusrun", required=True)
    c = parser.parse_args().chorusrun
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([c, "-np", "2", "--gloo", "--tcp", sys.executable, "-c", ALLREDUCE],
                           capture_output=True, text=True, timeout=300, cwd=tmp)
        check("--tcp under --gloo: UCX on TCP only, the allreduce right on both ranks",
              p.returncode == 0 and all(
                  "rank %d of 2: UCX_TLS=tcp sum=[3.0, 3.0, 3.0, 3.0]" % r in p.stdout
                  for r in (0, 1)), p.stdout + p.stderr)

        script = os.path.join(tmp, "discover.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho localhost:2\n")
        os.chmod(script, os.stat(script).st_mode | stat.S_IEXEC)
        p = subprocess.run([c, "-np", "4", "--min-np", "2", "--max-np", "4",
                            "--host-discovery-script", script, sys.executable, "-c", ALLREDUCE],
                           capture_output=True, text=True, timeout=300, cwd=tmp)
        line = ("chorusrun: the elastic job starts with 2 workers, fewer than -np 4: 2 usable "
                "slots found (--min-np=2); workers join as slots appear, up to --max-np=4")
        check("elastic -np 4 with 2 slots: starts at size 2 and says so",
              p.returncode == 0 and line in p.stderr.splitlines() and all(
                  "rank %d of 2: UCX_TLS=None sum=[3.0, 3.0, 3.0, 3.0]" % r in p.stdout
                  for r in (0, 1)), p.stdout + p.stderr)
    print("first_hour_e2e: %s" % ("PASS" if failures == 0 else "%d FAILED" % failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
