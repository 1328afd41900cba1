"""Runs examples/elastic/pytorch_mnist_elastic.py through a launcher and checks its report:
every rank printed the SHA-256 of its final parameters, all of them equal, and rank 0 printed
the final loss (and the number of simulated host updates, when --resets is given).

    check_elastic_example.py --ranks 2 [--resets N] -- LAUNCHER ARGS... example.py ARGS...

Prints "check_elastic_example: PASS" and exits 0, or says what is wrong and exits 1.
"""

import argparse
import re
import subprocess
import sys

DIGEST = re.compile(r"rank (\d+): parameters sha256 ([0-9a-f]{64})")
FINAL = re.compile(r"size (\d+), epochs (\d+), simulated host updates (\d+): final loss "
                   r"([0-9.]+)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--resets", type=int, default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(run.stdout)
    problems = []
    if run.returncode != 0:
        problems.append("the job exited with %d" % run.returncode)
    digests = dict(DIGEST.findall(run.stdout))
    if sorted(digests) != [str(r) for r in range(args.ranks)]:
        problems.append("parameter digests from ranks %s, expected 0..%d"
                        % (sorted(digests), args.ranks - 1))
    if len(set(digests.values())) > 1:
        problems.append("the ranks end with different parameters: %s" % digests)
    finals = FINAL.findall(run.stdout)
    if len(finals) != 1:
        problems.append("expected one final-loss line from rank 0, got %d" % len(finals))
    else:
        size, _, resets, loss = finals[0]
        if int(size) != args.ranks:
            problems.append("final size %s, expected %d" % (size, args.ranks))
        if args.resets is not None and int(resets) != args.resets:
            problems.append("%s simulated host updates, expected %d" % (resets, args.resets))
        if not float(loss) > 0:
            problems.append("final loss %s" % loss)
    if problems:
        print("check_elastic_example: FAIL: " + "; ".join(problems))
        return 1
    print("check_elastic_example: PASS (%d ranks, parameters %s, final loss %s)"
          % (args.ranks, next(iter(digests.values()))[:16], finals[0][3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
