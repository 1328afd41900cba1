// File: runtime/runtime.h
//
// One chorus runtime instance: the submission queue, handle table, process-set registry and
// the background loop over a Controller. The process-wide API (chorus.h, the C ABI) wraps one
// instance over MPI; unit tests create N instances over an in-process fabric, one per
// simulated rank.
//
// Thread-safety: thread-safe (see chorus.h for the contracts of each call).
#ifndef CHORUS_RUNTIME_RUNTIME_H_
#define CHORUS_RUNTIME_RUNTIME_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "chorus/chorus.h"
#include "ops/gpu_platform.h"
#include "runtime/background_loop.h"
#include "runtime/config.h"
#include "runtime/controller.h"
#include "runtime/entry_pool.h"
#include "runtime/handle_table.h"
#include "runtime/process_set_registry.h"
#include "runtime/submission_queue.h"

namespace chorus::runtime {

class Runtime {
 public:
  // Starts the background loop (collective over the controller's world). `process_sets`:
  // extra sets, ids 1, 2, ... in this order. GPU tensors run on `gpu_platform`; null means
  // this build's (ops::gpu::DefaultGpuPlatform).
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(
      Config config, std::unique_ptr<Controller> controller,
      std::vector<std::vector<int32_t>> process_sets = {},
      std::shared_ptr<ops::gpu::GpuPlatform> gpu_platform = nullptr);
  // Shuts down if still running.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Topology& topology() const { return topology_; }
  // The controller's name: "MPI", "UCX", ...
  const std::string& controller_name() const { return controller_name_; }

  absl::StatusOr<Handle> Enqueue(OpRequest request, DoneCallback done = nullptr);
  // chorus::EnqueueFrom.
  absl::StatusOr<Handle> EnqueueFrom(OpRequest& request, DoneCallback done = nullptr);
  absl::StatusOr<std::vector<Handle>> EnqueueGroup(std::vector<OpRequest> requests);
  absl::StatusOr<bool> Poll(Handle handle) const { return handles_.Poll(handle); }
  absl::Status Wait(Handle handle) const { return handles_.Wait(handle); }
  absl::StatusOr<OpResult> Release(Handle handle) { return handles_.Release(handle); }
  absl::StatusOr<std::optional<OpResult>> TryRelease(Handle handle) {
    return handles_.TryRelease(handle);
  }

  // Records a timeline into `path` (docs/timeline.md) from the next cycle on. REQUIRES the
  // CHORUS_TIMELINE (HOROVOD_TIMELINE) variable to be set (a path or DYNAMIC), as in Horovod:
  // FailedPrecondition otherwise. Local to this rank (not collective).
  absl::Status StartTimeline(const std::string& path, bool mark_cycles);
  // Ends the recording; returns once the file is complete. OK when nothing is recorded.
  absl::Status StopTimeline();

  // Test-only view of the loop's counters. REQUIRES: not shut down.
  const BackgroundLoop::Counters& TEST_counters() const { return loop_->counters(); }

  // Collective: stops the loop on every rank after the current cycle; pending ops complete
  // with Aborted. Idempotent.
  void Shutdown();

 private:
  explicit Runtime(Config config);
  // Checks `request` against this rank's view (ValidateRequest) and builds its entry
  // (TranslateRequest), which takes the request's contents (swapped for the recycled entry's
  // spare buffers); GPU entries also get their ready event (PrepareGpuEntry).
  // `group_key`/`group_size` mark grouped ops.
  absl::StatusOr<std::unique_ptr<TensorEntry>> MakeEntry(OpRequest& request,
                                                         const std::string& group_key,
                                                         int32_t group_size);
  // The process set an op runs in, as this rank sees it.
  struct ProcessSetView {
    bool global = true;  // the global set (id 0): every rank, never removed
    int32_t size = 0;    // number of ranks
  };
  // Everything this rank can check alone, in order: a known op type; a name (AutoName names
  // unnamed barrier/join/process-set ops first, hence non-const); the process set
  // (CheckProcessSetMembership); a data op's tensors and rules (ValidateDataOp); an
  // add_process_set's ranks (CheckProcessSetRanks). InvalidArgument naming the tensor, or
  // Unimplemented for Adasum. Cross-rank agreement is the coordinator's (runtime/coordinator.h).
  absl::Status ValidateRequest(OpRequest& request);
  // The op's set exists and holds this rank (remove_process_set: exists and is not the global
  // set; add_process_set and join: no set to check).
  absl::StatusOr<ProcessSetView> CheckProcessSetMembership(const OpRequest& request) const;
  // allreduce ... alltoall, in `set`: valid input (and allreduce output) tensors, reduce op,
  // wire dtype, GPU dtype support, a first dimension where one is split, the broadcast root
  // (CheckRootRank) and alltoall splits.
  absl::Status ValidateDataOp(const OpRequest& request, const ProcessSetView& set) const;
  // Takes an entry from the pool, fills its wire request from `request` and swaps `request`
  // into it (the request keeps the entry's spare buffers). Stamps the enqueue time when a
  // timeline is configured. REQUIRES: ValidateRequest(request) is OK.
  std::unique_ptr<TensorEntry> TranslateRequest(OpRequest& request, const std::string& group_key,
                                                int32_t group_size);
  // Names barrier/join/process-set ops left unnamed, identically on every rank.
  void AutoName(OpRequest& request);
  // broadcast: the root (a world rank) exists and belongs to the op's process set.
  absl::Status CheckRootRank(const OpRequest& request, bool global_set) const;
  // GPU tensors: the device is usable and the one this process drives; records the entry's
  // ready event on the op's stream.
  absl::Status PrepareGpuEntry(TensorEntry& entry);

  Config config_;
  Topology topology_;
  std::string controller_name_;
  EntryPool entry_pool_;  // outlives loop_
  SubmissionQueue queue_;
  ProcessSetRegistry registry_;
  // A thread blocking on an op ends the loop's batching window (SubmissionQueue::Hurry).
  HandleTable handles_{[this] { queue_.Hurry(); }};
  std::unique_ptr<timeline::Timeline> timeline_;  // outlives loop_
  std::unique_ptr<BackgroundLoop> loop_;

  std::shared_ptr<ops::gpu::GpuPlatform> gpu_platform_;
  // The GPU this process drives: the device of its first GPU tensor (-1 until then).
  Mutex gpu_mu_;
  int32_t gpu_device_ ABSL_GUARDED_BY(gpu_mu_) = -1;
  Mutex name_mu_;
  // (op type, process set) -> number of unnamed ops of that kind so far.
  std::map<std::pair<int32_t, int32_t>, int64_t> auto_names_ ABSL_GUARDED_BY(name_mu_);
  Mutex shutdown_mu_;  // serialises Shutdown
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_RUNTIME_H_
