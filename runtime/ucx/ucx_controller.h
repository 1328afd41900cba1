// File: runtime/ucx/ucx_controller.h
//
// Controller over UCX, for MPI-less and elastic launches: the control plane (tag space 0) and
// every process set's data plane (spaces 1, 2, ... in CreateBackend order, the same on every
// rank) share one world transport (ops/ucx/ucx_transport.h). Create() forms the world (Note
// [Forming a UCX world] in docs/ucx_transport.md); the topology is the caller's.
//
// Lifetime: backends share ownership of the world transport, so they may outlive the controller.
// Errors: as Controller; after an Unavailable or Internal error the world is unusable (the
// transport's errors are final) and a new controller must be formed.
// Thread-safety: thread-compatible: one thread at a time (the background thread once running),
// shared with the backends it created (all drive the same transport).
// Which algorithm each control collective runs: docs/ucx_transport.md.
#ifndef CHORUS_RUNTIME_UCX_UCX_CONTROLLER_H_
#define CHORUS_RUNTIME_UCX_UCX_CONTROLLER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "ops/ucx/tag_transport.h"
#include "ops/ucx/ucx_backend.h"
#include "ops/ucx/ucx_transport.h"
#include "runtime/controller.h"
#include "runtime/ucx/address_exchange.h"

namespace chorus::runtime {

struct UcxControllerOptions {
  // Used by every data plane and by the control plane's algorithms. Identical on every rank.
  ops::UcxBackendOptions backend;
};

class UcxController : public Controller {
 public:
  // Collective over the world being formed. `topology` is this rank's place in it; `transport`
  // is a fresh, unconnected UcxTransport::Create(); `exchange` is borrowed for the call.
  // Errors: the exchange's; InvalidArgument when it returns other than topology.size addresses
  // or this rank's is not at topology.rank; Unavailable when a rank cannot be reached.
  static absl::StatusOr<std::unique_ptr<UcxController>> Create(
      const Topology& topology, std::unique_ptr<ops::UcxTransport> transport,
      AddressExchange& exchange, UcxControllerOptions options = {});

  // On a world transport that is already connected (any TagTransport; unit tests use the
  // in-memory one). Local: no communication. InvalidArgument when `topology` disagrees with the
  // transport's rank and size.
  static absl::StatusOr<std::unique_ptr<UcxController>> CreateOnTransport(
      const Topology& topology, std::shared_ptr<ops::TagTransport> world,
      UcxControllerOptions options = {});

  const Topology& topology() const override { return topology_; }
  std::string name() const override { return "UCX"; }
  absl::Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override;
  absl::Status BroadcastFromRoot(std::string* data) override;
  absl::Status AllreduceBitAnd(absl::Span<uint64_t> bits) override;
  absl::Status Barrier() override;
  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> CreateBackend(
      absl::Span<const int32_t> ranks) override;
  // One tag space for the whole partition: its groups are disjoint, so no two of them ever
  // exchange a message.
  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> CreateGroupBackend(
      absl::Span<const int32_t> group_of_rank) override;

 private:
  UcxController(const Topology& topology, std::shared_ptr<ops::TagTransport> world,
                std::unique_ptr<ops::TagTransport> control, UcxControllerOptions options);
  uint64_t NextTag();
  // The next data plane's tag space (the same on every rank: taken in call order).
  absl::StatusOr<uint32_t> NextSpace();

  Topology topology_;
  std::shared_ptr<ops::TagTransport> world_;
  std::unique_ptr<ops::TagTransport> control_;  // tag space 0 over the world
  UcxControllerOptions options_;
  uint64_t calls_ = 0;       // control-plane tags used so far
  uint32_t next_space_ = 1;  // the next data plane's tag space
  // AllreduceBitAnd's algorithms' buffers, kept from one cycle to the next.
  std::vector<std::byte> bit_scratch_;
  ops::ucx::RingScratch bit_ring_scratch_;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_UCX_UCX_CONTROLLER_H_
