#!/usr/bin/env bash
# Installs what is missing, checks the formatting (fast, before the build), builds, and runs
# every test once: the sanitizer runs (ASan+UBSan over the unit, MPI and launcher tiers; TSan on
# the unit and launcher tiers, built with clang -Wthread-safety) take the tests their builds
# have, the release build the rest (all of them with CHORUS_SKIP_SANITIZERS=1); then the fuzz
# targets (test/fuzz, 10 s each). Exits non-zero on any failure.
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
phase build scripts/build.sh build
ctest_args=()
if [[ "${CHORUS_SKIP_SANITIZERS:-0}" != "1" ]]; then
  # A test the ASan+UBSan build has too (the unit and MPI tiers, the launcher's) runs there
  # only: the same test in the stricter build. The rest (Python, the cluster, the allocation
  # counts, the GPU tier) runs here.
  scripts/sanitize.sh --configure-only >/dev/null
  in_asan=$(ctest --test-dir build-asan -N | sed -n 's/^ *Test *#[0-9]*: *//p' | paste -sd '|')
  ctest_args=(-E "^(${in_asan})\$")
fi
phase ctest ctest --test-dir build --output-on-failure "${ctest_args[@]}"
if [[ "${CHORUS_SKIP_SANITIZERS:-0}" != "1" ]]; then
  phase sanitize scripts/sanitize.sh
  phase fuzz scripts/fuzz.sh
fi
echo "test.sh: every phase passed in ${SECONDS} s:"
printf '  %s\n' "${times[@]}"
