// File: ops/ucx/algorithms/common.h
//
// What every UCX collective algorithm shares: the reduction it applies, how buffers are cut
// into pipeline pieces, and the set of requests it has in flight.
//
// Note [One tag per collective]: each collective call gets one tag (the backend's sequence
// number) and every message of that call carries it. That is enough because, between any two
// ranks, each algorithm sends its messages in the same order as the receiver posts the matching
// receives (each algorithm's file says why), and TagTransport matches messages of one pair and
// tag in order. Different calls use different tags, so a call never consumes another's message.
//
// Note [Bitwise-identical results]: every rank ends a reduction with the same bits, for every
// dtype and op (including min/max with NaN or signed zeros, where op(a, b) and op(b, a) may
// differ). The ring computes each block's reduction exactly once, on one chain of ranks, and then
// copies it; recursive doubling has both partners of a step compute op(lower half, upper half)
// with the operands in that order. Results are also reproducible run to run for the same inputs,
// message size and rank count.
//
// Thread-safety: thread-compatible.
#ifndef CHORUS_OPS_UCX_ALGORITHMS_COMMON_H_
#define CHORUS_OPS_UCX_ALGORITHMS_COMMON_H_

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "chorus/types.h"
#include "ops/ucx/tag_transport.h"

namespace chorus::ops::ucx {

// How two buffers of elements combine: dst[i] = op(dst[i], src[i]).
class Reduction {
 public:
  // kSum, kMin, kMax or kProduct over a reducible dtype (ops/cpu/reduce_kernels.h, so float16
  // and bfloat16 are computed in float32 and rounded once per step). InvalidArgument otherwise,
  // the message prefixed with `what`.
  static absl::StatusOr<Reduction> Of(const char* what, DataType dtype, ReduceOp op);
  // Bitwise AND of uint64_t words (the response cache's bit vector).
  static Reduction BitAnd64();

  int64_t element_bytes() const { return element_bytes_; }
  // REQUIRES: dst and src do not overlap unless equal.
  void Apply(void* dst, const void* src, int64_t count) const;

 private:
  Reduction(DataType dtype, ReduceOp op, bool bit_and, int64_t element_bytes)
      : dtype_(dtype), op_(op), bit_and_(bit_and), element_bytes_(element_bytes) {}
  DataType dtype_;
  ReduceOp op_;
  bool bit_and_;
  int64_t element_bytes_;
};

// The rank `a` steps around a ring of `n` ranks from rank 0: a mod n in [0, n), for negative
// `a` too (a ring's neighbours and block indices).
inline int RingIndex(int a, int n) { return ((a % n) + n) % n; }

// [offset, offset + length) of a buffer, in the caller's unit (elements or bytes).
struct Piece {
  int64_t offset = 0;
  int64_t length = 0;
};

// Appends [offset, offset + length) cut into pieces of at most max(1, max_piece); nothing when
// length is 0. Every rank computes the same pieces from the same arguments.
void AppendPieces(int64_t offset, int64_t length, int64_t max_piece, std::vector<Piece>* out);

// `count` split into `n` blocks in rank order, the first count % n one larger.
std::vector<int64_t> EvenBlocks(int64_t count, int n);
void EvenBlocksInto(int64_t count, int n, std::vector<int64_t>* out);
// Exclusive prefix sums: where each block starts.
std::vector<int64_t> BlockOffsets(absl::Span<const int64_t> lengths);
void BlockOffsetsInto(absl::Span<const int64_t> lengths, std::vector<int64_t>* out);

// The requests an algorithm has started and not waited on yet. Destruction waits for the rest,
// dropping their status, so an algorithm returning early with an error leaves no request
// touching its buffers.
class Outstanding {
 public:
  explicit Outstanding(TagTransport* transport) : transport_(transport) {}
  ~Outstanding();
  Outstanding(const Outstanding&) = delete;
  Outstanding& operator=(const Outstanding&) = delete;

  // Records a started request, or passes on the error that kept it from starting.
  absl::StatusOr<RequestId> Add(absl::StatusOr<RequestId> started);
  // Waits for one recorded request and forgets it.
  absl::Status Wait(RequestId id);
  // Waits for every recorded request and forgets them.
  absl::Status WaitAll();

 private:
  TagTransport* transport_;
  // Inline room for a ring's requests in flight on small and medium messages (a steady loop of
  // such collectives then allocates nothing here); more spill to the heap.
  absl::InlinedVector<RequestId, 32> ids_;
};

// The per-call buffers of the ring algorithms (RingAllreduce, RingReduceScatter,
// RingAllgatherv). An algorithm given one by a caller that keeps it from one call to the next
// (a backend) reuses its capacity, so that a steady loop of collectives allocates nothing once
// the buffers are large enough; without one, each call uses buffers of its own.
struct RingScratch {
  std::vector<int64_t> blocks;       // RingAllreduce: elements per block
  std::vector<int64_t> block_bytes;  // RingAllreduce: bytes per block
  std::vector<int64_t> offsets;      // a ring pass's block offsets
  std::vector<Piece> incoming;       // a ring pass's pieces from the predecessor, in order
  std::vector<int> step_of;          // the ring step of each incoming piece
  std::vector<Piece> own;            // pieces of this rank's own block
  std::vector<RequestId> recv_ids;   // the receive of each incoming piece
  std::vector<std::byte> slots;      // RingReduceScatter's receive slots
};

}  // namespace chorus::ops::ucx

#endif  // CHORUS_OPS_UCX_ALGORITHMS_COMMON_H_
