#!/usr/bin/env bash
# Builds the core and the unit tier with clang, whose -Wthread-safety (with -Werror) checks
# every ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotation, then runs the unit tier.
# Builds in build-clang/ (incremental).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build-clang/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCHORUS_WITH_CUDA=OFF -DCHORUS_BUILD_PYTHON=OFF
fi
cmake --build build-clang -j "$(nproc)" --target chorus_unit_tests
ctest --test-dir build-clang --output-on-failure -R '^unit$'
