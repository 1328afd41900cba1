#!/usr/bin/env bash
# Installs what is missing, checks the formatting (fast, before the build), builds, and runs
# every test (unit + MPI tiers), then the sanitizer runs (ASan+UBSan on both tiers; TSan on the
# unit and launcher tiers, built with clang -Wthread-safety) and the fuzz targets (test/fuzz,
# 10 s each) unless CHORUS_SKIP_SANITIZERS=1. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check_format.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
scripts/build.sh build
ctest --test-dir build --output-on-failure
if [[ "${CHORUS_SKIP_SANITIZERS:-0}" != "1" ]]; then
  scripts/sanitize.sh
  scripts/fuzz.sh
fi
