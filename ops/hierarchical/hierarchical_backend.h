// File: ops/hierarchical/hierarchical_backend.h
//
// HierarchicalBackend: Horovod's hierarchical allreduce and allgather as one composition over
// three CollectiveBackends of a process set, whatever their transport (MPI communicators, UCX
// views, the unit tier's in-process fabric): the set's flat backend, the backend of this
// member's host (its "local" group, ranks in set-rank order) and the backend of the members
// with its local index on every host (its "cross" group, ranks in set-rank order). Layout and
// decisions: ops/hierarchical/hierarchy_layout.h; costs and measurements: docs/hierarchical.md.
//
//   Allreduce (count elements, split into local_size blocks, the first count % local_size one
//   element larger):
//     1. local ReduceScatter: the member with local index l holds block l reduced over its host;
//     2. cross allreduce of block l among the members with local index l on every host (one
//        Allreduce of a small block; a large one as ReduceScatter + Allgatherv, so that every
//        host's link carries the same share whatever the transport: ChooseCrossStep);
//     3. local Allgatherv of the blocks: every member holds the whole result.
//   Allgatherv:
//     1. local gather to the host's first member (an Alltoallv in which only it receives);
//     2. cross Allgatherv of the hosts' blocks among the hosts' first members;
//     3. local Broadcast of the whole result from the host's first member.
//
// Every call whose mode is off, or that ChooseAllreduce/ChooseAllgather sends to the flat
// algorithm (a piece smaller than the local size), runs on the flat backend; every other
// collective always does. The modes are set per batch (set_modes) by the caller, identically on
// every member at the same point of the global order, so every member runs the same
// sub-collectives in the same order on every sub-backend (Note [One global execution order] in
// runtime/loop/background_loop.h). Results are bitwise identical on every member (the allgather
// copies what one member computed); integer results equal the flat algorithm's, floating-point
// ones differ in summation order only (docs/hierarchical.md gives the bound).
//
// Errors: the sub-backends', unchanged (a lost peer is Unavailable from whichever call noticed).
// Thread-safety: thread-compatible: the runtime's background thread only, as its sub-backends.
#ifndef CHORUS_OPS_HIERARCHICAL_HIERARCHICAL_BACKEND_H_
#define CHORUS_OPS_HIERARCHICAL_HIERARCHICAL_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "ops/collective_backend.h"
#include "ops/hierarchical/hierarchy_layout.h"

namespace chorus::ops {

// Which collectives run hierarchically (CHORUS_HIERARCHICAL_ALLREDUCE / _ALLGATHER).
struct HierarchyModes {
  bool allreduce = false;
  bool allgather = false;
  friend bool operator==(const HierarchyModes&, const HierarchyModes&) = default;
};

class HierarchicalBackend : public CollectiveBackend {
 public:
  // `plan` must be kHierarchical for the set of `flat`; `local` and `cross` are this member's
  // groups of it (see above). InvalidArgument when the backends' ranks and sizes do not match
  // the layout.
  static absl::StatusOr<std::unique_ptr<HierarchicalBackend>> Create(
      std::unique_ptr<CollectiveBackend> flat, std::unique_ptr<CollectiveBackend> local,
      std::unique_ptr<CollectiveBackend> cross, HierarchyPlan plan);

  // Takes effect from the next call. Every member must set the same modes at the same point.
  void set_modes(HierarchyModes modes) { modes_ = modes; }
  HierarchyModes modes() const { return modes_; }
  const HierarchyPlan& plan() const { return plan_; }
  const HierarchyLayout& layout() const { return plan_.layout; }
  CollectiveBackend& flat() { return *flat_; }
  CollectiveBackend& local() { return *local_; }
  CollectiveBackend& cross() { return *cross_; }

  // Calls that ran each way, for tests and diagnostics.
  struct Counters {
    int64_t hierarchical_allreduces = 0;
    int64_t flat_allreduces = 0;
    int64_t hierarchical_allgathers = 0;
    int64_t flat_allgathers = 0;
  };
  const Counters& counters() const { return counters_; }

  int rank() const override { return flat_->rank(); }
  int size() const override { return flat_->size(); }
  std::string name() const override { return flat_->name(); }
  // Allreduce and Allgatherv choose between the flat backend and the hierarchical composition;
  // every other collective is the flat backend's.
  absl::Status Run(const CollectiveCall& call) override;
  absl::Status Allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op);
  absl::Status Allgatherv(const void* send, void* recv, absl::Span<const int64_t> recv_bytes);

 private:
  HierarchicalBackend(std::unique_ptr<CollectiveBackend> flat,
                      std::unique_ptr<CollectiveBackend> local,
                      std::unique_ptr<CollectiveBackend> cross, HierarchyPlan plan);
  absl::Status HierarchicalAllreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                     ReduceOp op);
  absl::Status HierarchicalAllgatherv(const void* send, void* recv,
                                      absl::Span<const int64_t> recv_bytes);
  // Step 2 of the allreduce: `count` elements at `block`, in place (ChooseCrossStep).
  absl::Status CrossAllreduce(std::byte* block, int64_t count, DataType dtype, ReduceOp op);

  std::unique_ptr<CollectiveBackend> flat_;
  std::unique_ptr<CollectiveBackend> local_;
  std::unique_ptr<CollectiveBackend> cross_;
  HierarchyPlan plan_;
  HierarchyModes modes_;
  Counters counters_;
};

}  // namespace chorus::ops

#endif  // CHORUS_OPS_HIERARCHICAL_HIERARCHICAL_BACKEND_H_
