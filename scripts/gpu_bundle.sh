#!/usr/bin/env bash
# Builds the GPU binaries here (CUDA is needed, a GPU is not) and bundles them for
# scripts/gpu_check.sh on a machine that lacks chorus's build dependencies:
#   gpu_bundle/bin/   chorus_gpu_batched_copy_test, chorus_gpu_copy_bench
#   gpu_bundle/lib/   the shared libraries they load that are neither CUDA's nor the C
#                     library's (Abseil, ...), found with ldd
# Usage: scripts/gpu_bundle.sh   (build dir: build-gpu/, incremental)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build-gpu/build.ninja ]]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHORUS_WITH_CUDA=ON \
    -DCHORUS_BUILD_PYTHON=OFF
fi
cmake --build build-gpu -j "$(nproc)" --target chorus_gpu_batched_copy_test chorus_gpu_copy_bench
rm -rf gpu_bundle
mkdir -p gpu_bundle/bin gpu_bundle/lib
for name in chorus_gpu_batched_copy_test chorus_gpu_copy_bench; do
  cp "$(find build-gpu -name "$name" -type f | head -1)" gpu_bundle/bin/
done
# Everything ldd resolves except the C library's own and the driver's (libcuda comes with the
# GPU machine's driver); the CUDA runtime goes along, matching the compiled kernels.
for bin in gpu_bundle/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" gpu_bundle/lib/; done
du -sh gpu_bundle
