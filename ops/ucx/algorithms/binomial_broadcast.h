// File: ops/ucx/algorithms/binomial_broadcast.h
//
// Binomial-tree broadcast for small messages: ceil(log2 n) message steps. With ranks numbered
// relative to the root (v = (r - root) mod n), rank v receives from v minus its lowest set bit
// and then sends to v + 2^k for every 2^k below that bit. The root sends the whole message
// ceil(log2 n) times, so large messages use ChainBroadcast.
// Note [One tag per collective]: each pair exchanges at most one message.
//
// Thread-safety: thread-compatible; uses the transport from the calling thread.
#ifndef CHORUS_OPS_UCX_ALGORITHMS_BINOMIAL_BROADCAST_H_
#define CHORUS_OPS_UCX_ALGORITHMS_BINOMIAL_BROADCAST_H_

#include <cstdint>

#include "absl/status/status.h"

#include "ops/ucx/tag_transport.h"

namespace chorus::ops::ucx {

class BinomialBroadcast {
 public:
  // `transport` is borrowed and must outlive this object.
  explicit BinomialBroadcast(TagTransport* transport) : transport_(transport) {}

  // Collective. Copies `bytes` bytes of `buffer` on `root` into `buffer` on every other rank.
  // REQUIRES: 0 <= root < size(); `bytes` identical on every rank.
  absl::Status Run(void* buffer, int64_t bytes, int root, uint64_t tag);

 private:
  TagTransport* transport_;
};

}  // namespace chorus::ops::ucx

#endif  // CHORUS_OPS_UCX_ALGORITHMS_BINOMIAL_BROADCAST_H_
