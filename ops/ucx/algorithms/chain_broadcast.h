// File: ops/ucx/algorithms/chain_broadcast.h
//
// Pipelined chain broadcast for large messages: the ranks form a chain in rank order starting
// at the root (root, root + 1, ... mod n); the message travels down it in pieces, each rank
// forwarding a piece as soon as it has it. Every rank sends and receives the message once, so
// the time is about (n - 2 + pieces) piece transfers, close to one message transfer when the
// message has many pieces, where the binomial tree takes ceil(log2 n) message transfers (its
// root sends the whole message that many times). On this project's 2-core machine the two tie
// at 3 ranks (figures in docs/perf.md); the chain's advantage needs more ranks.
// Note [One tag per collective]: each rank sends only to its successor, pieces in order.
//
// Thread-safety: thread-compatible; uses the transport from the calling thread.
#ifndef CHORUS_OPS_UCX_ALGORITHMS_CHAIN_BROADCAST_H_
#define CHORUS_OPS_UCX_ALGORITHMS_CHAIN_BROADCAST_H_

#include <cstdint>

#include "absl/status/status.h"

#include "ops/ucx/tag_transport.h"

namespace chorus::ops::ucx {

class ChainBroadcast {
 public:
  // `transport` is borrowed and must outlive this object. `piece_bytes`: largest message.
  ChainBroadcast(TagTransport* transport, int64_t piece_bytes)
      : transport_(transport), piece_bytes_(piece_bytes) {}

  // As BinomialBroadcast::Run.
  absl::Status Run(void* buffer, int64_t bytes, int root, uint64_t tag);

 private:
  TagTransport* transport_;
  int64_t piece_bytes_;
};

}  // namespace chorus::ops::ucx

#endif  // CHORUS_OPS_UCX_ALGORITHMS_CHAIN_BROADCAST_H_
