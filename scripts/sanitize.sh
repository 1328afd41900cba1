#!/usr/bin/env bash
# Sanitizer runs: ASan+UBSan over the unit and MPI tiers; TSan over the unit and launcher tiers,
# built with clang so that the same build checks the lock annotations (-Wthread-safety).
# Builds in build-asan/ and build-tsan/ (incremental).
#
# Usage: scripts/sanitize.sh [--configure-only | --build-only] [address] [thread]
#   address, thread   only these sanitizers (default: both, ASan first)
#   --configure-only  configure build-asan and stop (scripts/test.sh reads its test list first)
#   --build-only      build and stop; a later run without it finds nothing left to build
#                     (scripts/test.sh builds in the background while other tests run)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=all
sanitizers=()
while (($# > 0)); do
  case $1 in
    --configure-only) mode=configure; shift ;;
    --build-only) mode=build; shift ;;
    address|thread) sanitizers+=("$1"); shift ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sanitize.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
((${#sanitizers[@]} > 0)) || sanitizers=(address thread)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# UCX's memory hooks (libucm patches mmap at load time) crash sanitizer-instrumented threads.
export UCX_MEM_MMAP_HOOK_MODE=none

address() {
  # -g1: line tables without the variables' debug information; ASan's reports name lines, and
  # the build takes less time.
  CHORUS_CONFIGURE_ONLY=$([[ $mode == configure ]] && echo 1 || echo 0) \
    CHORUS_BUILD_TYPE=Debug scripts/build.sh build-asan -DCHORUS_SANITIZE=address \
    -DCHORUS_WITH_CUDA=OFF -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1
  [[ $mode == all ]] || return 0
  # Open MPI's own allocations are reported as leaks by LeakSanitizer; leaks are not checked.
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure
}

# The threaded code is what TSan is for: the unit tier (the runtime core, its membership
# watcher and the rendezvous server) and the launcher's (its supervisor, discovery runner and
# the rendezvous server under chorusrun's processes). Built with clang, whose -Wthread-safety
# (with -Werror: CHORUS_WARNINGS) checks every ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED
# annotation of everything these tests link: the core, the ops, the launcher, the elastic
# policies and the test support code. One build serves both checks.
thread() {
  [[ $mode != configure ]] || return 0
  if [[ ! -f build-tsan/build.ninja ]]; then
    CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_UNITY_BUILD=ON -DCHORUS_SANITIZE=thread -DCHORUS_WITH_CUDA=OFF \
      -DCHORUS_BUILD_PYTHON=OFF -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only \
      -DCMAKE_C_FLAGS_DEBUG=-gline-tables-only
  fi
  cmake --build build-tsan -j "$(nproc)" --target chorus_unit_tests chorus_launcher_tests
  [[ $mode == all ]] || return 0
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/test/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -R '^(unit|unit_elastic|launcher_unit)$'
}

for s in "${sanitizers[@]}"; do "$s"; done
