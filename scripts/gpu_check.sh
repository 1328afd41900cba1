#!/usr/bin/env bash
# The GPU check: run from the repository root on a machine with an NVIDIA GPU. Everything it
# produces goes under $OUT (./gpu_out when OUT is unset):
#   summary.txt          what ran, what passed, the figures
#   nvidia-smi.txt       the device
#   build.log            configure + build (when built on this machine)
#   ctest-gpu.log        the GPU test tier (ctest -L gpu; from a bundle: every chorus_gpu_*_test)
#   gpu_copy_bench.txt / .json    batched fusion copy vs cudaMemcpyAsync per tensor vs one copy
#   gpu_steps_bench.txt / .json   single-rank training steps on GPU tensors through the runtime:
#                                 step time, copies / NCCL / runtime shares, step vs raw
#
# Two ways to get the binaries:
#   1. Build here with CUDA (cmake, ninja, nvcc and chorus's build dependencies present):
#      build-gpu/ (Release, CHORUS_WITH_CUDA=ON): the binaries of the ctest gpu label and the
#      two benchmarks, nothing else.
#   2. Else a bundle built elsewhere by scripts/gpu_bundle.sh (gpu_bundle/: the GPU binaries
#      and the shared libraries they need that are not CUDA's), for machines without Open MPI,
#      Abseil or the other build dependencies. `--bundle` uses it without trying to build.
#      A bundle made --without-nccl takes this machine's libnccl.so.2: the loader's (ldconfig),
#      else the one a Python NCCL wheel installed (nvidia-nccl-cu13 and the like: found with
#      python3 under its site-packages), whose folder goes on LD_LIBRARY_PATH. The summary
#      names the NCCL that ran (NCCL_DEBUG=VERSION prints it at the first communicator).
# Usage: scripts/gpu_check.sh [--bundle]   (also works as gpu_bundle/gpu_check.sh: it runs in
# the folder above its own, the repository root.)
# The multi-rank NCCL path cannot run on one GPU (NCCL refuses two ranks on one device): the
# summary says so instead of failing.
# Measured from a bundle on one H200 (16 cores): the tests and benchmarks that finish take about
# 35 s together (chorus_gpu_platform_test hangs there, see docs/gpu.md; its cap ends it). A
# build here is not measured yet (estimate: 2-3 min).
#
# Exit status: 0 when every GPU test and benchmark that ran passed, 1 otherwise, 2 when there is
# no GPU.
set -uo pipefail
use_bundle=0
case "${1:-}" in
  "") ;;
  --bundle) use_bundle=1 ;;
  *) echo "usage: $0 [--bundle]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
started=$(date +%s)
# Caps (seconds), so that a hung binary cannot eat the whole session: the GPU tests together
# (ctest) or each test binary (bundle), and each benchmark. Normal runs take far less.
# CHORUS_GPU_CHECK_TEST_CAP / CHORUS_GPU_CHECK_BENCH_CAP override them.
test_cap=${CHORUS_GPU_CHECK_TEST_CAP:-240}
bench_cap=${CHORUS_GPU_CHECK_BENCH_CAP:-150}

say "chorus GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# The GPU tests' executables, from the GPU tier's ctest file (the fixed list if it has none).
gpu_test_targets() {
  local names
  names=$(grep -ho 'add_test(\[=\[[^]]*\]=\] "[^"]*"' build-gpu/test/gpu/CTestTestfile.cmake \
            2>/dev/null | sed 's/.*"\(.*\)"$/\1/' | xargs -r -n1 basename | sort -u)
  echo "${names:-chorus_gpu_batched_copy_test chorus_gpu_platform_test}"
}

# The folder of a libnccl.so.2 that a Python NCCL wheel installed ("" when none is found).
pip_nccl_dir() {
  python3 - 2> /dev/null << 'EOF'
import glob, os, site, sys
roots = [p for p in site.getsitepackages() + [site.getusersitepackages()] + sys.path
         if os.path.isdir(p)]
for root in dict.fromkeys(roots):
    for lib in sorted(glob.glob(os.path.join(root, "nvidia", "**", "libnccl.so.2"),
                                recursive=True)):
        print(os.path.dirname(os.path.realpath(lib)))
        sys.exit(0)
EOF
}

# Points the loader at the bundle's libraries, and at a libnccl.so.2 when the bundle has none
# and the loader knows none.
use_bundle_libraries() {
  export LD_LIBRARY_PATH="$PWD/gpu_bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [[ -f gpu_bundle/BUILD_INFO ]]; then say "bundle: $(paste -sd ';' gpu_bundle/BUILD_INFO)"; fi
  local known
  known=$(ldconfig -p 2> /dev/null)  # (not piped into grep -q: pipefail would see SIGPIPE)
  if [[ ! -e gpu_bundle/lib/libnccl.so.2 && "$known" != *"libnccl.so.2 "* ]]; then
    local dir
    dir=$(pip_nccl_dir)
    # Else any libnccl.so.2 where packages put them.
    [[ -n "$dir" ]] || dir=$(find /opt /usr/local /usr/lib -name libnccl.so.2 -printf '%h\n' \
                               -quit 2> /dev/null)
    if [[ -n "$dir" ]]; then
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir"
      say "NCCL: the bundle has none; using $dir/libnccl.so.2"
    else
      say "NCCL: the bundle has none, and no libnccl.so.2 was found (loader, python3's" \
        "site-packages, /opt, /usr/local, /usr/lib)"
    fi
  fi
  # Everything else the binaries need must resolve now (libcuda comes with the driver).
  local missing
  missing=$(for bin in gpu_bundle/bin/*; do ldd "$bin" 2>/dev/null; done |
              awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
  if [[ -n "$missing" ]]; then
    say "bundle: libraries not found on this machine: ${missing}(the binaries needing them fail)"
  fi
}

status=0
bin_dir=""
# The first communicator prints the NCCL version that runs ("NCCL version 2.x.y+cudaX.Y").
export NCCL_DEBUG=${NCCL_DEBUG:-VERSION}
# With --bundle the libraries are checked first, so that a machine without a GPU checks them.
if [[ $use_bundle == 1 ]]; then
  if [[ ! -d gpu_bundle/bin ]]; then
    say "--bundle: there is no gpu_bundle/bin (scripts/gpu_bundle.sh makes it)"
    exit 1
  fi
  say "using gpu_bundle/ (--bundle)"
  use_bundle_libraries
fi
if ! nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1; then
  say "no GPU: nvidia-smi failed (see nvidia-smi.txt)"
  exit 2
fi
say "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
say "driver's CUDA: $(grep -o 'CUDA Version: [0-9.]*' "$OUT/nvidia-smi.txt" | head -1)"

if [[ $use_bundle == 1 ]]; then
  bin_dir=gpu_bundle
elif command -v cmake > /dev/null && command -v ninja > /dev/null &&
   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHORUS_WITH_CUDA=ON \
     -DCHORUS_BUILD_PYTHON=OFF > "$OUT/build.log" 2>&1; then
  say "configure: ok (build-gpu/, CUDA architectures $(grep -m1 '^CMAKE_CUDA_ARCHITECTURES' build-gpu/CMakeCache.txt | cut -d= -f2))"
  targets=$(gpu_test_targets | tr '\n' ' ')
  # shellcheck disable=SC2086  # one target per word
  if cmake --build build-gpu -j "$(nproc)" --target $targets chorus_gpu_copy_bench \
       chorus_gpu_steps_bench >> "$OUT/build.log" 2>&1; then
    say "build: ok (${targets}chorus_gpu_copy_bench chorus_gpu_steps_bench; $(( $(date +%s) - started )) s so far)"
    bin_dir=build-gpu
  else
    say "build: FAILED (tail of build.log below)"
    tail -20 "$OUT/build.log" | tee -a "$summary"
    status=1
  fi
elif [[ -d gpu_bundle ]]; then
  say "configure here failed (see build.log; usually a missing build dependency): using gpu_bundle/"
  bin_dir=gpu_bundle
  use_bundle_libraries
else
  say "configure here failed (see build.log) and there is no gpu_bundle/ (scripts/gpu_bundle.sh makes one)"
  tail -20 "$OUT/build.log" | tee -a "$summary"
  exit 1
fi

if [[ -n "$bin_dir" ]]; then
  # The GPU tests (ctest when built here: the gpu label; the bundle runs each binary itself).
  if [[ "$bin_dir" == build-gpu ]]; then
    timeout -k 10 "$test_cap" ctest --test-dir build-gpu -L gpu --output-on-failure \
      > "$OUT/ctest-gpu.log" 2>&1
    rc=$?
    case $rc in
      0) say "GPU tests: passed ($(grep -Eo '[0-9]+% tests passed.*' "$OUT/ctest-gpu.log" | tail -1))" ;;
      *) say "GPU tests: FAILED (rc $rc; see ctest-gpu.log)"; status=1 ;;
    esac
    # ctest counts a skipped test (exit 77: no usable device) as passed: say so.
    grep -E '\(Skipped\)$' "$OUT/ctest-gpu.log" | sed 's/^[[:space:]]*/  skipped: /' |
      tee -a "$summary"
  else
    : > "$OUT/ctest-gpu.log"
    found=0
    for test_bin in "$bin_dir"/bin/chorus_gpu_*_test; do
      [[ -f "$test_bin" ]] || continue
      found=1
      name=$(basename "$test_bin")
      echo "=== $name" >> "$OUT/ctest-gpu.log"
      timeout -k 10 "$test_cap" "$test_bin" >> "$OUT/ctest-gpu.log" 2>&1
      rc=$?
      case $rc in
        0) say "GPU test $name: passed" ;;
        77) say "GPU test $name: SKIPPED (no usable device; see ctest-gpu.log)" ;;
        *) say "GPU test $name: FAILED (rc $rc; see ctest-gpu.log)"; status=1 ;;
      esac
    done
    if [[ $found == 0 ]]; then
      say "GPU tests: none in $bin_dir/bin (rebuild the bundle: scripts/gpu_bundle.sh)"
      status=1
    fi
  fi

  # run_bench NAME TITLE: runs chorus_NAME from $bin_dir into NAME.txt / NAME.json and puts its
  # output into the summary.
  run_bench() {
    local name=$1 title=$2 bin
    bin=$(find "$bin_dir" -name "chorus_$name" -type f | head -1)
    if [[ -z "$bin" ]]; then
      say "$title: FAILED (chorus_$name not found in $bin_dir)"
      status=1
      return
    fi
    timeout -k 10 "$bench_cap" "$bin" --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
    local rc=$?
    case $rc in
      0) say "$title:" ;;
      77) say "$title: SKIPPED (no usable device)" ;;
      *) say "$title: FAILED (rc $rc; output below, also in $name.txt)"; status=1 ;;
    esac
    sed 's/^/  /' "$OUT/$name.txt" | tee -a "$summary"
  }
  # Batched copy bandwidth against cudaMemcpyAsync per tensor and one copy of the same bytes.
  run_bench gpu_copy_bench "batched copy benchmark"
  # chorus_bench steps on GPU tensors: one rank, the whole runtime, vs the same work by hand.
  run_bench gpu_steps_bench "training steps on GPU tensors (one rank, through the runtime)"
fi

nccl_version=$(grep -ho -m1 'NCCL version [^ ]*' "$OUT/ctest-gpu.log" "$OUT"/gpu_*_bench.txt \
                 2> /dev/null | head -1)
say "NCCL that ran: ${nccl_version:-unknown (no communicator was created)}"
say "multi-rank NCCL: not run (NCCL refuses two ranks on one GPU; one GPU here)"
say "elapsed: $(( $(date +%s) - started )) s; status $status"
exit $status
