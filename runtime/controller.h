// File: runtime/controller.h
//
// The control plane: the few primitives negotiation needs, over ALL ranks of the job (the world
// of this runtime), plus the factory for per-process-set data planes. Implementations:
// MpiController (runtime/mpi/), InProcessController (test/support/, N ranks as N threads).
//
// Every method except the accessors is collective over the world: all ranks call it, in the
// same order, from their background thread. Blocking. Errors are Status (Unavailable when a peer
// is lost); nothing throws.
// Thread-safety: thread-compatible; background-thread-only after construction.
#ifndef CHORUS_RUNTIME_CONTROLLER_H_
#define CHORUS_RUNTIME_CONTROLLER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "chorus/chorus.h"
#include "ops/collective_backend.h"

namespace chorus::runtime {

class ProgressWatchdog;  // runtime/progress/progress_watchdog.h

class Controller {
 public:
  virtual ~Controller() = default;

  virtual const Topology& topology() const = 0;
  int rank() const { return topology().rank; }
  int size() const { return topology().size; }
  // "MPI", "in-process", ... for logs and --check-build style reports.
  virtual std::string name() const = 0;

  // Rank 0 receives every rank's `mine` in rank order in *all (resized to size()); on other
  // ranks *all is left empty.
  virtual absl::Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) = 0;

  // Rank 0's *data replaces *data on every other rank.
  virtual absl::Status BroadcastFromRoot(std::string* data) = 0;

  // bits[i] = AND over all ranks of bits[i]. (An OR is an AND of complements.)
  virtual absl::Status AllreduceBitAnd(absl::Span<uint64_t> bits) = 0;

  virtual absl::Status Barrier() = 0;

  // Creates the data plane for the set of world ranks `ranks` (ascending, non-empty). Collective
  // over the whole world, even ranks outside the set, which get a null pointer back.
  virtual absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> CreateBackend(
      absl::Span<const int32_t> ranks) = 0;

  // Creates the data planes of a partition of world ranks into groups: group_of_rank[r] (one
  // entry per world rank) is world rank r's group, any id >= 0, or -1 for none. This rank gets
  // the backend over the ranks of its group (ranks ascending by world rank), or a null pointer
  // when it is in none. Collective over the whole world, like CreateBackend; every rank passes
  // the same partition. Used for the local and cross groups of hierarchical collectives
  // (ops/hierarchical/hierarchical_backend.h).
  virtual absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> CreateGroupBackend(
      absl::Span<const int32_t> group_of_rank) = 0;

  // The no-progress bound of this controller's calls and of the data planes it creates
  // (runtime/progress/progress_watchdog.h), owned by the controller; the loop arms it once its
  // handshake is done and tells it what it works on. Null when the controller has none: its
  // transport notices lost peers or bounds its waits by itself (UCX:
  // UcxTransportOptions::no_progress_timeout), or the bound is disabled.
  virtual ProgressWatchdog* progress_watchdog() { return nullptr; }
};

// The world ranks that have a problem (`here`: this rank has one), ascending: one bit per rank
// through AllreduceBitAnd. Collective over the world.
absl::StatusOr<std::vector<int>> RanksWithProblem(Controller& controller, bool here);

// Fails every rank together when some have a problem: OK when none has; else this rank's
// `problem` when it has one (by convention it starts "rank R: " where it is this rank's own),
// or, on a rank without one, "chorus init failed on rank 1 (rank 0 is fine): `there`; see its
// error" ("on ranks 1, 3", the first few). chorusrun reads "chorus init failed on rank R" back to
// name the rank that failed (launcher/process/failure_report.h). Collective over the world.
absl::Status AgreeNoProblem(Controller& controller, const std::string& problem,
                            absl::string_view there);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_CONTROLLER_H_
