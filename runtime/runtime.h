// File: runtime/runtime.h
//
// One chorus runtime instance: the submission queue, handle table, process-set registry and
// the background loop over a Controller. The process-wide API (chorus.h, the C ABI) wraps one
// instance over MPI; unit tests create N instances over an in-process fabric, one per
// simulated rank.
//
// Note [Re-forming in place]
// An elastic job changes its world without replacing the runtime (Reform): the old loop stops
// (after a failure it already has; every op it held failed), and a new loop over the new
// world's controller takes its place. What belongs to the world goes with the old loop: the
// controller and its transport, the response cache and negotiation state, the fusion buffers,
// the GPU data plane (its NCCL communicators, aborted on a failure, are created again on the
// first GPU op), every process set but the global one, the per-world timeline file. What
// belongs to the process stays: this object, the handle table (handles of failed ops can still
// be released, with their error), the entry pool's buffers, the submission queue (re-opened),
// the GPU this process drives.
//
// Thread-safety: thread-safe (see chorus.h for the contracts of each call). `world_mu_` guards
// the world's description (config, topology, timeline): an op is validated, translated and
// queued under its reader lock, so it is checked against the world it is queued for; Reform
// swaps them under the writer lock.
#ifndef CHORUS_RUNTIME_RUNTIME_H_
#define CHORUS_RUNTIME_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "chorus/chorus.h"
#include "ops/gpu_platform.h"
#include "runtime/config.h"
#include "runtime/controller.h"
#include "runtime/flight/batch_metrics.h"
#include "runtime/loop/background_loop.h"
#include "runtime/negotiate/process_set_registry.h"
#include "runtime/submit/entry_pool.h"
#include "runtime/submit/handle_table.h"
#include "runtime/submit/op_slots.h"
#include "runtime/submit/submission_queue.h"

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

  Topology topology() const ABSL_LOCKS_EXCLUDED(world_mu_);
  // The controller's name: "MPI", "UCX", ...
  std::string controller_name() const ABSL_LOCKS_EXCLUDED(world_mu_);

  absl::StatusOr<Handle> Enqueue(OpRequest request, DoneCallback done = nullptr);
  // chorus::EnqueueFrom.
  absl::StatusOr<Handle> EnqueueFrom(OpRequest& request, DoneCallback done = nullptr);
  absl::StatusOr<std::vector<Handle>> EnqueueGroup(std::vector<OpRequest> requests);

  // Registered ops (chorus.h, Note [Registered ops] in runtime/submit/op_slots.h).
  absl::StatusOr<OpSlot> RegisterOp(OpRequest request) ABSL_LOCKS_EXCLUDED(world_mu_);
  absl::StatusOr<Handle> Submit(OpSlot slot, const SubmitArgs& args);
  absl::Status UnregisterOp(OpSlot slot);

  absl::StatusOr<bool> Poll(Handle handle) const {
    return IsSlotHandle(handle) ? slots_.Poll(handle) : handles_.Poll(handle);
  }
  absl::Status Wait(Handle handle) const {
    return IsSlotHandle(handle) ? slots_.Wait(handle) : handles_.Wait(handle);
  }
  absl::StatusOr<OpResult> Release(Handle handle) {
    return IsSlotHandle(handle) ? slots_.Release(handle) : handles_.Release(handle);
  }
  absl::StatusOr<std::optional<OpResult>> TryRelease(Handle handle) {
    return IsSlotHandle(handle) ? slots_.TryRelease(handle) : handles_.TryRelease(handle);
  }

  // Records a timeline into `path` (docs/timeline.md) from the next cycle on. REQUIRES the
  // CHORUS_TIMELINE (HOROVOD_TIMELINE) variable to be set (a path or DYNAMIC), as in Horovod:
  // FailedPrecondition otherwise. Local to this rank (not collective).
  absl::Status StartTimeline(const std::string& path, bool mark_cycles);
  // Ends the recording; returns once the file is complete. OK when nothing is recorded.
  absl::Status StopTimeline();

  // Note [Batch metrics]: this process's batch totals over every world, with its rank, world
  // size and controller, as JSON (FormatBatchTotals). Thread-safe; never waits for the loop.
  std::string MetricsJson() const ABSL_LOCKS_EXCLUDED(world_mu_);

  // Test-only view of the loop's counters. REQUIRES: not shut down.
  const BackgroundLoop::Counters& TEST_counters() const { return loop_->counters(); }
  // Test-only: the autotune parameters of the current world and the cycle each took effect in
  // (BackgroundLoop::autotune_history). REQUIRES: not shut down.
  std::vector<Autotuner::Switch> TEST_autotune_history() const { return loop_->autotune_history(); }

  // Collective: stops the loop on every rank after the current cycle; pending ops complete
  // with Aborted, later ones fail with FailedPrecondition(`why`). Idempotent (after a failure
  // the loop has stopped already; the failure stays the reason). `cause`: why this process
  // stops, which the other ranks' failed ops say with this rank (DescribeShutdown).
  void Shutdown(std::string why = "chorus was shut down", std::string cause = "")
      ABSL_LOCKS_EXCLUDED(shutdown_mu_);

  // Re-forms this runtime in place over `controller`'s world (Note [Re-forming in place]):
  // Shutdown(), then a new background loop over `controller` with `config` (the handshake is
  // collective over the new world: every member calls Reform, or Create for a new process).
  // Ops submitted meanwhile wait for the new world. Process sets other than the global one are
  // dropped, unnamed barrier/join/process-set ops are numbered from zero again. On error the
  // runtime stays stopped (every op fails with the error).
  absl::Status Reform(Config config, std::unique_ptr<Controller> controller)
      ABSL_LOCKS_EXCLUDED(shutdown_mu_, world_mu_);

 private:
  explicit Runtime(Config config);
  // Creates the timeline of the world `topology` as `config` describes it.
  static std::unique_ptr<timeline::Timeline> MakeTimeline(const Config& config,
                                                          const Topology& topology);
  // Starts a loop over `controller` (Create, Reform) with the world's description already in
  // place, and re-opens the queue for it. On error the queue is closed with the error.
  absl::Status StartLoop(std::unique_ptr<Controller> controller,
                         std::vector<std::vector<int32_t>> process_sets)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shutdown_mu_, world_mu_);
  // Closes the queue with `why` and joins the loop (nothing when none runs).
  void StopLoop(std::string why, std::string cause = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shutdown_mu_);
  // Checks `request` against this rank's view (ValidateRequest) and builds its entry
  // (TranslateRequest), which takes the request's contents (swapped for the recycled entry's
  // spare buffers); GPU entries also get their ready event (PrepareGpuEntry).
  // `group_key`/`group_size` mark grouped ops.
  absl::StatusOr<std::unique_ptr<TensorEntry>> MakeEntry(OpRequest& request,
                                                         const std::string& group_key,
                                                         int32_t group_size)
      ABSL_SHARED_LOCKS_REQUIRED(world_mu_);
  // The process set an op runs in, as this rank sees it.
  struct ProcessSetView {
    bool global = true;  // the global set (id 0): every rank, never removed
    int32_t size = 0;    // number of ranks
  };
  // Everything this rank can check alone, in order: a known op type; a name (AutoName names
  // unnamed barrier/join/process-set ops first, hence non-const); the process set
  // (CheckProcessSetMembership); a data op's tensors and rules (ValidateDataOp); an
  // add_process_set's ranks (CheckProcessSetRanks). InvalidArgument naming the tensor, or
  // Unimplemented for Adasum. Cross-rank agreement is the coordinator's
  // (runtime/negotiate/coordinator.h).
  absl::Status ValidateRequest(OpRequest& request) ABSL_SHARED_LOCKS_REQUIRED(world_mu_);
  // The op's set exists and holds this rank (remove_process_set: exists and is not the global
  // set; add_process_set and join: no set to check).
  absl::StatusOr<ProcessSetView> CheckProcessSetMembership(const OpRequest& request) const
      ABSL_SHARED_LOCKS_REQUIRED(world_mu_);
  // allreduce ... alltoall, in `set`: valid input (and allreduce output) tensors, reduce op,
  // wire dtype, GPU dtype support, a first dimension where one is split, the broadcast root
  // (CheckRootRank) and alltoall splits.
  absl::Status ValidateDataOp(const OpRequest& request, const ProcessSetView& set) const
      ABSL_SHARED_LOCKS_REQUIRED(world_mu_);
  // Takes an entry from the pool, fills its wire request from `request` and swaps `request`
  // into it (the request keeps the entry's spare buffers). Stamps the enqueue time when a
  // timeline is configured. REQUIRES: ValidateRequest(request) is OK.
  std::unique_ptr<TensorEntry> TranslateRequest(OpRequest& request, const std::string& group_key,
                                                int32_t group_size)
      ABSL_SHARED_LOCKS_REQUIRED(world_mu_);
  // Names barrier/join/process-set ops left unnamed, identically on every rank.
  void AutoName(OpRequest& request);
  // broadcast: the root (a world rank) exists and belongs to the op's process set.
  absl::Status CheckRootRank(const OpRequest& request, bool global_set) const
      ABSL_SHARED_LOCKS_REQUIRED(world_mu_);
  // GPU tensors: the device is usable and the one this process drives (CheckGpuDevice);
  // records the entry's ready event on the op's stream (RecordReadyEvent).
  absl::Status PrepareGpuEntry(TensorEntry& entry);
  absl::Status CheckGpuDevice(const OpRequest& request);
  absl::Status RecordReadyEvent(TensorEntry& entry);
  // Destroys the entry's ready event, if any (a registered op's, which outlives its ops).
  void DropReadyEvent(TensorEntry& entry);
  // Submit, when the world or its process sets changed since `slot`'s op was last checked:
  // checks it again (ValidateRequest) with the submission's tensors.
  absl::Status Recheck(SlotTable::Slot& slot) ABSL_LOCKS_EXCLUDED(world_mu_);

  // The world's description (Note [Re-forming in place]).
  mutable SharedMutex world_mu_;
  Config config_ ABSL_GUARDED_BY(world_mu_);
  Topology topology_ ABSL_GUARDED_BY(world_mu_);
  std::string controller_name_ ABSL_GUARDED_BY(world_mu_);
  std::unique_ptr<timeline::Timeline> timeline_ ABSL_GUARDED_BY(world_mu_);  // outlives loop_
  EntryPool entry_pool_;                                                     // outlives loop_
  SubmissionQueue queue_;
  // Registered ops (outlives loop_, which returns their entries). A thread blocking on one
  // ends the loop's batching window, as for handles_ below.
  SlotTable slots_{[this] { queue_.Hurry(); }};
  // Bumped by Reform (under world_mu_ held for writing): a registered op checked in an earlier
  // world is checked again at its next submission.
  std::atomic<uint64_t> world_generation_{1};
  // Whether a timeline is configured (config_.timeline set): submissions are stamped then.
  std::atomic<bool> stamp_submissions_;
  ProcessSetRegistry registry_;
  // A thread blocking on an op ends the loop's batching window (SubmissionQueue::Hurry).
  HandleTable handles_{[this] { queue_.Hurry(); }};
  Mutex shutdown_mu_;  // serialises Shutdown and Reform
  // What autotune carries from one world to the next (runtime/autotune/autotuner.h): only the
  // running loop touches it.
  AutotuneMemory autotune_memory_;
  // Note [Batch metrics]: this process's batch totals, over every world (outlives loop_).
  BatchMetrics metrics_;
  std::unique_ptr<BackgroundLoop> loop_;  // replaced under shutdown_mu_

  std::shared_ptr<ops::gpu::GpuPlatform> gpu_platform_;
  // The GPU this process drives: the device of its first GPU tensor (-1 until then).
  Mutex gpu_mu_;
  int32_t gpu_device_ ABSL_GUARDED_BY(gpu_mu_) = -1;
  // Numbers taken around each ready event's record (TensorEntry::ready_begin/ready_end).
  std::atomic<uint64_t> ready_clock_{1};
  Mutex name_mu_;
  // (op type, process set) -> number of unnamed ops of that kind so far.
  std::map<std::pair<int32_t, int32_t>, int64_t> auto_names_ ABSL_GUARDED_BY(name_mu_);
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_RUNTIME_H_
