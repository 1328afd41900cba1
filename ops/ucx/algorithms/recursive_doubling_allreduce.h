// File: ops/ucx/algorithms/recursive_doubling_allreduce.h
//
// Recursive doubling allreduce for small messages: log2(p) steps in which partners (rank
// distance 1, 2, 4, ...) exchange their whole vectors and both combine them, p being the
// largest power of two <= n. Latency log2(p) (+ 2 with a remainder) message steps; each rank
// sends the whole vector at every step, so large messages use RingAllreduce.
//
// Non-power-of-two sizes (the standard fold-in): with rem = n - p, each even rank 2i < 2 rem
// first sends its vector to rank 2i + 1 and sits out; the p remaining ranks run the doubling
// (rank 2i + 1 as i, rank j >= 2 rem as j - rem); finally rank 2i + 1 sends the result back to
// rank 2i.
//
// Note [Bitwise-identical results] (common.h): at every combining step both partners compute
// op(lower-ranked side, upper-ranked side), operands in that order (the fold-in too: op(2i,
// 2i + 1)), so both hold the same bits afterwards and, by induction, every rank ends with the
// same value: a fixed binary tree over the ranks in rank order.
// Note [One tag per collective]: each pair exchanges at most one message per direction, except
// the fold-in pair (2i -> 2i + 1 before the doubling, 2i + 1 -> 2i after it).
//
// Thread-safety: thread-compatible; uses the transport from the calling thread.
#ifndef CHORUS_OPS_UCX_ALGORITHMS_RECURSIVE_DOUBLING_ALLREDUCE_H_
#define CHORUS_OPS_UCX_ALGORITHMS_RECURSIVE_DOUBLING_ALLREDUCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"

#include "ops/ucx/algorithms/common.h"
#include "ops/ucx/tag_transport.h"

namespace chorus::ops::ucx {

class RecursiveDoublingAllreduce {
 public:
  // `transport` is borrowed and must outlive this object. `scratch` (optional, borrowed) holds
  // the partner's vector: a caller that keeps it from one call to the next (a backend, the
  // controller's per-cycle bit vector) allocates nothing per call once it is large enough.
  explicit RecursiveDoublingAllreduce(TagTransport* transport,
                                      std::vector<std::byte>* scratch = nullptr)
      : transport_(transport), scratch_(scratch) {}

  // Collective. recv[i] = reduction over all ranks of send[i], i < count. send == recv reduces
  // in place; otherwise they must not overlap. Uses count elements of scratch memory.
  absl::Status Run(const void* send, void* recv, int64_t count, const Reduction& reduction,
                   uint64_t tag);

 private:
  TagTransport* transport_;
  std::vector<std::byte>* scratch_;
};

}  // namespace chorus::ops::ucx

#endif  // CHORUS_OPS_UCX_ALGORITHMS_RECURSIVE_DOUBLING_ALLREDUCE_H_
