// File: ops/cuda/batched_copy.h
//
// The batched fusion copy on the GPU: executes a BatchedCopyPlan (ops/cuda/batched_copy_plan.h)
// with ONE kernel launch on a caller's stream, instead of one cudaMemcpyAsync per tensor; the
// scale factor and float32 <-> float16/bfloat16 casts happen inside the same kernel. Nothing in
// the launch path synchronises the device or the stream. Does not include CUDA headers: streams
// travel as DeviceStream (a cudaStream_t as void*; nullptr is the legacy default stream). How
// the chunk table reaches the kernel, and a usage example: docs/gpu.md.
//
// Thread-safety: a BatchedCopyScratch is thread-compatible (one user at a time, the runtime's
// background thread); LaunchBatchedCopy may run concurrently on different scratches.
#ifndef CHORUS_OPS_CUDA_BATCHED_COPY_H_
#define CHORUS_OPS_CUDA_BATCHED_COPY_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "ops/cuda/batched_copy_plan.h"

namespace chorus::ops::gpu {

// A cudaStream_t, type-erased.
using DeviceStream = void*;

// Plans with at most this many chunks are passed as kernel parameters (no scratch needed).
inline constexpr size_t kMaxInlineChunks = 160;

// OK when the CUDA runtime sees at least one device. Otherwise Unavailable with the reason
// (cudaGetDeviceCount's error, or "no CUDA device is visible"). Never fails hard: safe to call
// on machines without a GPU or a driver.
absl::Status CudaDeviceAvailable();

// Loads the batched-copy kernels into the current device's context now. CUDA loads a kernel at
// its first launch by default (CUDA_MODULE_LOADING=LAZY since CUDA 12.2), and a load may wait
// for all work on the device: a first launch while another stream is held by work that waits on
// this thread (a host function, or a kernel spinning on a peer, as NCCL's do) would never
// return. Call once per device before the first launch.
// Errors: Internal with CUDA's error.
absl::Status PreloadBatchedCopyKernels();

// Per-device resources of LaunchBatchedCopy for plans larger than kMaxInlineChunks: a ring of
// `num_slots` pinned host staging buffers, each with its device copy of the chunk table and an
// event marking when the launch that used it has finished. A slot is reused only after its
// event completed (the host waits on it if the device is num_slots launches behind), so
// launches on any streams never see a table rewritten under them.
class BatchedCopyScratch {
 public:
  struct Options {
    int num_slots = 4;                     // >= 1
    size_t initial_chunk_capacity = 4096;  // per slot; a slot grows on demand (see Launch)
  };

  // Allocates on the current CUDA device, which the scratch is bound to.
  // Errors: Unavailable without a device; ResourceExhausted when allocation fails;
  // InvalidArgument for bad options; Internal for other CUDA errors.
  static absl::StatusOr<std::unique_ptr<BatchedCopyScratch>> Create(const Options& options);
  static absl::StatusOr<std::unique_ptr<BatchedCopyScratch>> Create() { return Create({}); }

  // Waits for the launches that still use a slot, then frees everything.
  ~BatchedCopyScratch();

  BatchedCopyScratch(const BatchedCopyScratch&) = delete;
  BatchedCopyScratch& operator=(const BatchedCopyScratch&) = delete;

  int device() const;                    // CUDA ordinal this scratch was created on
  size_t slot_capacity(int slot) const;  // chunks slot `slot` holds now (for tests)
  int num_slots() const;

  struct Impl;

 private:
  explicit BatchedCopyScratch(std::unique_ptr<Impl> impl);
  friend absl::Status LaunchBatchedCopy(const BatchedCopyPlan&, BatchedCopyScratch*, DeviceStream);
  std::unique_ptr<Impl> impl_;
};

// Enqueues `plan` on `stream` of the current device: at most one cudaMemcpyAsync (host -> device,
// the chunk table) and one kernel launch; returns without waiting for either. An empty plan
// enqueues nothing. The caller keeps every planned buffer alive and unmodified until the
// stream has passed this point, and orders other streams' accesses with events as usual.
// `scratch` may be null for plans of at most kMaxInlineChunks chunks.
// A slot that must grow frees its old buffers with cudaFree/cudaFreeHost, which synchronise
// the device once; size initial_chunk_capacity for the largest batch to avoid it.
// Errors: InvalidArgument when a large plan has no scratch; FailedPrecondition when the
// current device is not the scratch's; ResourceExhausted / Internal for CUDA errors (from the
// table copy, the launch, or cudaGetLastError after it). Faults inside the kernel surface
// later, on the stream, as for any kernel.
absl::Status LaunchBatchedCopy(const BatchedCopyPlan& plan, BatchedCopyScratch* scratch,
                               DeviceStream stream);

}  // namespace chorus::ops::gpu

#endif  // CHORUS_OPS_CUDA_BATCHED_COPY_H_
