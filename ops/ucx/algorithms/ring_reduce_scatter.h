// File: ops/ucx/algorithms/ring_reduce_scatter.h
//
// Ring reduce-scatter with uneven blocks, pipelined in pieces: n - 1 steps; at step s rank r
// sends block (r - s - 1) mod n to rank r + 1 and receives block (r - s - 2) mod n from rank
// r - 1, which it combines with its own. After the last step rank r holds block r reduced over
// all ranks. Each block is reduced once, along the chain that starts at its owner's successor
// (Note [Bitwise-identical results] in common.h). Bandwidth-optimal: each rank sends and
// receives (n - 1) / n of the data once. At most `depth` receives are posted at a time, and the
// bits do not depend on whether a rank reduces in place (Note [Ring scratch slots] in
// docs/ucx_transport.md).
// Note [One tag per collective]: rank r sends to r + 1 only, in step-then-piece order, and
// rank r + 1 posts its receives from r in the same order.
//
// Thread-safety: thread-compatible; uses the transport from the calling thread.
#ifndef CHORUS_OPS_UCX_ALGORITHMS_RING_REDUCE_SCATTER_H_
#define CHORUS_OPS_UCX_ALGORITHMS_RING_REDUCE_SCATTER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

#include "ops/ucx/algorithms/common.h"
#include "ops/ucx/tag_transport.h"

namespace chorus::ops::ucx {

struct RingOptions {
  // Largest message of the pipeline (rounded down to whole elements, at least one element).
  int64_t piece_bytes = int64_t{256} << 10;
  // Scratch slots, i.e. receives from the predecessor in flight (at least 1).
  int depth = 4;
};

class RingReduceScatter {
 public:
  // `transport` (and `scratch`, optional: RingScratch) are borrowed and must outlive this
  // object.
  RingReduceScatter(TagTransport* transport, RingOptions options, RingScratch* scratch = nullptr)
      : transport_(transport), options_(options), scratch_(scratch) {}

  // Collective. `blocks[b]`: elements of block b (blocks in rank order, identical on every
  // rank; blocks.size() == size()). On return, block rank() of `work` holds the reduction over
  // all ranks of block rank() of their `local`; the other blocks of `work` are clobbered.
  // `local` is only read; it is either `work` itself (in place) or does not overlap it.
  absl::Status Run(const void* local, void* work, absl::Span<const int64_t> blocks,
                   const Reduction& reduction, uint64_t tag);

 private:
  TagTransport* transport_;
  RingOptions options_;
  RingScratch* scratch_;
};

}  // namespace chorus::ops::ucx

#endif  // CHORUS_OPS_UCX_ALGORITHMS_RING_REDUCE_SCATTER_H_
