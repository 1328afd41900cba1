// File: runtime/ucx/ucx_controller.cc
#include "runtime/ucx/ucx_controller.h"

#include <cstring>
#include <numeric>
#include <utility>

#include "base/status_macros.h"
#include "ops/ucx/algorithms/binomial_broadcast.h"
#include "ops/ucx/algorithms/chain_broadcast.h"
#include "ops/ucx/algorithms/common.h"
#include "ops/ucx/algorithms/dissemination_barrier.h"
#include "ops/ucx/algorithms/recursive_doubling_allreduce.h"
#include "ops/ucx/algorithms/ring_allreduce.h"
#include "ops/ucx/tag_transport_view.h"

namespace chorus::runtime {

absl::StatusOr<std::unique_ptr<UcxController>> UcxController::Create(
    const Topology& topology, std::unique_ptr<ops::UcxTransport> transport,
    AddressExchange& exchange, UcxControllerOptions options) {
  if (transport == nullptr) return absl::InvalidArgumentError("UcxController: null transport");
  CHORUS_ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                          exchange.AllGather(transport->WorkerAddress()));
  if (addresses.size() != static_cast<size_t>(topology.size)) {
    return absl::InvalidArgumentError("UcxController: the address exchange returned " +
                                      std::to_string(addresses.size()) +
                                      " addresses for a world of " + std::to_string(topology.size));
  }
  CHORUS_RETURN_IF_ERROR(transport->Connect(topology.rank, addresses));
  CHORUS_ASSIGN_OR_RETURN(
      std::unique_ptr<UcxController> controller,
      CreateOnTransport(topology, std::shared_ptr<ops::TagTransport>(std::move(transport)),
                        options));
  // Every rank has connected: the world is formed.
  CHORUS_RETURN_IF_ERROR(controller->Barrier());
  return controller;
}

absl::StatusOr<std::unique_ptr<UcxController>> UcxController::CreateOnTransport(
    const Topology& topology, std::shared_ptr<ops::TagTransport> world,
    UcxControllerOptions options) {
  if (world == nullptr) return absl::InvalidArgumentError("UcxController: null transport");
  if (topology.rank != world->rank() || topology.size != world->size()) {
    return absl::InvalidArgumentError(
        "UcxController: topology says rank " + std::to_string(topology.rank) + " of " +
        std::to_string(topology.size) + ", the transport rank " + std::to_string(world->rank()) +
        " of " + std::to_string(world->size()));
  }
  std::vector<int> all(static_cast<size_t>(world->size()));
  std::iota(all.begin(), all.end(), 0);
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<ops::TagTransportView> control,
                          ops::TagTransportView::Create(world, std::move(all), /*space=*/0));
  return std::unique_ptr<UcxController>(
      new UcxController(topology, std::move(world), std::move(control), std::move(options)));
}

UcxController::UcxController(const Topology& topology, std::shared_ptr<ops::TagTransport> world,
                             std::unique_ptr<ops::TagTransport> control,
                             UcxControllerOptions options)
    : topology_(topology),
      world_(std::move(world)),
      control_(std::move(control)),
      options_(std::move(options)) {}

uint64_t UcxController::NextTag() { return calls_++ % (ops::kMaxViewTag + 1); }

absl::Status UcxController::GatherToRoot(const std::string& mine, std::vector<std::string>* all) {
  all->clear();
  const uint64_t tag = NextTag();
  const int n = size();
  ops::ucx::Outstanding pending(control_.get());
  if (rank() != 0) {
    // Length first, then the bytes: the root sizes its receive from the length.
    const uint64_t length = mine.size();
    CHORUS_RETURN_IF_ERROR(pending.Add(control_->Isend(0, tag, &length, sizeof(length))).status());
    CHORUS_RETURN_IF_ERROR(
        pending.Add(control_->Isend(0, tag, mine.data(), static_cast<int64_t>(mine.size())))
            .status());
    return pending.WaitAll();
  }
  std::vector<uint64_t> lengths(static_cast<size_t>(n), 0);
  for (int r = 1; r < n; ++r) {
    CHORUS_RETURN_IF_ERROR(
        pending.Add(control_->Irecv(r, tag, &lengths[static_cast<size_t>(r)], sizeof(uint64_t)))
            .status());
  }
  CHORUS_RETURN_IF_ERROR(pending.WaitAll());
  std::vector<std::string> gathered(static_cast<size_t>(n));
  gathered[0] = mine;
  for (int r = 1; r < n; ++r) {
    std::string& s = gathered[static_cast<size_t>(r)];
    s.resize(static_cast<size_t>(lengths[static_cast<size_t>(r)]));
    CHORUS_RETURN_IF_ERROR(
        pending.Add(control_->Irecv(r, tag, s.data(), static_cast<int64_t>(s.size()))).status());
  }
  CHORUS_RETURN_IF_ERROR(pending.WaitAll());
  *all = std::move(gathered);
  return absl::OkStatus();
}

absl::Status UcxController::BroadcastFromRoot(std::string* data) {
  const uint64_t length_tag = NextTag(), data_tag = NextTag();
  uint64_t length = data->size();
  CHORUS_RETURN_IF_ERROR(
      ops::ucx::BinomialBroadcast(control_.get()).Run(&length, sizeof(length), 0, length_tag));
  if (rank() != 0) data->resize(static_cast<size_t>(length));
  if (length == 0 || size() == 1) return absl::OkStatus();
  const int64_t bytes = static_cast<int64_t>(length);
  if (bytes <= options_.backend.tree_broadcast_max_bytes) {
    return ops::ucx::BinomialBroadcast(control_.get()).Run(data->data(), bytes, 0, data_tag);
  }
  return ops::ucx::ChainBroadcast(control_.get(), options_.backend.piece_bytes)
      .Run(data->data(), bytes, 0, data_tag);
}

absl::Status UcxController::AllreduceBitAnd(absl::Span<uint64_t> bits) {
  const uint64_t tag = NextTag();
  if (bits.empty() || size() == 1) return absl::OkStatus();
  const ops::ucx::Reduction reduction = ops::ucx::Reduction::BitAnd64();
  const int64_t count = static_cast<int64_t>(bits.size());
  if (count * 8 <= options_.backend.recursive_doubling_max_bytes || count < size()) {
    return ops::ucx::RecursiveDoublingAllreduce(control_.get(), &bit_scratch_)
        .Run(bits.data(), bits.data(), count, reduction, tag);
  }
  return ops::ucx::RingAllreduce(control_.get(),
                                 {options_.backend.piece_bytes, options_.backend.ring_depth},
                                 &bit_ring_scratch_)
      .Run(bits.data(), bits.data(), count, reduction, tag);
}

absl::Status UcxController::Barrier() {
  return ops::ucx::DisseminationBarrier(control_.get()).Run(NextTag());
}

absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> UcxController::CreateBackend(
    absl::Span<const int32_t> ranks) {
  // `ranks` is the same on every rank (negotiated), so every rank fails these checks alike and
  // takes the same tag space.
  if (ranks.empty()) return absl::InvalidArgumentError("CreateBackend: empty rank set");
  bool member = false;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size() || (i > 0 && ranks[i] <= ranks[i - 1])) {
      return absl::InvalidArgumentError(
          "CreateBackend: ranks must be ascending, distinct and in [0, " + std::to_string(size()) +
          "); got " + std::to_string(ranks[i]) + " at position " + std::to_string(i));
    }
    member = member || ranks[i] == rank();
  }
  CHORUS_ASSIGN_OR_RETURN(const uint32_t space, NextSpace());
  if (!member) return std::unique_ptr<ops::CollectiveBackend>();
  CHORUS_ASSIGN_OR_RETURN(
      std::unique_ptr<ops::TagTransportView> view,
      ops::TagTransportView::Create(world_, std::vector<int>(ranks.begin(), ranks.end()), space));
  return std::unique_ptr<ops::CollectiveBackend>(
      new ops::UcxBackend(std::move(view), options_.backend));
}

absl::StatusOr<uint32_t> UcxController::NextSpace() {
  if (next_space_ > ops::kMaxTagSpace) {
    return absl::ResourceExhaustedError("CreateBackend: all " + std::to_string(ops::kMaxTagSpace) +
                                        " tag spaces of this UCX world are used");
  }
  return next_space_++;
}

absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> UcxController::CreateGroupBackend(
    absl::Span<const int32_t> group_of_rank) {
  // The partition is the same on every rank, so every rank fails these checks alike and takes
  // the same tag space.
  if (group_of_rank.size() != static_cast<size_t>(size())) {
    return absl::InvalidArgumentError(
        "CreateGroupBackend: " + std::to_string(group_of_rank.size()) +
        " group entries for a world of " + std::to_string(size()));
  }
  for (int32_t g : group_of_rank) {
    if (g < -1) {
      return absl::InvalidArgumentError("CreateGroupBackend: group id " + std::to_string(g) +
                                        " is below -1");
    }
  }
  CHORUS_ASSIGN_OR_RETURN(const uint32_t space, NextSpace());
  const int32_t mine = group_of_rank[static_cast<size_t>(rank())];
  if (mine < 0) return std::unique_ptr<ops::CollectiveBackend>();
  std::vector<int> members;
  for (int r = 0; r < size(); ++r) {
    if (group_of_rank[static_cast<size_t>(r)] == mine) members.push_back(r);
  }
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<ops::TagTransportView> view,
                          ops::TagTransportView::Create(world_, std::move(members), space));
  return std::unique_ptr<ops::CollectiveBackend>(
      new ops::UcxBackend(std::move(view), options_.backend));
}

}  // namespace chorus::runtime
