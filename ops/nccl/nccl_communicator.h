// File: ops/nccl/nccl_communicator.h
//
// NCCL communicators behind GpuCommunicator (ops/gpu_platform.h). CudaPlatform
// (ops/cuda/cuda_platform.h) hands them out; nothing else should need this header. It does not
// include nccl.h: the class lives in the .cc.
//
//   absl::StatusOr<std::string> id = NewNcclUniqueId();                  // on rank 0
//   ... send *id to every member ...
//   absl::StatusOr<std::unique_ptr<GpuCommunicator>> comm =
//       CreateNcclCommunicator(*id, size, rank, device);                 // on every member
//
// How the collectives map onto NCCL (every member must issue the same calls in the same order):
//   Allreduce      ncclAllReduce
//   Allgatherv     ncclAllGather when every rank's block has the same size, else one
//                  ncclBroadcast per non-empty block (rooted at its owner) in one group
//   Broadcast      ncclBroadcast in place
//   Alltoallv      ncclSend/ncclRecv per non-empty block in one group
//   ReduceScatter  ncclReduceScatter when every block has the same count, else one ncclReduce
//                  per non-empty block (rooted at its owner) in one group
// Byte-moving collectives move ncclUint8. Reductions take uint8, int8, int32, int64, float16,
// bfloat16, float32 and float64 with sum, min, max and product; int16 (NCCL has no 16-bit
// integer type), bool, average and adasum are InvalidArgument.
//
// Errors: the failing call and NCCL's strings (ncclGetErrorString, ncclGetLastError), as
// Unavailable for ncclRemoteError, ncclSystemError and ncclInternalError (a peer or the network
// failed), InvalidArgument for ncclInvalidArgument and ncclInvalidUsage, Internal otherwise.
// After Abort every collective and AsyncError fail with Unavailable.
//
// Note [Abort versus enqueue]: ncclCommAbort frees the communicator, so it must not run while
// another thread is inside an NCCL call on it. Collectives and AsyncError hold a shared lock
// while they use the ncclComm_t, Abort takes it exclusively after marking the communicator
// aborted: a collective that starts afterwards fails without touching NCCL, and Abort waits
// for an enqueue already in progress to return. Enqueues return without waiting for the
// device; the one place a blocking communicator can wait on peers on the host is the lazy
// connection setup of a point-to-point group (Alltoallv, unequal Allgatherv/ReduceScatter), so
// an Abort issued while such a setup waits for a dead peer waits with it.
//
// Thread-safety: as GpuCommunicator: the collectives from one thread; AsyncError and Abort from
// any thread.
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
