// File: ops/ucx/tag_transport_view.h
//
// TagTransportView: a TagTransport over a subset of a world transport's ranks with a private
// tag space. View rank i is world rank world_ranks[i]; view tag t is world tag
// (space << kViewTagBits) | t. Views with different spaces never match each other's messages,
// so the control plane (space 0 in UcxController) and every process set's data plane share one
// world transport.
//
// Ownership: the view shares ownership of the world transport, so data planes may outlive the
// controller that created them. Thread-safety: as the world transport (one thread at a time,
// across all views of that world).
#ifndef CHORUS_OPS_UCX_TAG_TRANSPORT_VIEW_H_
#define CHORUS_OPS_UCX_TAG_TRANSPORT_VIEW_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

#include "ops/ucx/tag_transport.h"

namespace chorus::ops {

class TagTransportView : public TagTransport {
 public:
  // `world_ranks`: distinct ranks of `world`, including world->rank(), in the view's rank order.
  // `space` <= kMaxTagSpace. InvalidArgument otherwise; REQUIRES world->max_tag() >=
  // kMaxWorldTag.
  static absl::StatusOr<std::unique_ptr<TagTransportView>> Create(
      std::shared_ptr<TagTransport> world, std::vector<int> world_ranks, uint32_t space);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(world_ranks_.size()); }
  uint64_t max_tag() const override { return kMaxViewTag; }
  uint32_t space() const { return space_; }
  int world_rank(int view_rank) const { return world_ranks_[static_cast<size_t>(view_rank)]; }

  absl::StatusOr<RequestId> Isend(int peer, uint64_t tag, const void* data, int64_t bytes) override;
  absl::StatusOr<RequestId> Irecv(int peer, uint64_t tag, void* data, int64_t bytes) override;
  absl::Status Wait(absl::Span<const RequestId> ids) override;

 private:
  TagTransportView(std::shared_ptr<TagTransport> world, std::vector<int> world_ranks, int rank,
                   uint32_t space);
  absl::Status Check(int peer, uint64_t tag) const;

  std::shared_ptr<TagTransport> world_;
  std::vector<int> world_ranks_;
  int rank_;
  uint32_t space_;
};

}  // namespace chorus::ops

#endif  // CHORUS_OPS_UCX_TAG_TRANSPORT_VIEW_H_
