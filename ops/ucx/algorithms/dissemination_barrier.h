// File: ops/ucx/algorithms/dissemination_barrier.h
//
// Dissemination barrier: ceil(log2 n) rounds; in round k rank r sends an empty message to
// r + 2^k and waits for one from r - 2^k (mod n). After the last round every rank has heard,
// directly or through others, from every rank that entered the barrier.
// Note [One tag per collective]: the peers of different rounds are distinct (2^k < n).
//
// Thread-safety: thread-compatible; uses the transport from the calling thread.
#ifndef CHORUS_OPS_UCX_ALGORITHMS_DISSEMINATION_BARRIER_H_
#define CHORUS_OPS_UCX_ALGORITHMS_DISSEMINATION_BARRIER_H_

#include <cstdint>

#include "absl/status/status.h"

#include "ops/ucx/tag_transport.h"

namespace chorus::ops::ucx {

class DisseminationBarrier {
 public:
  // `transport` is borrowed and must outlive this object.
  explicit DisseminationBarrier(TagTransport* transport) : transport_(transport) {}

  // Collective. Returns once every rank has called it.
  absl::Status Run(uint64_t tag);

 private:
  TagTransport* transport_;
};

}  // namespace chorus::ops::ucx

#endif  // CHORUS_OPS_UCX_ALGORITHMS_DISSEMINATION_BARRIER_H_
