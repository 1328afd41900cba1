#!/usr/bin/env bash
# Sanitizer runs: ASan+UBSan over the unit and MPI tiers; TSan over the unit and launcher tiers,
# built with clang so that the same build checks the lock annotations (-Wthread-safety).
# Builds in build-asan/ and build-tsan/ (incremental).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI's own allocations are reported as leaks by LeakSanitizer; leaks are not checked.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# UCX's memory hooks (libucm patches mmap at load time) crash sanitizer-instrumented threads.
export UCX_MEM_MMAP_HOOK_MODE=none
# --configure-only: configure build-asan and stop (scripts/test.sh reads its test list first).
if [[ "${1:-}" == "--configure-only" ]]; then export CHORUS_CONFIGURE_ONLY=1; fi
CHORUS_BUILD_TYPE=Debug scripts/build.sh build-asan -DCHORUS_SANITIZE=address -DCHORUS_WITH_CUDA=OFF
if [[ "${CHORUS_CONFIGURE_ONLY:-0}" == "1" ]]; then exit 0; fi
ctest --test-dir build-asan --output-on-failure
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/test/tsan.supp"
# The threaded code is what TSan is for: the unit tier (the runtime core, its membership
# watcher and the rendezvous server) and the launcher's (its supervisor, discovery runner and
# the rendezvous server under chorusrun's processes). Built with clang, whose -Wthread-safety
# (with -Werror: CHORUS_WARNINGS) checks every ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED
# annotation of everything these tests link: the core, the ops, the launcher, the elastic
# policies and the test support code. One build serves both checks.
if [[ ! -f build-tsan/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_UNITY_BUILD=ON -DCHORUS_SANITIZE=thread -DCHORUS_WITH_CUDA=OFF -DCHORUS_BUILD_PYTHON=OFF
fi
cmake --build build-tsan -j "$(nproc)" --target chorus_unit_tests chorus_launcher_tests
ctest --test-dir build-tsan --output-on-failure -R '^(unit|unit_elastic|launcher_unit)$'

