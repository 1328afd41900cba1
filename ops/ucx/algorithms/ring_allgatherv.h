// File: ops/ucx/algorithms/ring_allgatherv.h
//
// Ring allgather of blocks of any byte counts (zeros included), pipelined in pieces: n - 1
// steps; at step t rank r sends block (r - t) mod n to rank r + 1 and receives block
// (r - t - 1) mod n from rank r - 1, straight into its place. A piece received at step t is
// forwarded at step t + 1 as soon as it arrives. Every receive is posted up front (they have
// distinct destinations), so no scratch memory is used.
// Note [One tag per collective] (common.h): rank r sends to r + 1 only, in step-then-piece
// order, and rank r + 1 posts its receives from r in that order.
//
// Thread-safety: thread-compatible; uses the transport from the calling thread.
#ifndef CHORUS_OPS_UCX_ALGORITHMS_RING_ALLGATHERV_H_
#define CHORUS_OPS_UCX_ALGORITHMS_RING_ALLGATHERV_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

#include "ops/ucx/algorithms/common.h"
#include "ops/ucx/tag_transport.h"

namespace chorus::ops::ucx {

class RingAllgatherv {
 public:
  // `transport` (and `scratch`, optional: RingScratch) are borrowed and must outlive this
  // object. `piece_bytes`: largest message.
  RingAllgatherv(TagTransport* transport, int64_t piece_bytes, RingScratch* scratch = nullptr)
      : transport_(transport), piece_bytes_(piece_bytes), scratch_(scratch) {}

  // Collective. `recv` holds the blocks of block_bytes[b] bytes in rank order (block_bytes is
  // identical on every rank, size() entries). `send` (block_bytes[rank()] bytes) is this rank's
  // block; it may already be in place in `recv`, or must not overlap it.
  absl::Status Run(const void* send, void* recv, absl::Span<const int64_t> block_bytes,
                   uint64_t tag);

 private:
  TagTransport* transport_;
  int64_t piece_bytes_;
  RingScratch* scratch_;
};

}  // namespace chorus::ops::ucx

#endif  // CHORUS_OPS_UCX_ALGORITHMS_RING_ALLGATHERV_H_
