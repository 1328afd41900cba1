#!/usr/bin/env bash
# Builds the GPU binaries here (CUDA is needed, a GPU is not) and bundles them for
# scripts/gpu_check.sh on a machine that lacks chorus's build dependencies:
#   gpu_bundle/bin/   the GPU tests (chorus_gpu_batched_copy_test, chorus_gpu_platform_test,
#                     chorus_gpu_reform_test) and benchmarks (chorus_gpu_copy_bench,
#                     chorus_gpu_steps_bench)
#   gpu_bundle/lib/   the shared libraries they load that are neither CUDA's driver's nor the
#                     C library's (Abseil, protobuf, libstdc++, the CUDA runtime, NCCL, ...),
#                     found with ldd. chorus_gpu_steps_bench links chorus_core but runs the
#                     runtime over an in-process fabric: it never calls MPI_Init, and the linker
#                     drops Open MPI and UCX when nothing references them (they come along if
#                     ldd lists them).
#   gpu_bundle/BUILD_INFO   the commit (+ "dirty" with local changes), CUDA and NCCL (headers)
#                     it was built from, one per line; scripts/gpu_check.sh prints it.
# NCCL (libnccl.so.2, about 200 MB, nearly incompressible) is most of the bundle;
# --without-nccl leaves it out, for a GPU machine that has its own libnccl.so.2
# (scripts/gpu_check.sh reports any library a bundled binary cannot find).
# Usage: scripts/gpu_bundle.sh [--without-nccl]   (build dir: build-gpu/, incremental)
set -euo pipefail
cd "$(dirname "$0")/.."
skip='/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda)\.so'
case "${1:-}" in
  "") ;;
  --without-nccl) skip="$skip|/libnccl\.so" ;;
  *) echo "usage: $0 [--without-nccl]" >&2; exit 2 ;;
esac
if [[ ! -f build-gpu/build.ninja ]]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHORUS_WITH_CUDA=ON \
    -DCHORUS_BUILD_PYTHON=OFF
fi
binaries=(chorus_gpu_batched_copy_test chorus_gpu_platform_test chorus_gpu_reform_test
  chorus_gpu_copy_bench chorus_gpu_steps_bench)
cmake --build build-gpu -j "$(nproc)" --target "${binaries[@]}"
rm -rf gpu_bundle
mkdir -p gpu_bundle/bin gpu_bundle/lib
for name in "${binaries[@]}"; do
  cp "$(find build-gpu -name "$name" -type f | head -1)" gpu_bundle/bin/
done
# Everything ldd resolves except the C library's own and the driver's (libcuda comes with the
# GPU machine's driver), and NCCL with --without-nccl; the CUDA runtime goes along, matching the
# compiled kernels.
for bin in gpu_bundle/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev "$skip" |
  while read -r lib; do cp -L "$lib" gpu_bundle/lib/; done
nccl_h=$(sed -n 's/^CHORUS_NCCL_INCLUDE_DIR:[A-Z]*=//p' build-gpu/CMakeCache.txt)
{
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' dirty')"
  echo "CUDA $(sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\(.*\)")$/\1/p' \
    build-gpu/CMakeFiles/*/CMakeCUDACompiler.cmake | head -1)"
  echo "NCCL headers $(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) / {printf "%s%s", sep, $3; sep="."}' \
    "${nccl_h:-/usr/local/cuda/include}/nccl.h" 2> /dev/null)"
} > gpu_bundle/BUILD_INFO
du -sh gpu_bundle
