// File: ops/ucx/algorithms/ring_allreduce.h
//
// Ring allreduce for large messages: a ring reduce-scatter over n nearly equal blocks
// (RingReduceScatter) followed by a ring allgather of the reduced blocks (RingAllgatherv), both
// pipelined in pieces. Each rank sends and receives 2 (n - 1) / n of the data; the latency is
// 2 (n - 1) message steps, so small messages use RecursiveDoublingAllreduce instead. Results
// are bitwise identical on every rank (Note [Bitwise-identical results] in common.h).
// Note [One tag per collective]: both phases send only to the successor; the reduce-scatter's
// messages all precede the allgather's on both sides of every pair.
//
// Thread-safety: thread-compatible; uses the transport from the calling thread.
#ifndef CHORUS_OPS_UCX_ALGORITHMS_RING_ALLREDUCE_H_
#define CHORUS_OPS_UCX_ALGORITHMS_RING_ALLREDUCE_H_

#include <cstdint>

#include "absl/status/status.h"

#include "ops/ucx/algorithms/common.h"
#include "ops/ucx/algorithms/ring_reduce_scatter.h"
#include "ops/ucx/tag_transport.h"

namespace chorus::ops::ucx {

class RingAllreduce {
 public:
  // `transport` (and `scratch`, optional: RingScratch) are borrowed and must outlive this
  // object.
  RingAllreduce(TagTransport* transport, RingOptions options, RingScratch* scratch = nullptr)
      : transport_(transport), options_(options), scratch_(scratch) {}

  // Collective. recv[i] = reduction over all ranks of send[i], i < count. send == recv reduces
  // in place; otherwise they must not overlap.
  absl::Status Run(const void* send, void* recv, int64_t count, const Reduction& reduction,
                   uint64_t tag);

 private:
  TagTransport* transport_;
  RingOptions options_;
  RingScratch* scratch_;
};

}  // namespace chorus::ops::ucx

#endif  // CHORUS_OPS_UCX_ALGORITHMS_RING_ALLREDUCE_H_
