// File: ops/hierarchical/hierarchical_backend.cc
#include "ops/hierarchical/hierarchical_backend.h"

#include <cstddef>
#include <cstring>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"

#include "base/status_macros.h"
#include "ops/ucx/algorithms/common.h"

namespace chorus::ops {
namespace {

std::byte* Bytes(void* p) { return static_cast<std::byte*>(p); }

}  // namespace

absl::StatusOr<std::unique_ptr<HierarchicalBackend>> HierarchicalBackend::Create(
    std::unique_ptr<CollectiveBackend> flat, std::unique_ptr<CollectiveBackend> local,
    std::unique_ptr<CollectiveBackend> cross, HierarchyPlan plan) {
  if (flat == nullptr || local == nullptr || cross == nullptr) {
    return absl::InvalidArgumentError("HierarchicalBackend: a backend is missing");
  }
  if (plan.kind != HierarchyPlan::Kind::kHierarchical) {
    return absl::InvalidArgumentError("HierarchicalBackend: the set's plan is not hierarchical");
  }
  const HierarchyLayout& layout = plan.layout;
  const int me = flat->rank();
  if (flat->size() != static_cast<int>(layout.host.size()) || me < 0 || me >= flat->size()) {
    return absl::InvalidArgumentError(absl::StrCat("HierarchicalBackend: the set has ",
                                                   flat->size(), " ranks, the layout ",
                                                   layout.host.size()));
  }
  // The cross group of local index l holds the members with that index in set-rank order.
  int cross_rank = 0;
  for (int r = 0; r < me; ++r) cross_rank += layout.local[r] == layout.local[me] ? 1 : 0;
  if (local->size() != layout.local_size || local->rank() != layout.local[me] ||
      cross->size() != layout.cross_size || cross->rank() != cross_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("HierarchicalBackend: set rank ", me, " is local ", local->rank(), "/",
                     local->size(), " and cross ", cross->rank(), "/", cross->size(),
                     "; its layout says local ", layout.local[me], "/", layout.local_size,
                     " and cross ", cross_rank, "/", layout.cross_size));
  }
  return std::unique_ptr<HierarchicalBackend>(new HierarchicalBackend(
      std::move(flat), std::move(local), std::move(cross), std::move(plan)));
}

HierarchicalBackend::HierarchicalBackend(std::unique_ptr<CollectiveBackend> flat,
                                         std::unique_ptr<CollectiveBackend> local,
                                         std::unique_ptr<CollectiveBackend> cross,
                                         HierarchyPlan plan)
    : flat_(std::move(flat)),
      local_(std::move(local)),
      cross_(std::move(cross)),
      plan_(std::move(plan)) {}

absl::Status HierarchicalBackend::Run(const CollectiveCall& call) {
  if (const auto* c = std::get_if<AllreduceCall>(&call)) {
    return Allreduce(c->send, c->recv, c->count, c->dtype, c->op);
  }
  if (const auto* c = std::get_if<AllgathervCall>(&call)) {
    return Allgatherv(c->send, c->recv, c->recv_bytes);
  }
  return flat_->Run(call);
}

absl::Status HierarchicalBackend::Allreduce(const void* send, void* recv, int64_t count,
                                            DataType dtype, ReduceOp op) {
  if (ChooseAllreduce(modes_.allreduce, plan_, count) == CollectiveAlgorithm::kFlat) {
    ++counters_.flat_allreduces;
    return flat_->Allreduce(send, recv, count, dtype, op);
  }
  ++counters_.hierarchical_allreduces;
  return HierarchicalAllreduce(send, recv, count, dtype, op);
}

absl::Status HierarchicalBackend::HierarchicalAllreduce(const void* send, void* recv, int64_t count,
                                                        DataType dtype, ReduceOp op) {
  const auto esize = static_cast<int64_t>(DataTypeSize(dtype));
  const std::vector<int64_t> blocks = ucx::EvenBlocks(count, layout().local_size);
  const std::vector<int64_t> offsets = ucx::BlockOffsets(blocks);
  const auto l = static_cast<size_t>(local_->rank());
  std::byte* mine = Bytes(recv) + offsets[l] * esize;
  const int64_t mine_bytes = blocks[l] * esize;
  // 1. Block l reduced over this host, at its place in `recv`.
  if (send == recv) {
    // In place the reduce-scatter leaves this member's block at the front.
    CHORUS_RETURN_IF_ERROR(local_->ReduceScatter(recv, recv, blocks, dtype, op));
    if (offsets[l] > 0 && mine_bytes > 0) {
      std::memmove(mine, recv, static_cast<size_t>(mine_bytes));
    }
  } else {
    CHORUS_RETURN_IF_ERROR(local_->ReduceScatter(send, mine, blocks, dtype, op));
  }
  // 2. Block l reduced over every host.
  CHORUS_RETURN_IF_ERROR(CrossAllreduce(mine, blocks[l], dtype, op));
  // 3. Every block on every member of the host.
  std::vector<int64_t> block_bytes(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) block_bytes[b] = blocks[b] * esize;
  return local_->Allgatherv(mine, recv, block_bytes);
}

absl::Status HierarchicalBackend::CrossAllreduce(std::byte* block, int64_t count, DataType dtype,
                                                 ReduceOp op) {
  const auto esize = static_cast<int64_t>(DataTypeSize(dtype));
  const int32_t hosts = layout().cross_size;
  if (ChooseCrossStep(count, count * esize, hosts) == CrossStep::kAllreduce) {
    return cross_->Allreduce(block, block, count, dtype, op);
  }
  // In place: the reduce-scatter leaves this member's part at the front, which moves to its
  // place before the allgather.
  const std::vector<int64_t> parts = ucx::EvenBlocks(count, hosts);
  const std::vector<int64_t> offsets = ucx::BlockOffsets(parts);
  const auto c = static_cast<size_t>(cross_->rank());
  CHORUS_RETURN_IF_ERROR(cross_->ReduceScatter(block, block, parts, dtype, op));
  std::byte* mine = block + offsets[c] * esize;
  if (offsets[c] > 0 && parts[c] > 0) {
    std::memmove(mine, block, static_cast<size_t>(parts[c] * esize));
  }
  std::vector<int64_t> part_bytes(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) part_bytes[p] = parts[p] * esize;
  return cross_->Allgatherv(mine, block, part_bytes);
}

absl::Status HierarchicalBackend::Allgatherv(const void* send, void* recv,
                                             absl::Span<const int64_t> recv_bytes) {
  int64_t total = 0;
  for (int64_t b : recv_bytes) total += b;
  if (recv_bytes.size() != static_cast<size_t>(size()) ||
      ChooseAllgather(modes_.allgather, plan_, total) == CollectiveAlgorithm::kFlat) {
    ++counters_.flat_allgathers;
    return flat_->Allgatherv(send, recv, recv_bytes);  // validates the arguments
  }
  ++counters_.hierarchical_allgathers;
  return HierarchicalAllgatherv(send, recv, recv_bytes);
}

absl::Status HierarchicalBackend::HierarchicalAllgatherv(const void* send, void* recv,
                                                         absl::Span<const int64_t> recv_bytes) {
  const HierarchyLayout& layout = this->layout();
  const int L = layout.local_size, H = layout.cross_size;
  const auto n = static_cast<size_t>(size());
  for (int64_t b : recv_bytes) {
    if (b < 0) return absl::InvalidArgumentError("Allgatherv: a negative byte count");
  }
  // Where each block goes in `recv` (set-rank order) and in host-major order (hosts in order,
  // each host's members in local order): the order the cross exchange moves them in.
  const std::vector<int64_t> offset = ucx::BlockOffsets(recv_bytes);
  std::vector<int64_t> grid_bytes(n);
  for (size_t i = 0; i < n; ++i) grid_bytes[i] = recv_bytes[layout.member[i]];
  const std::vector<int64_t> grid_offset = ucx::BlockOffsets(grid_bytes);
  std::vector<int64_t> host_bytes(static_cast<size_t>(H), 0);
  for (size_t i = 0; i < n; ++i) host_bytes[i / static_cast<size_t>(L)] += grid_bytes[i];
  const int64_t total = grid_offset.back() + grid_bytes.back();

  const int me = rank();
  const int h = layout.host[me];
  const bool root = layout.local[me] == 0;  // the host's first member
  // The root assembles host-major order in `recv` itself when that is set-rank order.
  std::vector<std::byte> scratch;
  std::byte* grid = Bytes(recv);
  if (root && !layout.host_major) {
    scratch.resize(static_cast<size_t>(total));
    grid = scratch.data();
  }

  // 1. Gather the host's blocks on its root, as an Alltoallv in which only the root receives.
  std::vector<int64_t> send_bytes(L, 0), send_offsets(L, 0), recv_blocks(L, 0), recv_offsets(L, 0);
  if (root) {
    const size_t first = static_cast<size_t>(h) * static_cast<size_t>(L);
    // Its own block is copied (it may already be in place: `send` inside `recv`).
    std::byte* own = grid + grid_offset[first];
    if (recv_bytes[me] > 0 && own != send) {
      std::memmove(own, send, static_cast<size_t>(recv_bytes[me]));
    }
    for (int j = 1; j < L; ++j) {
      recv_blocks[j] = grid_bytes[first + j];
      recv_offsets[j] = grid_offset[first + j];
    }
  } else {
    send_bytes[0] = recv_bytes[me];
  }
  CHORUS_RETURN_IF_ERROR(
      local_->Alltoallv(send, send_bytes, send_offsets, grid, recv_blocks, recv_offsets));

  if (root) {
    // 2. The hosts' blocks among the roots (the cross group of local index 0, in host order).
    const int64_t host_offset = grid_offset[static_cast<size_t>(h) * static_cast<size_t>(L)];
    CHORUS_RETURN_IF_ERROR(cross_->Allgatherv(grid + host_offset, grid, host_bytes));
    // Into set-rank order.
    if (!layout.host_major) {
      for (size_t i = 0; i < n; ++i) {
        if (grid_bytes[i] == 0) continue;
        std::memcpy(Bytes(recv) + offset[layout.member[i]], grid + grid_offset[i],
                    static_cast<size_t>(grid_bytes[i]));
      }
    }
  }
  // 3. The whole result from the root to the rest of the host.
  return local_->Broadcast(recv, total, 0);
}

}  // namespace chorus::ops
