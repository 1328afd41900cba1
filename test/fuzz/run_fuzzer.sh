#!/usr/bin/env bash
# Runs one libFuzzer target the way ctest and scripts/fuzz.sh do: every input of its seed corpus
# first (the regression inputs of bugs found included), then new inputs for SECONDS seconds.
# New inputs go to WORKDIR (kept between runs: a later run starts from them), never into the
# seed corpus. Extra arguments go to libFuzzer. Exit status: libFuzzer's (0: nothing found).
#
# Usage: run_fuzzer.sh FUZZER CORPUS WORKDIR SECONDS [libFuzzer flags...]
set -euo pipefail
if [[ $# -lt 4 ]]; then
  echo "usage: $0 FUZZER CORPUS WORKDIR SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
fuzzer=$1 corpus=$2 workdir=$3 seconds=$4
shift 4
mkdir -p "$workdir/new" "$workdir/artifacts"
# -detect_leaks=0 (targets over gRPC or UCX, which keep process-wide allocations for good) must
# reach LeakSanitizer's check at exit too.
leaks=1
for flag in "$@"; do [[ $flag == -detect_leaks=0 ]] && leaks=0; done
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=$leaks}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# UCX's memory hooks (libucm patches mmap at load time) break under ASan.
export UCX_MEM_MMAP_HOOK_MODE=none
exec "$fuzzer" -max_total_time="$seconds" -timeout=5 -print_final_stats=1 \
  -artifact_prefix="$workdir/artifacts/" "$@" "$workdir/new" "$corpus"
