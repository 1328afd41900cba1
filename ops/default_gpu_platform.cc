// DefaultGpuPlatform (ops/gpu_platform.h): the platform this build was configured with.
#include "ops/gpu_platform.h"

#ifdef CHORUS_HAVE_CUDA
#include <nccl.h>

#include "ops/cuda/cuda_platform.h"
#endif

namespace chorus::ops::gpu {

std::shared_ptr<GpuPlatform> DefaultGpuPlatform() {
#ifdef CHORUS_HAVE_CUDA
  static const std::shared_ptr<GpuPlatform> platform = NewCudaPlatform();
#else
  static const std::shared_ptr<GpuPlatform> platform = NoGpuPlatform(
      "this chorus build has no GPU data plane (built without CUDA: CHORUS_WITH_CUDA=OFF, or "
      "CUDA/NCCL not found at configure time)");
#endif
  return platform;
}

int NcclBuildVersion() {
#ifdef CHORUS_HAVE_CUDA
  return NCCL_VERSION_CODE;
#else
  return 0;
#endif
}

}  // namespace chorus::ops::gpu
