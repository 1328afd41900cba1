// File: ops/cuda/cuda_platform.h
//
// The real GpuPlatform (ops/gpu_platform.h): the CUDA runtime API for streams, events and
// memory, the batched-copy kernels (ops/cuda/batched_copy.h) for fusion copies, and NCCL
// communicators (ops/nccl/nccl_communicator.h). Built only with CUDA (CHORUS_HAVE_CUDA).
//
// Creating it never fails, even without a driver or a device: CheckDevice then reports
// FailedPrecondition with CUDA's reason ("no CUDA device visible to chorus: ...").
//
// Thread-safety: thread-safe (see ops/gpu_platform.h).
#ifndef CHORUS_OPS_CUDA_CUDA_PLATFORM_H_
#define CHORUS_OPS_CUDA_CUDA_PLATFORM_H_

#include <memory>

#include "ops/gpu_platform.h"

namespace chorus::ops::gpu {

std::shared_ptr<GpuPlatform> NewCudaPlatform();

}  // namespace chorus::ops::gpu

#endif  // CHORUS_OPS_CUDA_CUDA_PLATFORM_H_
