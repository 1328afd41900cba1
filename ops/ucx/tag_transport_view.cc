// File: ops/ucx/tag_transport_view.cc
#include "ops/ucx/tag_transport_view.h"

#include <string>
#include <utility>

namespace chorus::ops {

absl::StatusOr<std::unique_ptr<TagTransportView>> TagTransportView::Create(
    std::shared_ptr<TagTransport> world, std::vector<int> world_ranks, uint32_t space) {
  if (world == nullptr) return absl::InvalidArgumentError("TagTransportView: null transport");
  if (space > kMaxTagSpace) {
    return absl::InvalidArgumentError("TagTransportView: tag space " + std::to_string(space) +
                                      " exceeds " + std::to_string(kMaxTagSpace));
  }
  int rank = -1;
  std::vector<bool> seen(static_cast<size_t>(world->size()), false);
  for (size_t i = 0; i < world_ranks.size(); ++i) {
    const int w = world_ranks[i];
    if (w < 0 || w >= world->size() || seen[static_cast<size_t>(w)]) {
      return absl::InvalidArgumentError("TagTransportView: world rank " + std::to_string(w) +
                                        " is out of range or repeated");
    }
    seen[static_cast<size_t>(w)] = true;
    if (w == world->rank()) rank = static_cast<int>(i);
  }
  if (rank < 0) {
    return absl::InvalidArgumentError("TagTransportView: world rank " +
                                      std::to_string(world->rank()) + " is not in the view");
  }
  return std::unique_ptr<TagTransportView>(
      new TagTransportView(std::move(world), std::move(world_ranks), rank, space));
}

TagTransportView::TagTransportView(std::shared_ptr<TagTransport> world,
                                   std::vector<int> world_ranks, int rank, uint32_t space)
    : world_(std::move(world)), world_ranks_(std::move(world_ranks)), rank_(rank), space_(space) {}

absl::Status TagTransportView::Check(int peer, uint64_t tag) const {
  if (peer < 0 || peer >= size()) {
    return absl::InvalidArgumentError("TagTransportView: peer " + std::to_string(peer) +
                                      " is not a rank of this view of " + std::to_string(size()));
  }
  if (tag > kMaxViewTag) {
    return absl::InvalidArgumentError("TagTransportView: tag " + std::to_string(tag) + " exceeds " +
                                      std::to_string(kMaxViewTag));
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestId> TagTransportView::Isend(int peer, uint64_t tag, const void* data,
                                                  int64_t bytes) {
  if (absl::Status st = Check(peer, tag); !st.ok()) return st;
  return world_->Isend(world_rank(peer), (uint64_t{space_} << kViewTagBits) | tag, data, bytes);
}

absl::StatusOr<RequestId> TagTransportView::Irecv(int peer, uint64_t tag, void* data,
                                                  int64_t bytes) {
  if (absl::Status st = Check(peer, tag); !st.ok()) return st;
  return world_->Irecv(world_rank(peer), (uint64_t{space_} << kViewTagBits) | tag, data, bytes);
}

absl::Status TagTransportView::Wait(absl::Span<const RequestId> ids) { return world_->Wait(ids); }

}  // namespace chorus::ops
