#!/usr/bin/env bash
# Compiles the libraries that carry lock annotations (the core, the ops, the launcher with its
# rendezvous server and job engine, the elastic policies and the test support code) with clang,
# whose -Wthread-safety (with -Werror) checks every ABSL_GUARDED_BY /
# ABSL_EXCLUSIVE_LOCKS_REQUIRED annotation. Compile-only: the tests themselves run in the
# Release, ASan and TSan builds. Builds in build-clang/ (incremental).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build-clang/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCHORUS_WITH_CUDA=OFF -DCHORUS_BUILD_PYTHON=OFF
fi
cmake --build build-clang -j "$(nproc)" --target chorus_core chorus_ops chorus_test_support \
  chorus_launcher chorus_elastic
