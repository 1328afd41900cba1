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
  const std::vector<int64_t> blocks = EvenBlocks(count, n);
  RingReduceScatter reduce_scatter(transport_, options_);
  CHORUS_RETURN_IF_ERROR(reduce_scatter.Run(send, recv, blocks, reduction, tag));
  std::vector<int64_t> block_bytes(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) block_bytes[b] = blocks[b] * reduction.element_bytes();
  // This rank's reduced block is already in place in `recv`.
  const std::vector<int64_t> offsets = BlockOffsets(block_bytes);
  const std::byte* mine =
      static_cast<const std::byte*>(recv) + offsets[static_cast<size_t>(transport_->rank())];
  RingAllgatherv allgather(transport_, options_.piece_bytes);
  return allgather.Run(mine, recv, block_bytes, tag);
}

}  // namespace chorus::ops::ucx
