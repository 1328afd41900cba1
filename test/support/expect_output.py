#!/usr/bin/python3
"""Runs a command and checks both its exit status and its output, for ctest entries.

ctest's PASS_REGULAR_EXPRESSION ignores the exit status (a job that crashes after printing the
expected line passes), so entries that look for a line run their command through this instead:

    expect_output.py [--status N] --match REGEX [--match REGEX ...] [--reject REGEX ...]
                     -- COMMAND [ARGS ...]

The command's stdout and stderr are passed through (merged, in order). The check passes when the
command exits with status N (default 0; 128 + S when a signal S killed it, as a shell reports
it), every --match regex is found in the output and no --reject regex is (Python re, MULTILINE).
Exits 0 when it passes, 1 with one line per failed check otherwise.
"""
import argparse
import re
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--status', type=int, default=0, help='the expected exit status')
    parser.add_argument('--match', action='append', default=[], help='must be in the output')
    parser.add_argument('--reject', action='append', default=[], help='must not be')
    parser.add_argument('command', nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ['--'] else args.command
    if not command or not args.match:
        parser.error('a command (after --) and at least one --match are required')
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    output = run.stdout.decode(errors='replace')
    sys.stdout.write(output)
    status = run.returncode if run.returncode >= 0 else 128 - run.returncode
    problems = []
    if status != args.status:
        problems.append(f'exit status {status}, expected {args.status}')
    problems += [f'no match for {p!r}' for p in args.match if not re.search(p, output, re.M)]
    problems += [f'unexpected match for {p!r}' for p in args.reject if re.search(p, output, re.M)]
    for p in problems:
        print(f'expect_output: FAIL: {p}')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
