#!/usr/bin/env bash
# The GPU check: run from the repository root on a machine with an NVIDIA GPU. Everything it
# produces goes under $OUT (./gpu_out when OUT is unset):
#   summary.txt          what ran, what passed, the figures
#   nvidia-smi.txt       the device
#   build.log            configure + build (when built on this machine)
#   ctest-gpu.log        the GPU test tier (ctest -L gpu)
#   gpu_copy_bench.txt / .json   batched fusion copy vs cudaMemcpyAsync per tensor vs one copy
#
# Two ways to get the binaries:
#   1. Build here with CUDA (cmake, ninja, nvcc and chorus's build dependencies present):
#      build-gpu/ (Release, CHORUS_WITH_CUDA=ON).
#   2. Else a bundle built elsewhere by scripts/gpu_bundle.sh (gpu_bundle/: the GPU binaries
#      and the shared libraries they need that are not CUDA's), for machines without Open MPI,
#      Abseil or the other build dependencies.
# The multi-rank NCCL path cannot run on one GPU (NCCL refuses two ranks on one device); the
# end-to-end training-step benchmark on GPU tensors needs the runtime's GPU path, which is not
# built yet: the summary says so instead of failing.
#
# Exit status: 0 when every GPU test that ran passed, 1 otherwise, 2 when there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
started=$(date +%s)

say "chorus GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if ! nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1; then
  say "no GPU: nvidia-smi failed (see nvidia-smi.txt)"
  exit 2
fi
say "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"

status=0
bin_dir=""
if command -v cmake > /dev/null && command -v ninja > /dev/null &&
   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHORUS_WITH_CUDA=ON \
     -DCHORUS_BUILD_PYTHON=OFF > "$OUT/build.log" 2>&1; then
  say "configure: ok (build-gpu/, CUDA architectures $(grep -m1 '^CMAKE_CUDA_ARCHITECTURES' build-gpu/CMakeCache.txt | cut -d= -f2))"
  if cmake --build build-gpu -j "$(nproc)" --target chorus_gpu_batched_copy_test \
       chorus_gpu_copy_bench >> "$OUT/build.log" 2>&1; then
    say "build: ok ($(( $(date +%s) - started )) s so far)"
    bin_dir=build-gpu
  else
    say "build: FAILED (tail of build.log below)"
    tail -20 "$OUT/build.log" | tee -a "$summary"
    status=1
  fi
elif [[ -d gpu_bundle ]]; then
  say "configure here failed (see build.log; usually a missing build dependency): using gpu_bundle/"
  bin_dir=gpu_bundle
  export LD_LIBRARY_PATH="$PWD/gpu_bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  say "configure here failed (see build.log) and there is no gpu_bundle/ (scripts/gpu_bundle.sh makes one)"
  tail -20 "$OUT/build.log" | tee -a "$summary"
  exit 1
fi

if [[ -n "$bin_dir" ]]; then
  test_bin=$(find "$bin_dir" -name chorus_gpu_batched_copy_test -type f | head -1)
  bench_bin=$(find "$bin_dir" -name chorus_gpu_copy_bench -type f | head -1)

  # The GPU tests (ctest when built here: the gpu label; the bundle runs the binary itself).
  if [[ "$bin_dir" == build-gpu ]]; then
    ctest --test-dir build-gpu -L gpu --output-on-failure > "$OUT/ctest-gpu.log" 2>&1
    rc=$?
  else
    "$test_bin" > "$OUT/ctest-gpu.log" 2>&1
    rc=$?
  fi
  case $rc in
    0) say "GPU tests: passed ($(grep -Eo '[0-9]+ tests? passed|All tests passed.*' "$OUT/ctest-gpu.log" | tail -1))" ;;
    *) say "GPU tests: FAILED (rc $rc; see ctest-gpu.log)"; status=1 ;;
  esac

  # Batched copy bandwidth against cudaMemcpyAsync per tensor and one copy of the same bytes.
  if "$bench_bin" --json "$OUT/gpu_copy_bench.json" > "$OUT/gpu_copy_bench.txt" 2>&1; then
    say "batched copy benchmark:"
    sed 's/^/  /' "$OUT/gpu_copy_bench.txt" | tee -a "$summary"
  else
    say "batched copy benchmark: FAILED (see gpu_copy_bench.txt)"
    status=1
  fi
fi

say "multi-rank NCCL: not run (NCCL refuses two ranks on one GPU; one GPU here)"
say "chorus_bench steps on GPU tensors: not run (the runtime's GPU path is not built yet)"
say "elapsed: $(( $(date +%s) - started )) s; status $status"
exit $status
