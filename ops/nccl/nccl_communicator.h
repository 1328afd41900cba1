// File: ops/nccl/nccl_communicator.h
//
// NCCL communicators behind GpuCommunicator (ops/gpu_platform.h); CudaPlatform
// (ops/cuda/cuda_platform.h) hands them out, nothing else should need this header (it does not
// include nccl.h: the class lives in the .cc). Every member must issue the same calls in the
// same order. Reductions: uint8, int8, int32, int64, float16, bfloat16, float32, float64 with
// sum, min, max, product; int16, bool, average and adasum are InvalidArgument.
// Errors name the failing call and carry NCCL's strings: Unavailable for ncclRemoteError,
// ncclSystemError and ncclInternalError (a peer or the network failed), InvalidArgument for
// ncclInvalidArgument and ncclInvalidUsage, Internal otherwise. After Abort every collective
// and AsyncError fail with Unavailable. The NCCL calls behind each collective:
// docs/nccl_communicator.md.
// Thread-safety: as GpuCommunicator: the collectives from one thread; AsyncError and Abort from
// any thread. Abort waits for an enqueue in progress (Note [Abort versus enqueue] in
// docs/nccl_communicator.md).
#ifndef CHORUS_OPS_NCCL_NCCL_COMMUNICATOR_H_
#define CHORUS_OPS_NCCL_NCCL_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "ops/gpu_platform.h"

namespace chorus::ops::gpu {

// A fresh ncclUniqueId (ncclGetUniqueId) as NCCL_UNIQUE_ID_BYTES raw bytes.
// Errors: Unavailable / Internal with NCCL's reason (e.g. no usable network interface).
absl::StatusOr<std::string> NewNcclUniqueId();

// Joins communicator `id` (from NewNcclUniqueId) as `rank` of `size` on CUDA device `device`
// (ncclCommInitRank). Blocks until every member has joined. Leaves `device` current on the
// calling thread.
// Errors: InvalidArgument for an id of the wrong length, size < 1 or rank outside [0, size);
// FailedPrecondition when `device` cannot be made current; NCCL failures as above.
absl::StatusOr<std::unique_ptr<GpuCommunicator>> CreateNcclCommunicator(const std::string& id,
                                                                        int size, int rank,
                                                                        int device);

}  // namespace chorus::ops::gpu

#endif  // CHORUS_OPS_NCCL_NCCL_COMMUNICATOR_H_
