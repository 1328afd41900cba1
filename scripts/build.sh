#!/usr/bin/env bash
# Configures (once) and builds chorus. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args]
# BUILD_DIR defaults to build/ (Release). Idempotent and incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
shift || true
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${CHORUS_BUILD_TYPE:-Release} "$@"
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
