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
#include "runtime/background_loop.h"
#include "runtime/config.h"
#include "runtime/controller.h"
#include "runtime/handle_table.h"
#include "ops/gpu_platform.h"
#include "runtime/entry_pool.h"
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
  // Checks `request` against this rank's view and builds its entry, which takes the request's
  // contents (swapped for the recycled entry's spare buffers). `group_key`/`group_size` mark
  // grouped ops.
  absl::StatusOr<std::unique_ptr<TensorEntry>> MakeEntry(OpRequest& request,
                                                        const std::string& group_key,
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
