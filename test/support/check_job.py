#!/usr/bin/env python3
"""Runs a job (an mpirun command line) and checks how it ended: its exit status and its output.

A ctest PASS_REGULAR_EXPRESSION alone ignores the exit status; this wrapper checks both, and
prints the job's output followed by one verdict line ("check_job: PASS" or the reasons it
failed). Exit status 0 when every check holds.

  check_job.py --exit nonzero --expect 'rank [01]: no progress' -- mpirun -np 3 job ...

--exit: "zero", "nonzero", or an exact number. --expect REGEX (repeatable): must occur in the
output (stdout and stderr together; Python re, DOTALL). --reject REGEX (repeatable): must not.
--timeout SECONDS: the job is killed (with its process group) after this long and the check
fails; without it the caller's timeout applies. --self-test: checks this checker on small
shell commands.
"""
import argparse
import os
import re
import signal
import subprocess
import sys


def run(command, timeout):
    """Runs `command`; returns (exit status or None when it timed out, output text)."""
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        output, _ = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        output, _ = job.communicate()
        return None, output.decode("utf-8", errors="replace")
    return job.returncode, output.decode("utf-8", errors="replace")


def problems_of(code, text, exit_spec, expects, rejects, timeout):
    """What is wrong with a job that ended with `code` (None: timed out) and printed `text`."""
    problems = []
    if code is None:
        problems.append("the job did not end within %g s" % timeout)
    elif exit_spec == "zero" and code != 0:
        problems.append("exit status %d, expected 0" % code)
    elif exit_spec == "nonzero" and code == 0:
        problems.append("exit status 0, expected a failure")
    elif exit_spec not in ("zero", "nonzero") and code != int(exit_spec):
        problems.append("exit status %d, expected %s" % (code, exit_spec))
    for pattern in expects:
        if not re.search(pattern, text, re.DOTALL):
            problems.append("missing from the output: /%s/" % pattern)
    for pattern in rejects:
        match = re.search(pattern, text, re.DOTALL)
        if match:
            problems.append("unexpected in the output: /%s/ (%r)" % (pattern, match.group(0)[:200]))
    return problems


def self_test():
    """Each case: (shell script, --exit, expects, rejects, timeout, should pass)."""
    cases = [
        ("echo 'Exit code: 3'; exit 3", "3", ["Exit code: *3"], [], None, True),
        # The output matches, the status does not: what a PASS_REGULAR_EXPRESSION lets through.
        ("echo 'Exit code: 3'; exit 0", "3", ["Exit code: *3"], [], None, False),
        ("echo 'Exit code: 3'; exit 0", "nonzero", ["Exit code: *3"], [], None, False),
        ("echo done; exit 1", "zero", ["done"], [], None, False),
        ("echo done >&2; exit 75", "nonzero", ["done"], [], None, True),
        ("echo other; exit 0", "zero", ["done"], [], None, False),
        ("echo 'done, FAILED'; exit 0", "zero", ["done"], ["FAILED"], None, False),
        ("sleep 30", "zero", [], [], 0.5, False),
    ]
    failures = 0
    for script, exit_spec, expects, rejects, timeout, should_pass in cases:
        code, text = run(["sh", "-c", script], timeout)
        passed = not problems_of(code, text, exit_spec, expects, rejects, timeout)
        if passed != should_pass:
            failures += 1
            print("check_job self-test: %r with --exit %s: %s, expected %s" %
                  (script, exit_spec, "pass" if passed else "fail",
                   "pass" if should_pass else "fail"))
    print("check_job self-test: %s (%d cases)" % ("FAIL" if failures else "PASS", len(cases)))
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exit", default="zero")
    parser.add_argument("--expect", action="append", default=[])
    parser.add_argument("--reject", action="append", default=[])
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")

    code, text = run(command, args.timeout)
    sys.stdout.write(text)
    if not text.endswith("\n"):
        sys.stdout.write("\n")
    problems = problems_of(code, text, args.exit, args.expect, args.reject, args.timeout)
    if problems:
        print("check_job: FAIL: " + "; ".join(problems))
        return 1
    print("check_job: PASS (exit status %d)" % code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
