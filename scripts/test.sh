#!/usr/bin/env bash
# Installs what is missing, checks the formatting (fast, before the build), builds, and runs
# every test once: the sanitizer runs (ASan+UBSan over the unit, MPI and launcher tiers; TSan on
# the unit and launcher tiers, built with clang -Wthread-safety) take the tests their builds
# have, the release build the rest (all of them with CHORUS_SKIP_SANITIZERS=1); then the fuzz
# targets (test/fuzz, 5 s each). Exits non-zero on any failure.
# Many tests spend much of their time waiting (for a timeout, a restarted process, a peer), so
# the sanitizer and fuzz builds run in the background at idle CPU priority (SCHED_IDLE: they get
# only the CPU time the tests leave) while the tests before them run; a phase waits for its
# build before it tests.
# Each phase's time is printed as it ends, and all of them at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
times=()
phase() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  times+=("$(printf '%-10s %5d s' "$name" $((SECONDS - start)))")
  echo "test.sh: $name took $((SECONDS - start)) s"
}
phase setup scripts/setup.sh
phase format scripts/check_format.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
if [[ "${CHORUS_SKIP_SANITIZERS:-0}" == "1" ]]; then
  phase build scripts/build.sh build -DCHORUS_BUILD_TIER_BINARIES=ON
  phase ctest ctest --test-dir build --output-on-failure
else
  # The tiers that the sanitizer builds run are left out of this build's ctest (below), and so
  # are their binaries out of this build.
  phase build scripts/build.sh build -DCHORUS_BUILD_TIER_BINARIES=OFF
  # Builds in the background: one at a time, each started when the phase before it has its build.
  bg_pid=
  bg_log=$(mktemp)
  trap '[[ -z $bg_pid ]] || kill -- -"$bg_pid" 2>/dev/null || true; rm -f "$bg_log"' EXIT
  background() {
    setsid chrt --idle 0 "$@" >"$bg_log" 2>&1 &
    bg_pid=$!
  }
  # The phase's build: done when the background one has ended (its output shown either way).
  wait_background() {
    local status=0
    wait "$bg_pid" || status=$?
    bg_pid=
    cat "$bg_log"
    ((status == 0)) || { echo "test.sh: the background build failed ($status)" >&2; return 1; }
  }
  # A test the ASan+UBSan build has too (the unit and MPI tiers, the launcher's) runs there
  # only: the same test in the stricter build. The rest (Python, the cluster, the allocation
  # counts, the GPU tier) runs here.
  scripts/sanitize.sh --configure-only address >/dev/null
  in_asan=$(ctest --test-dir build-asan -N | sed -n 's/^ *Test *#[0-9]*: *//p' | paste -sd '|')
  background scripts/sanitize.sh --build-only address
  phase ctest ctest --test-dir build --output-on-failure -E "^(${in_asan})\$"
  phase asan-wait wait_background
  background bash -c 'scripts/sanitize.sh --build-only thread && scripts/fuzz.sh --build-only'
  phase asan scripts/sanitize.sh address
  phase tsan-wait wait_background
  phase tsan scripts/sanitize.sh thread
  phase fuzz scripts/fuzz.sh
fi
echo "test.sh: every phase passed in ${SECONDS} s:"
printf '  %s\n' "${times[@]}"
