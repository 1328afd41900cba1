// File: ops/ucx/algorithms/ring_allreduce.cc
#include "ops/ucx/algorithms/ring_allreduce.h"

#include <cstddef>
#include <vector>

#include "base/status_macros.h"
#include "ops/ucx/algorithms/ring_allgatherv.h"

namespace chorus::ops::ucx {

absl::Status RingAllreduce::Run(const void* send, void* recv, int64_t count,
                                const Reduction& reduction, uint64_t tag) {
  const int n = transport_->size();
  RingScratch own_scratch;
  RingScratch& s = scratch_ != nullptr ? *scratch_ : own_scratch;
  std::vector<int64_t>& blocks = s.blocks;
  EvenBlocksInto(count, n, &blocks);
  RingReduceScatter reduce_scatter(transport_, options_, &s);
  CHORUS_RETURN_IF_ERROR(reduce_scatter.Run(send, recv, blocks, reduction, tag));
  std::vector<int64_t>& block_bytes = s.block_bytes;
  block_bytes.resize(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) block_bytes[b] = blocks[b] * reduction.element_bytes();
  // This rank's reduced block is already in place in `recv`: it starts after the lower ranks'.
  int64_t before = 0;
  for (int b = 0; b < transport_->rank(); ++b) before += block_bytes[static_cast<size_t>(b)];
  const std::byte* mine = static_cast<const std::byte*>(recv) + before;
  RingAllgatherv allgather(transport_, options_.piece_bytes, &s);
  return allgather.Run(mine, recv, block_bytes, tag);
}

}  // namespace chorus::ops::ucx
