// File: ops/gpu_platform.h
//
// The narrow interface between the runtime's GPU path and the GPU: streams, events, device
// memory, the batched fusion copy, NCCL-style communicators. Everything CUDA or NCCL specific
// lives behind it (its implementations, and why: docs/gpu.md).
// Conventions: devices are CUDA ordinals, and every call that takes one makes it current on the
// calling thread first (cudaSetDevice), so any thread may call. "Enqueue..." calls only queue
// work on the stream; the errors they return are launch errors, and faults during execution
// surface through EventDone and GpuCommunicator::AsyncError. Streams and events are opaque
// handles (cudaStream_t / cudaEvent_t as void*; a null stream is the legacy default stream).
// Nothing throws: FailedPrecondition for "no usable device", ResourceExhausted for failed
// allocations, Unavailable for NCCL failures, Internal otherwise.
//
// Thread-safety: implementations are thread-safe (the runtime calls from its submitting
// threads (RecordEvent at Enqueue), its background thread, and its completion thread).
#ifndef CHORUS_OPS_GPU_PLATFORM_H_
#define CHORUS_OPS_GPU_PLATFORM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "chorus/types.h"
#include "ops/cuda/batched_copy_plan.h"

namespace chorus::ops::gpu {

using StreamHandle = void*;  // cudaStream_t
using EventHandle = void*;   // cudaEvent_t

// One communicator over the ranks of a process set, bound to one device (an ncclComm_t).
// The collectives mirror CollectiveBackend's (ops/collective_backend.h) on device buffers, but
// only ENQUEUE the work on `stream`. Every member enqueues the same calls in the same order
// (the runtime's global execution order guarantees it).
// Thread-safety: the collectives are called from one thread (the runtime's background thread);
// AsyncError and Abort may be called from any thread at any time.
class GpuCommunicator {
 public:
  virtual ~GpuCommunicator() = default;  // destroys (ncclCommDestroy) unless aborted

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int device() const = 0;

  // recv[i] = op over the ranks of send[i] for i < count. `send == recv` reduces in place.
  // REQUIRES: op is kSum, kMin, kMax or kProduct; IsReducible(dtype).
  virtual absl::Status Allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                 ReduceOp op, StreamHandle stream) = 0;
  // Concatenates every rank's `send` (recv_bytes[rank()] bytes) in rank order into `recv`.
  virtual absl::Status Allgatherv(const void* send, void* recv,
                                  absl::Span<const int64_t> recv_bytes, StreamHandle stream) = 0;
  virtual absl::Status Broadcast(void* buffer, int64_t bytes, int root, StreamHandle stream) = 0;
  virtual absl::Status Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                                 absl::Span<const int64_t> send_offsets, void* recv,
                                 absl::Span<const int64_t> recv_bytes,
                                 absl::Span<const int64_t> recv_offsets, StreamHandle stream) = 0;
  // Reduces `send` (sum of recv_counts elements) and leaves block r on rank r in `recv`.
  virtual absl::Status ReduceScatter(const void* send, void* recv,
                                     absl::Span<const int64_t> recv_counts, DataType dtype,
                                     ReduceOp op, StreamHandle stream) = 0;

  // OK while the communicator is healthy; otherwise Unavailable with the library's error
  // string (ncclCommGetAsyncError). Non-blocking.
  virtual absl::Status AsyncError() = 0;
  // Aborts every operation in flight on the communicator (ncclCommAbort) and makes later calls
  // fail. Idempotent. The work queued on streams behind an aborted collective still completes
  // (the collective returns early), so events recorded after it become done.
  virtual void Abort() = 0;
};

class GpuPlatform {
 public:
  virtual ~GpuPlatform() = default;

  // "CUDA", "none", "fake", ...
  virtual std::string name() const = 0;

  // OK when `device` is a usable device; otherwise FailedPrecondition saying why ("no CUDA
  // device visible ...", "GPU 3 is not visible: 2 CUDA devices", "built without CUDA").
  virtual absl::Status CheckDevice(int device) = 0;

  virtual absl::StatusOr<StreamHandle> CreateStream(int device) = 0;
  virtual void DestroyStream(int device, StreamHandle stream) = 0;
  // Events for ordering only (no timing).
  virtual absl::StatusOr<EventHandle> CreateEvent(int device) = 0;
  virtual void DestroyEvent(int device, EventHandle event) = 0;
  // Captures the work queued on `stream` so far (cudaEventRecord).
  virtual absl::Status RecordEvent(int device, EventHandle event, StreamHandle stream) = 0;
  // Later work on `stream` waits for the event's captured work (cudaStreamWaitEvent).
  virtual absl::Status StreamWaitEvent(int device, StreamHandle stream, EventHandle event) = 0;
  // true once the captured work is done, false while it runs; an error if it faulted.
  virtual absl::StatusOr<bool> EventDone(int device, EventHandle event) = 0;

  // Runs fn(arg) on a host thread of the platform once the work queued on `stream` so far is
  // done (cudaLaunchHostFunc); later work on the stream waits for it to return. `fn` must be
  // short and must not call the platform. On success fn runs exactly once, unless the device
  // faults first; on error it never runs. Unimplemented (this default) where the platform has
  // no such call: the runtime then polls EventDone instead.
  virtual absl::Status EnqueueHostCallback(int device, StreamHandle stream, void (*fn)(void*),
                                           void* arg) {
    return absl::UnimplementedError(name() + " has no host callbacks");
  }

  // Device memory (cudaMalloc/cudaFree). Free may synchronise the device.
  virtual absl::StatusOr<void*> Allocate(int device, int64_t bytes) = 0;
  virtual void Free(int device, void* ptr) = 0;

  // Executes `plan` (device pointers) on `stream`: one launch (ops/cuda/batched_copy.h).
  virtual absl::Status EnqueueCopy(int device, const BatchedCopyPlan& plan,
                                   StreamHandle stream) = 0;
  // Fills `count` elements of `dtype` at `ptr` with the identity of `op` (zeros for a sum; what
  // a joined rank contributes).
  virtual absl::Status EnqueueFillIdentity(int device, void* ptr, int64_t count, DataType dtype,
                                           ReduceOp op, StreamHandle stream) = 0;

  // Communicators: rank 0 of the set creates an id, the runtime sends it to the other members,
  // every member then calls CreateCommunicator with it (collective over the set: it blocks until
  // all members have joined, as ncclCommInitRank).
  virtual absl::StatusOr<std::string> NewCommunicatorId() = 0;
  virtual absl::StatusOr<std::unique_ptr<GpuCommunicator>> CreateCommunicator(const std::string& id,
                                                                              int size, int rank,
                                                                              int device) = 0;
};

// The platform of a build: CudaPlatform with CUDA built in, else NoGpuPlatform. Shared: one per
// process.
std::shared_ptr<GpuPlatform> DefaultGpuPlatform();

// NCCL_VERSION_CODE of the nccl.h this build was compiled with (22809 for NCCL 2.28.9, 2708 for
// 2.7.8), or 0 for a build without the GPU data plane.
int NcclBuildVersion();

// A platform with no devices: CheckDevice fails with `reason`, everything else with the same
// FailedPrecondition.
std::shared_ptr<GpuPlatform> NoGpuPlatform(std::string reason);

}  // namespace chorus::ops::gpu

#endif  // CHORUS_OPS_GPU_PLATFORM_H_
