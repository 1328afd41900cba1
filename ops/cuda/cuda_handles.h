// File: ops/cuda/cuda_handles.h
//
// The CUDA objects behind ops/gpu_platform.h's opaque handles (CUDA code only: the real GPU
// platform and the NCCL communicators).
#ifndef CHORUS_OPS_CUDA_CUDA_HANDLES_H_
#define CHORUS_OPS_CUDA_CUDA_HANDLES_H_

#include <cuda_runtime_api.h>

#include "ops/gpu_platform.h"

namespace chorus::ops::gpu {

inline cudaStream_t Stream(StreamHandle stream) { return static_cast<cudaStream_t>(stream); }
inline cudaEvent_t Event(EventHandle event) { return static_cast<cudaEvent_t>(event); }

}  // namespace chorus::ops::gpu

#endif  // CHORUS_OPS_CUDA_CUDA_HANDLES_H_
