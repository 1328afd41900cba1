// File: ops/ucx/algorithms/pairwise_alltoallv.h
//
// Pairwise-exchange alltoallv: n - 1 steps; at step k rank r sends its block for rank r + k and
// receives the block from rank r - k (mod n), so every rank has exactly one send and one receive
// in flight and no rank is flooded by all the others at once. The block for itself is copied.
// Every message is sent, empty ones included, so ranks that disagree on a block's size get an
// Internal error (size mismatch) instead of a hang.
// Note [One tag per collective]: each ordered pair exchanges exactly one message.
//
// Thread-safety: thread-compatible; uses the transport from the calling thread.
#ifndef CHORUS_OPS_UCX_ALGORITHMS_PAIRWISE_ALLTOALLV_H_
#define CHORUS_OPS_UCX_ALGORITHMS_PAIRWISE_ALLTOALLV_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

#include "ops/ucx/tag_transport.h"

namespace chorus::ops::ucx {

class PairwiseAlltoallv {
 public:
  // `transport` is borrowed and must outlive this object.
  explicit PairwiseAlltoallv(TagTransport* transport) : transport_(transport) {}

  // Collective. Sends send_bytes[p] bytes at send + send_offsets[p] to rank p and receives
  // recv_bytes[p] bytes from rank p at recv + recv_offsets[p]. All spans have size() entries of
  // non-negative values; `send` and `recv` do not overlap. InvalidArgument (before anything is
  // sent) when this rank's own block has different send and receive sizes.
  absl::Status Run(const void* send, absl::Span<const int64_t> send_bytes,
                   absl::Span<const int64_t> send_offsets, void* recv,
                   absl::Span<const int64_t> recv_bytes, absl::Span<const int64_t> recv_offsets,
                   uint64_t tag);

 private:
  TagTransport* transport_;
};

}  // namespace chorus::ops::ucx

#endif  // CHORUS_OPS_UCX_ALGORITHMS_PAIRWISE_ALLTOALLV_H_
