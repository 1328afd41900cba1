#!/usr/bin/env bash
# Runs Horovod's own CPU examples (examples/pytorch/pytorch_mnist.py and
# pytorch_synthetic_benchmark.py) on chorus.torch, with only their imports changed, through
# chorusrun in both modes (mpirun, and --gloo: the MPI-less UCX launch), and pytorch_mnist.py
# once more in each mode with --num-proc, launching itself through horovod.run (chorus.run).
#
# Usage: scripts/horovod_examples.sh HOROVOD_CHECKOUT [--np N] [--build DIR] [--keep]
#   HOROVOD_CHECKOUT  a checkout (or export) of horovod/horovod; only read
#   --np N            ranks (default 2)
#   --build DIR       chorus build tree (default build/)
#   --keep            keep the scratch directory (logs/ has each run's output)
#
# pytorch_mnist.py reads MNIST from --data-dir (downloading it if absent, which needs a
# network): a synthetic MNIST in the same files (2048 training and 512 test images whose
# pixels depend on their label, so that the model can learn) is written there first.
# Prints one line per run with the figure the example reports, and a closing count line;
# exits non-zero if a run failed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

HVD="" NP=2 BUILD="$ROOT/build" KEEP=0
while (($#)); do
  case "$1" in
    --np) NP=$2; shift 2 ;;
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "horovod_examples: unknown option $1" >&2; usage ;;
    *) HVD=$1; shift ;;
  esac
done
[[ -n "$HVD" ]] || usage
EX="$HVD/examples/pytorch"
for f in pytorch_mnist.py pytorch_synthetic_benchmark.py; do
  [[ -f "$EX/$f" ]] || { echo "horovod_examples: $EX/$f not found" >&2; exit 2; }
done
PY=/usr/bin/python3
if ! $PY -c 'import filelock' 2>/dev/null; then  # pytorch_mnist.py imports it
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
  $SUDO apt-get install -y -qq --no-install-recommends python3-filelock >/dev/null
fi

SCRATCH=$(mktemp -d /tmp/horovod_examples.XXXXXX)
if ((KEEP)); then echo "horovod_examples: scratch directory $SCRATCH"; else trap 'rm -rf "$SCRATCH"' EXIT; fi
mkdir -p "$SCRATCH/logs"
for f in pytorch_mnist.py pytorch_synthetic_benchmark.py; do
  # The only edit: horovod -> chorus in the imports (pytorch_mnist.py also imports the top
  # package, for horovod.run, which it calls only with --num-proc).
  sed -e 's/^import horovod\.torch as hvd$/import chorus.torch as hvd/' \
      -e 's/^import horovod$/import chorus as horovod/' "$EX/$f" > "$SCRATCH/$f"
  if grep -nE '^\s*(import|from)\s+horovod' "$SCRATCH/$f"; then
    echo "horovod_examples: $f imports more of horovod than expected" >&2; exit 2
  fi
done

$PY - "$SCRATCH/data/MNIST/raw" <<'EOF'
import os, struct, sys
import numpy as np
raw = sys.argv[1]
os.makedirs(raw, exist_ok=True)
rng = np.random.default_rng(0)
for prefix, n in (("train", 2048), ("t10k", 512)):
    labels = rng.integers(0, 10, n).astype(np.uint8)
    images = rng.integers(0, 64, (n, 28, 28)).astype(np.uint8)
    for i, label in enumerate(labels):  # a bright bar whose row depends on the label
        images[i, 2 + 2 * label:4 + 2 * label, 4:24] = 255
    with open(os.path.join(raw, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + images.tobytes())
    with open(os.path.join(raw, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + labels.tobytes())
EOF

export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
failed=0 passed=0
run() {  # run MODE NAME PATTERN ARGS...: PATTERN is the line of the example's result
  local mode=$1 name=$2 pattern=$3; shift 3
  local log="$SCRATCH/logs/$name.$mode.log" launch=("$BUILD/launcher/chorusrun" -np "$NP")
  [[ $mode == gloo ]] && launch+=(--gloo)
  [[ $mode == run-* ]] && launch=()  # the example launches itself through chorus.run
  if (cd "$SCRATCH" && timeout --kill-after=10 900 "${launch[@]}" $PY "$@") >"$log" 2>&1 \
      && grep -qE "$pattern" "$log"; then
    printf 'PASSED   %-32s %-5s %s\n' "$name" "$mode" "$(grep -E "$pattern" "$log" | tail -1 | sed 's/^\[[0-9]*\]<[a-z]*>://')"
    passed=$((passed + 1))
  else
    printf 'FAILED   %-32s %-5s (log: %s)\n' "$name" "$mode" "$log"
    tail -5 "$log" | sed 's/^/         /'
    failed=$((failed + 1)); KEEP=1; trap - EXIT
  fi
}
for mode in mpi gloo; do
  run $mode pytorch_mnist.py 'Test set: Average loss' \
    pytorch_mnist.py --epochs 2 --data-dir "$SCRATCH/data" --log-interval 8
  run $mode pytorch_synthetic_benchmark.py 'Total img/sec' \
    pytorch_synthetic_benchmark.py --model resnet18 --batch-size 16 --num-warmup-batches 2 \
    --num-batches-per-iter 2 --num-iters 3
done
# pytorch_mnist.py --num-proc N: its own horovod.run call (chorus.run) launches the job.
for comm in mpi gloo; do
  run run-$comm pytorch_mnist.py 'Test set: Average loss' \
    pytorch_mnist.py --epochs 1 --data-dir "$SCRATCH/data" --log-interval 8 --num-proc "$NP" \
    --communication $comm
done
echo "horovod_examples: $passed passed, $failed failed"
((failed == 0))
