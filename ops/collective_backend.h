// File: ops/collective_backend.h
//
// The data plane: one CollectiveBackend moves bytes among the ranks of ONE process set. The
// runtime's executor calls it with fused, contiguous host buffers; implementations are
// ops/mpi (MPI communicators), the in-process fabric used by unit tests, and later UCX and NCCL.
//
// Contract for every call:
// - Collective over the set: every member calls the same method with compatible arguments, in
//   the same order. The runtime guarantees that ordering (Note [One global execution order] in
//   runtime/background_loop.h).
// - Blocking: returns when this rank's part is done and its output buffers are final.
// - Ranks are set ranks (0 .. size()-1), not world ranks.
// - Errors come back as Status (Unavailable for a lost peer, Internal for a transport failure);
//   nothing throws.
// Thread-safety: thread-compatible; the runtime calls it from its background thread only.
#ifndef CHORUS_OPS_COLLECTIVE_BACKEND_H_
#define CHORUS_OPS_COLLECTIVE_BACKEND_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"

#include "chorus/types.h"

namespace chorus::ops {

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;

  virtual int rank() const = 0;  // this process's rank in the set
  virtual int size() const = 0;  // ranks in the set
  // "MPI", "UCX", "NCCL", ... used in timelines and error messages.
  virtual std::string name() const = 0;

  // recv[i] = op over all ranks of send[i], for i < count. `send == recv` reduces in place.
  // REQUIRES: op is kSum, kMin, kMax or kProduct (Average is Sum plus scaling, done by the
  // caller); IsReducible(dtype).
  virtual absl::Status Allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                 ReduceOp op) = 0;

  // Concatenates every rank's `send` (recv_bytes[rank()] bytes) in rank order into `recv`,
  // whose size is the sum of recv_bytes. recv_bytes.size() == size().
  virtual absl::Status Allgatherv(const void* send, void* recv,
                                  absl::Span<const int64_t> recv_bytes) = 0;

  // Copies `bytes` bytes of `buffer` on `root` into `buffer` on every other rank.
  virtual absl::Status Broadcast(void* buffer, int64_t bytes, int root) = 0;

  // Sends send_bytes[r] bytes (at send_offsets[r] of `send`) to rank r and receives
  // recv_bytes[r] bytes from rank r at recv_offsets[r] of `recv`. All spans have size() entries.
  virtual absl::Status Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                                 absl::Span<const int64_t> send_offsets, void* recv,
                                 absl::Span<const int64_t> recv_bytes,
                                 absl::Span<const int64_t> recv_offsets) = 0;

  // Reduces `send` (sum of recv_counts elements) over all ranks and leaves block r (of
  // recv_counts[r] elements, blocks in rank order) on rank r in `recv`.
  // REQUIRES: as Allreduce.
  virtual absl::Status ReduceScatter(const void* send, void* recv,
                                     absl::Span<const int64_t> recv_counts, DataType dtype,
                                     ReduceOp op) = 0;

  virtual absl::Status Barrier() = 0;
};

}  // namespace chorus::ops

#endif  // CHORUS_OPS_COLLECTIVE_BACKEND_H_
