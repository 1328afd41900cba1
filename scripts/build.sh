#!/usr/bin/env bash
# Configures (once) and builds chorus. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args]
# BUILD_DIR defaults to build/ (Release). Idempotent and incremental; extra cmake args given for
# a directory configured already are applied to it.
# A new build directory is configured as a unity build (CMAKE_UNITY_BUILD: batches of .cc files
# compiled as one translation unit, so the Abseil/gRPC/protobuf headers are parsed once per batch:
# a full build takes about half the time). For quicker rebuilds of one file while editing, pass
# -DCMAKE_UNITY_BUILD=OFF when the directory is first configured.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
shift || true
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${CHORUS_BUILD_TYPE:-Release} \
    -DCMAKE_UNITY_BUILD=ON "$@"
elif (($# > 0)); then
  cmake -S . -B "$BUILD_DIR" "$@"  # options given for a configured build: applied to it
fi
# CHORUS_CONFIGURE_ONLY=1: configure only (scripts/test.sh reads the ASan build's test list).
if [[ "${CHORUS_CONFIGURE_ONLY:-0}" != "1" ]]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
