// File: ops/cuda/fill_identity.h
//
// Fills a device buffer with the identity of a reduction, on a stream: what a rank without data
// (a joined rank) contributes to a GPU allreduce. The values are those of ops::FillIdentity
// (ops/cpu/reduce_kernels.h), bit for bit: zeros for sum (and average), 1 for product, the
// largest value (+inf for floating point) for min, the lowest (-inf) for max; float16 and
// bfloat16 as their bit patterns (1 = 0x3C00 / 0x3F80, +inf = 0x7C00 / 0x7F80, -inf = 0xFC00 /
// 0xFF80).
//
// This header does not include CUDA headers (streams travel as DeviceStream).
//
// Thread-safety: thread-safe (stateless).
#ifndef CHORUS_OPS_CUDA_FILL_IDENTITY_H_
#define CHORUS_OPS_CUDA_FILL_IDENTITY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "chorus/types.h"
#include "ops/cuda/batched_copy.h"

namespace chorus::ops::gpu {

// The bit pattern of one identity element of `dtype` for `op`, in the low DataTypeSize(dtype)
// bytes (host byte order). Host-only, no CUDA call.
// Errors: InvalidArgument unless IsReducible(dtype) and op is sum, average, min, max or
// product.
absl::StatusOr<uint64_t> IdentityBits(DataType dtype, ReduceOp op);

// Enqueues, on `stream` of the current device, the write of `count` identity elements at `ptr`
// (device memory): a cudaMemsetAsync for sum and average, one kernel launch otherwise. Returns
// without waiting. count == 0 enqueues nothing.
// Errors: InvalidArgument for what IdentityBits rejects, a negative count, a null or
// misaligned `ptr` (it must be aligned to the element size) with count > 0; ResourceExhausted
// / Internal for CUDA launch errors. Faults during the fill surface on the stream.
absl::Status LaunchFillIdentity(void* ptr, int64_t count, DataType dtype, ReduceOp op,
                                DeviceStream stream);

// Loads the fill kernels into the current device's context now (see PreloadBatchedCopyKernels).
// Errors: Internal with CUDA's error.
absl::Status PreloadFillKernels();

}  // namespace chorus::ops::gpu

#endif  // CHORUS_OPS_CUDA_FILL_IDENTITY_H_
