// File: runtime/progress/watched_backend.h
//
// A CollectiveBackend whose every call is bracketed as a ProgressWatchdog::BlockingCall
// (runtime/progress/progress_watchdog.h): the data plane of a transport whose collectives block and
// cannot give up by themselves (MPI). While the watchdog is not armed the calls just pass through.
//
// Thread-safety: as the wrapped backend (the loop thread only).
#ifndef CHORUS_RUNTIME_PROGRESS_WATCHED_BACKEND_H_
#define CHORUS_RUNTIME_PROGRESS_WATCHED_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ops/collective_backend.h"
#include "runtime/progress/progress_watchdog.h"

namespace chorus::runtime {

class WatchedBackend : public ops::CollectiveBackend {
 public:
  // `watchdog` is borrowed and outlives this backend. `world_ranks`: the set's members as
  // world ranks (ascending, this rank included), named in reports as the ranks a call waits on.
  WatchedBackend(std::unique_ptr<ops::CollectiveBackend> inner, ProgressWatchdog* watchdog,
                 const std::vector<int32_t>& world_ranks, int32_t world_rank);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  absl::Status Run(const ops::CollectiveCall& call) override;

 private:
  std::unique_ptr<ops::CollectiveBackend> inner_;
  ProgressWatchdog* watchdog_;
  std::vector<int32_t> peers_;  // the set's members but this rank (world ranks)
  // "the MPI data plane's Allreduce", ... by CollectiveCall index (stable for BlockingCall).
  std::string call_names_[std::variant_size_v<ops::CollectiveCall>];
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_PROGRESS_WATCHED_BACKEND_H_
