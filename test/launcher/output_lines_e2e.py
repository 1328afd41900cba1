#!/usr/bin/python3
"""End-to-end test of chorusrun's output: ranks that write their lines in pieces (several
writes with pauses between them, a line longer than mpirun's 4096-byte reads, stdout and stderr
pieces mixed, a last line without a newline) must come back as whole lines, each tagged with its
rank, in each rank's order, in MPI mode (mpirun --tag-output tags every piece; chorusrun puts
them back together) and in --gloo mode. Each job runs several times: how the pieces interleave
changes from run to run.

Usage: output_lines_e2e.py --chorusrun PATH [--runs N]
Exits 0 when every case passes; prints one line per case.
"""
import argparse
import os
import subprocess
import sys

from e2e_report import check, describe, summary

LINES = 5
PAUSE_S = 0.003
LONG = 10000  # more than Open MPI's 4096-byte reads of a rank's pipe

# Each rank writes LINES lines to stdout, each in three writes with pauses between them, a
# stderr line in two writes between the pieces of every other line, one LONG-byte line in one
# write, and last a line without a newline.
WORKER = f'''
import os, sys, time
rank = os.environ.get("CHORUS_RANK") or os.environ["OMPI_COMM_WORLD_RANK"]
def pieces(fd, *parts):
    for i, part in enumerate(parts):
        if i:
            time.sleep({PAUSE_S})
        os.write(fd, part.encode())
for i in range({LINES}):
    os.write(1, f"rank {{rank}} line {{i}}: ".encode())
    if i % 2 == 0:
        pieces(2, f"rank {{rank}} warning {{i}} ", "[1,x]<stdout>: is not a tag\\n")
    time.sleep({PAUSE_S})
    pieces(1, "middle, ", f"end {{i}}\\n")
os.write(1, (rank * {LONG}).encode() + b"\\n")
pieces(1, f"tail {{rank}} ", "without newline")
'''


def expected(rank):
    out = [f'rank {rank} line {i}: middle, end {i}' for i in range(LINES)]
    out.append(str(rank) * LONG)
    out.append(f'tail {rank} without newline')
    err = [f'rank {rank} warning {i} [1,x]<stdout>: is not a tag' for i in range(0, LINES, 2)]
    return out, err


def lines_by_rank(text, stream, np):
    """{rank: [lines in order]} from chorusrun's `stream` output, or None for a line that is
    not '[r]<stream>:...' with 0 <= r < np."""
    by_rank = {r: [] for r in range(np)}
    for line in text.splitlines():
        tag, sep, body = line.partition(f']<{stream}>:')
        if not sep or not tag.startswith('[') or not tag[1:].isdigit() or int(tag[1:]) >= np:
            return None
        by_rank[int(tag[1:])].append(body)
    return by_rank


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--chorusrun', required=True)
    parser.add_argument('--runs', type=int, default=5)
    args = parser.parse_args()
    chorusrun = os.path.abspath(args.chorusrun)
    np = 2
    want_out = {r: expected(r)[0] for r in range(np)}
    want_err = {r: expected(r)[1] for r in range(np)}
    env = {k: v for k, v in os.environ.items() if not k.startswith(('SLURM_', 'CHORUS_'))}
    for mode, flags in (('MPI mode', []), ('--gloo', ['--gloo'])):
        bad = []
        for run in range(args.runs):
            p = subprocess.run([chorusrun, '-np', str(np)] + flags +
                               ['/usr/bin/python3', '-c', WORKER],
                               capture_output=True, text=True, env=env)
            out = lines_by_rank(p.stdout, 'stdout', np)
            err = lines_by_rank(p.stderr, 'stderr', np)
            if p.returncode != 0 or out != want_out or err != want_err:
                bad.append(f'run {run + 1}: ' + describe(p)[:4000])
        check(f'{mode}: {args.runs} runs of 2 ranks writing lines in pieces: every line whole, '
              'tagged with its rank, in order', not bad, '\n'.join(bad[:2]))
    return summary()


if __name__ == '__main__':
    sys.exit(main())
