#!/usr/bin/env bash
# Installs what is missing, checks the formatting (fast, before the build), builds, and runs
# every test (unit + MPI tiers), then the sanitizer runs (ASan+UBSan on both tiers; TSan on the
# unit and launcher tiers, built with clang -Wthread-safety) and the fuzz targets (test/fuzz,
# 10 s each) unless CHORUS_SKIP_SANITIZERS=1. Exits non-zero on any failure.
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
phase ctest ctest --test-dir build --output-on-failure
if [[ "${CHORUS_SKIP_SANITIZERS:-0}" != "1" ]]; then
  phase sanitize scripts/sanitize.sh
  phase fuzz scripts/fuzz.sh
fi
echo "test.sh: every phase passed in ${SECONDS} s:"
printf '  %s\n' "${times[@]}"
