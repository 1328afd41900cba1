// File: ops/collective_backend.h
//
// The data plane: one CollectiveBackend moves bytes among the ranks of ONE process set. The
// runtime's executor calls it with fused, contiguous host buffers; implementations are
// ops/mpi (MPI communicators), ops/ucx (chorus's own collectives over UCX) and the unit tests'
// in-process fabric; ops/hierarchical composes three of them. GPU tensors take the NCCL path
// (runtime/gpu), not this interface.
//
// Contract for every call:
// - Collective over the set: every member calls the same method with compatible arguments, in
//   the same order. The runtime guarantees that ordering (Note [One global execution order] in
//   runtime/loop/background_loop.h).
// - Blocking: returns when this rank's part is done and its output buffers are final.
// - Ranks are set ranks (0 .. size()-1), not world ranks.
// - Errors come back as Status (Unavailable for a lost peer, Internal for a transport failure);
//   nothing throws.
// Every call is one CollectiveCall through Run: a backend that wraps another (runtime/
// watched_backend.h, ops/hierarchical) overrides Run alone, not each collective.
// Thread-safety: thread-compatible; the runtime calls it from its background thread only.
#ifndef CHORUS_OPS_COLLECTIVE_BACKEND_H_
#define CHORUS_OPS_COLLECTIVE_BACKEND_H_

#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <variant>

#include "absl/status/status.h"
#include "absl/types/span.h"

#include "chorus/types.h"

namespace chorus::ops {

// One collective call and its arguments (the typed front doors below say what each means).
// Spans and pointers are borrowed for the call.
struct AllreduceCall {
  const void* send;
  void* recv;
  int64_t count;
  DataType dtype;
  ReduceOp op;
};
struct AllgathervCall {
  const void* send;
  void* recv;
  absl::Span<const int64_t> recv_bytes;
};
struct BroadcastCall {
  void* buffer;
  int64_t bytes;
  int root;
};
struct AlltoallvCall {
  const void* send;
  absl::Span<const int64_t> send_bytes;
  absl::Span<const int64_t> send_offsets;
  void* recv;
  absl::Span<const int64_t> recv_bytes;
  absl::Span<const int64_t> recv_offsets;
};
struct ReduceScatterCall {
  const void* send;
  void* recv;
  absl::Span<const int64_t> recv_counts;
  DataType dtype;
  ReduceOp op;
};
struct BarrierCall {};

// The collectives of the data plane, in one list: a new one is a struct above, an entry here,
// in kCollectiveCallNames and in RunOn, and its implementation in each transport.
using CollectiveCall = std::variant<AllreduceCall, AllgathervCall, BroadcastCall, AlltoallvCall,
                                    ReduceScatterCall, BarrierCall>;
inline constexpr const char* kCollectiveCallNames[] = {"Allreduce", "Allgatherv",    "Broadcast",
                                                       "Alltoallv", "ReduceScatter", "Barrier"};
static_assert(std::size(kCollectiveCallNames) == std::variant_size_v<CollectiveCall>);
inline const char* CallName(const CollectiveCall& call) {
  return kCollectiveCallNames[call.index()];
}

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;

  virtual int rank() const = 0;  // this process's rank in the set
  virtual int size() const = 0;  // ranks in the set
  // "MPI", "UCX", "NCCL", ... used in timelines and error messages.
  virtual std::string name() const = 0;

  // Runs one collective. Every typed call below comes here, so a backend that wraps another
  // (a watchdog, a hierarchical composition) overrides this alone; a transport's backend
  // implements the typed calls and forwards here with RunOn(*this, call).
  virtual absl::Status Run(const CollectiveCall& call) = 0;

  // recv[i] = op over all ranks of send[i], for i < count. `send == recv` reduces in place.
  // REQUIRES: op is kSum, kMin, kMax or kProduct (Average is Sum plus scaling, done by the
  // caller); IsReducible(dtype).
  absl::Status Allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op) {
    return Run(AllreduceCall{send, recv, count, dtype, op});
  }

  // Concatenates every rank's `send` (recv_bytes[rank()] bytes) in rank order into `recv`,
  // whose size is the sum of recv_bytes. recv_bytes.size() == size().
  absl::Status Allgatherv(const void* send, void* recv, absl::Span<const int64_t> recv_bytes) {
    return Run(AllgathervCall{send, recv, recv_bytes});
  }

  // Copies `bytes` bytes of `buffer` on `root` into `buffer` on every other rank.
  absl::Status Broadcast(void* buffer, int64_t bytes, int root) {
    return Run(BroadcastCall{buffer, bytes, root});
  }

  // Sends send_bytes[r] bytes (at send_offsets[r] of `send`) to rank r and receives
  // recv_bytes[r] bytes from rank r at recv_offsets[r] of `recv`. All spans have size() entries.
  absl::Status Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                         absl::Span<const int64_t> send_offsets, void* recv,
                         absl::Span<const int64_t> recv_bytes,
                         absl::Span<const int64_t> recv_offsets) {
    return Run(AlltoallvCall{send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets});
  }

  // Reduces `send` (sum of recv_counts elements) over all ranks and leaves block r (of
  // recv_counts[r] elements, blocks in rank order) on rank r in `recv`.
  // REQUIRES: as Allreduce.
  absl::Status ReduceScatter(const void* send, void* recv, absl::Span<const int64_t> recv_counts,
                             DataType dtype, ReduceOp op) {
    return Run(ReduceScatterCall{send, recv, recv_counts, dtype, op});
  }

  absl::Status Barrier() { return Run(BarrierCall{}); }
};

// Declares, inside a transport backend's class, its Run (RunOn) and the typed collectives Run
// calls: `absl::Status Allreduce(...)` and so on, with the front doors' signatures, which the
// transport defines in its .cc. The list of collectives stands here once, not in every backend.
#define CHORUS_TRANSPORT_COLLECTIVES()                                                            \
  absl::Status Run(const ::chorus::ops::CollectiveCall& call) override {                          \
    return ::chorus::ops::RunOn(*this, call);                                                     \
  }                                                                                               \
  absl::Status Allreduce(const void* send, void* recv, int64_t count, ::chorus::DataType dtype,   \
                         ::chorus::ReduceOp op);                                                  \
  absl::Status Allgatherv(const void* send, void* recv, absl::Span<const int64_t> recv_bytes);    \
  absl::Status Broadcast(void* buffer, int64_t bytes, int root);                                  \
  absl::Status Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,                  \
                         absl::Span<const int64_t> send_offsets, void* recv,                      \
                         absl::Span<const int64_t> recv_bytes,                                    \
                         absl::Span<const int64_t> recv_offsets);                                 \
  absl::Status ReduceScatter(const void* send, void* recv, absl::Span<const int64_t> recv_counts, \
                             ::chorus::DataType dtype, ::chorus::ReduceOp op);                    \
  absl::Status Barrier()

// A transport backend's Run: calls impl's member of the same name and arguments as the call
// (impl declares them all, hiding the front doors above with the same signatures).
template <typename Impl>
absl::Status RunOn(Impl& impl, const CollectiveCall& call) {
  // Each must be Impl's own: the front door would call Run again.
  static_assert(
      !std::is_same_v<decltype(&Impl::Allreduce), decltype(&CollectiveBackend::Allreduce)>);
  static_assert(
      !std::is_same_v<decltype(&Impl::Allgatherv), decltype(&CollectiveBackend::Allgatherv)>);
  static_assert(
      !std::is_same_v<decltype(&Impl::Broadcast), decltype(&CollectiveBackend::Broadcast)>);
  static_assert(
      !std::is_same_v<decltype(&Impl::Alltoallv), decltype(&CollectiveBackend::Alltoallv)>);
  static_assert(
      !std::is_same_v<decltype(&Impl::ReduceScatter), decltype(&CollectiveBackend::ReduceScatter)>);
  static_assert(!std::is_same_v<decltype(&Impl::Barrier), decltype(&CollectiveBackend::Barrier)>);
  struct Visitor {
    Impl& impl;
    absl::Status operator()(const AllreduceCall& c) {
      return impl.Allreduce(c.send, c.recv, c.count, c.dtype, c.op);
    }
    absl::Status operator()(const AllgathervCall& c) {
      return impl.Allgatherv(c.send, c.recv, c.recv_bytes);
    }
    absl::Status operator()(const BroadcastCall& c) {
      return impl.Broadcast(c.buffer, c.bytes, c.root);
    }
    absl::Status operator()(const AlltoallvCall& c) {
      return impl.Alltoallv(c.send, c.send_bytes, c.send_offsets, c.recv, c.recv_bytes,
                            c.recv_offsets);
    }
    absl::Status operator()(const ReduceScatterCall& c) {
      return impl.ReduceScatter(c.send, c.recv, c.recv_counts, c.dtype, c.op);
    }
    absl::Status operator()(const BarrierCall&) { return impl.Barrier(); }
  };
  return std::visit(Visitor{impl}, call);
}

}  // namespace chorus::ops

#endif  // CHORUS_OPS_COLLECTIVE_BACKEND_H_
