#!/usr/bin/env bash
# Runs Horovod's own test/parallel/test_torch.py against chorus.torch, with only its import
# changed, one test per launch so that one failure cannot cascade into the next test.
#
# Usage: scripts/horovod_suite.sh HOROVOD_CHECKOUT [--np N] [--gloo] [--timeout SEC]
#                                 [--build DIR] [-k SUBSTRING] [--keep]
#   HOROVOD_CHECKOUT  a checkout (or export) of horovod/horovod holding test/parallel/test_torch.py
#                     and test/utils/common.py; it is only read: the files are copied to a
#                     scratch directory and edited there.
#   --np N            ranks (default 2)
#   --gloo            launch with `chorusrun --gloo` (MPI-less; HOROVOD_RANK is set, which
#                     turns on the suite's Gloo-only tests) instead of mpirun
#   --timeout SEC     a test still running after SEC seconds counts as hung (default 180)
#   --build DIR       chorus build tree (default build/): PYTHONPATH=DIR/python, DIR/launcher
#   -k SUBSTRING      run only the tests whose name contains SUBSTRING
#   --keep            keep the scratch directory (its logs/ has each test's output)
#
# Prints one line per test (PASSED, FAILED, SKIPPED or HUNG) and a closing count line. Exits 0
# when no test failed or hung. Needs python3-cloudpickle and python3-mock (the suite's
# common.py imports them); they are installed when missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

HVD="" NP=2 GLOO=0 TIMEOUT=180 BUILD="$ROOT/build" FILTER="" KEEP=0
while (($#)); do
  case "$1" in
    --np) NP=$2; shift 2 ;;
    --gloo) GLOO=1; shift ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    -k) FILTER=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "horovod_suite: unknown option $1" >&2; usage ;;
    *) [[ -z "$HVD" ]] || { echo "horovod_suite: one checkout only" >&2; usage; }; HVD=$1; shift ;;
  esac
done
[[ -n "$HVD" ]] || usage
for f in test/parallel/test_torch.py test/utils/common.py; do
  [[ -f "$HVD/$f" ]] || { echo "horovod_suite: $HVD/$f not found" >&2; exit 2; }
done
[[ -d "$BUILD/python/chorus" ]] || { echo "horovod_suite: no chorus build in $BUILD (run scripts/build.sh)" >&2; exit 2; }
PY=/usr/bin/python3
if ! $PY -c 'import cloudpickle, mock' 2>/dev/null; then
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
  $SUDO apt-get install -y -qq --no-install-recommends python3-cloudpickle python3-mock >/dev/null
fi

SCRATCH=$(mktemp -d /tmp/horovod_suite.XXXXXX)
if ((KEEP)); then echo "horovod_suite: scratch directory $SCRATCH"; else trap 'rm -rf "$SCRATCH"' EXIT; fi
mkdir -p "$SCRATCH/parallel" "$SCRATCH/utils" "$SCRATCH/logs"
# common.py's one import of Horovod's launcher (in_thread, which test_torch.py never calls) is
# dropped: the launcher is not what is under test.
sed 's/^from horovod\.runner\.util\.threads import in_thread$/in_thread = None/' \
  "$HVD/test/utils/common.py" > "$SCRATCH/utils/common.py"
# The only edit: the import. Anything else of Horovod's that the file imports would be a
# test of Horovod, not of chorus, so it is refused.
sed 's/^import horovod\.torch as hvd$/import chorus.torch as hvd/' \
  "$HVD/test/parallel/test_torch.py" > "$SCRATCH/parallel/test_torch.py"
if grep -nE '^\s*(import|from)\s+horovod' "$SCRATCH/parallel/test_torch.py" "$SCRATCH/utils/common.py"; then
  echo "horovod_suite: the suite imports more of horovod than horovod.torch" >&2; exit 2
fi
grep -q '^import chorus.torch as hvd$' "$SCRATCH/parallel/test_torch.py" \
  || { echo "horovod_suite: 'import horovod.torch as hvd' not found" >&2; exit 2; }

export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mapfile -t TESTS < <(grep -oE '^    def (test_[A-Za-z0-9_]+)' "$SCRATCH/parallel/test_torch.py" \
                     | sed 's/^    def //' | grep -F -- "$FILTER")
((${#TESTS[@]})) || { echo "horovod_suite: no test matches '$FILTER'" >&2; exit 2; }

if ((GLOO)); then
  LAUNCH=("$BUILD/launcher/chorusrun" --gloo -np "$NP")
else
  LAUNCH=(mpirun --oversubscribe --bind-to none -np "$NP")
fi
passed=0 failed=0 skipped=0 hung=0
cd "$SCRATCH/parallel"
for t in "${TESTS[@]}"; do
  log="$SCRATCH/logs/$t.log"
  rc=0
  # --kill-after: a launcher that ignores SIGTERM is still ended, so the loop never hangs.
  timeout --kill-after=10 "$TIMEOUT" "${LAUNCH[@]}" $PY -m pytest -q --color=no -p no:cacheprovider \
    "test_torch.py::TorchTests::$t" >"$log" 2>&1 || rc=$?
  # pytest's summary per rank: "1 passed", "1 skipped", "1 failed".
  if ((rc == 124 || rc == 137)); then
    verdict=HUNG; hung=$((hung + 1))
  elif ((rc == 0)) && grep -qE '(^|[^0-9])1 passed' "$log"; then
    verdict=PASSED; passed=$((passed + 1))
  elif ((rc == 0)) && grep -qE '(^|[^0-9])1 skipped' "$log"; then
    verdict=SKIPPED; skipped=$((skipped + 1))
  else
    verdict=FAILED; failed=$((failed + 1))
  fi
  printf '%-8s %s\n' "$verdict" "$t"
  if [[ $verdict == FAILED || $verdict == HUNG ]]; then
    grep -E '^E  |Error|error' "$log" | head -4 | sed 's/^/         /' || true
  fi
done
echo "horovod_suite: $passed passed, $failed failed, $skipped skipped, $hung hung"
((failed == 0 && hung == 0))
