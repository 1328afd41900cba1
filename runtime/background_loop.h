// File: runtime/background_loop.h
//
// The background thread of one runtime: it owns all negotiation state, the process sets' data
// planes and the fusion buffer, and is the only thread that talks to the Controller and the
// backends after construction.
//
// Note [One global execution order]
// Ranks submit in any order. Each cycle every rank computes the same list of responses (cached
// ones in ascending bit order, then the coordinator's broadcast list), fuses it with the same
// planner and shared config, and executes it in that order. So collectives on every
// communicator are issued in the same order everywhere and cannot deadlock or pair up wrongly.
//
// One cycle (RunCycle), on every rank:
//   1. Drain the submission queue; look each new request up in the response cache.
//   2. One AllreduceBitAnd of [flags | cache-ready bits | cache-invalid bits | cache-held bits]
//      (Note [Cache bit vector] in background_loop.cc). Invalidated entries are erased
//      everywhere; tensors whose bit is set on every rank are ready without any coordinator
//      involvement; every rank learns whether some rank will still have ops pending after
//      this cycle.
//   3. Only if some rank has uncached requests (or rank 0 must report stalls): every rank
//      sends its new requests to rank 0 (GatherToRoot); the Coordinator builds the response
//      list; rank 0 broadcasts it (BroadcastFromRoot).
//   4. Plan fusion; execute each response; complete each entry's callback.
//   5. Put the newly negotiated responses into the cache (same order on every rank).
//   4'. A response on GPU tensors is only launched (runtime/gpu/gpu_data_plane.h): its entries
//      leave pending_ and complete later on the GPU completion thread.
//   6. Sleep: out the cycle time while this rank has ops pending (batching); otherwise until
//      local work arrives (at most the cycle time if some rank still has ops pending after this
//      cycle, else the idle cycle time), then until the burst of submissions pauses
//      (SubmissionQueue::WaitForQuiet) or a thread starts to wait on an incomplete op
//      (SubmissionQueue::Hurry), at most 5 ms or the cycle time if longer (kBurstMaxWait in
//      background_loop.cc).
// A shutdown request on any rank travels in the flags; every rank then stops after that cycle
// and fails what is still pending with Aborted. A transport failure stops the loop and fails
// everything pending (and every later Enqueue) with the transport's status.
//
// Thread-safety: the constructor and Start run on the caller's thread; everything else on the
// loop thread. The queue, registry and handle callbacks are the only shared state.
#ifndef CHORUS_RUNTIME_BACKGROUND_LOOP_H_
#define CHORUS_RUNTIME_BACKGROUND_LOOP_H_

#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/config.h"
#include "runtime/controller.h"
#include "runtime/entry_pool.h"
#include "runtime/coordinator.h"
#include "runtime/executor.h"
#include "runtime/gpu/gpu_data_plane.h"
#include "ops/gpu_platform.h"
#include "runtime/handle_table.h"
#include "runtime/name_hash.h"
#include "runtime/process_set_registry.h"
#include "runtime/response_cache.h"
#include "runtime/submission_queue.h"
#include "timeline/timeline.h"

namespace chorus::runtime {

class BackgroundLoop {
 public:
  // Borrows `queue`, `entry_pool` (where completed entries go), `registry`, `handles` and
  // `timeline` (they outlive the loop). GPU tensors run on `gpu_platform` (ops/gpu_platform.h).
  BackgroundLoop(Config config, std::unique_ptr<Controller> controller, SubmissionQueue* queue,
                 EntryPool* entry_pool, ProcessSetRegistry* registry, HandleTable* handles,
                 timeline::Timeline* timeline,
                 std::shared_ptr<ops::gpu::GpuPlatform> gpu_platform);
  // Joins the thread. REQUIRES: the queue was closed (the loop then stops).
  ~BackgroundLoop();
  BackgroundLoop(const BackgroundLoop&) = delete;
  BackgroundLoop& operator=(const BackgroundLoop&) = delete;

  // Starts the thread, which first agrees on the shared config with rank 0, estimates this
  // rank's clock offset when any rank has a timeline configured, opens the CHORUS_TIMELINE file
  // if one is configured, and creates the global process set and `process_sets` (ids 1, 2,
  // ...). Blocks until that is done and returns its status; on error the thread has exited.
  absl::Status Start(std::vector<std::vector<int32_t>> process_sets);

  const Topology& topology() const { return topology_; }

  // Counters for tests and diagnostics (relaxed atomics; thread-safe to read).
  struct Counters {
    std::atomic<int64_t> cycles{0};
    std::atomic<int64_t> negotiation_rounds{0};  // cycles that gathered requests on rank 0
    std::atomic<int64_t> cache_hits{0};          // tensors made ready by the bit vector alone
  };
  const Counters& counters() const { return counters_; }

 private:
  struct ProcessSet {
    std::vector<int32_t> ranks;                       // world ranks, ascending
    std::unique_ptr<ops::CollectiveBackend> backend;  // null when this rank is not a member
  };

  void ThreadMain(std::vector<std::vector<int32_t>> process_sets);
  absl::Status Handshake(const std::vector<std::vector<int32_t>>& process_sets);
  // OK on every rank if `problem` is empty on every rank; else an error on every rank (this
  // rank's problem, or `elsewhere`).
  absl::Status AgreeNoProblem(const std::string& problem, const std::string& elsewhere);
  // This rank's wall clock minus rank 0's, in microseconds (median of a few barrier exits).
  absl::StatusOr<double> EstimateClockOffset();
  absl::Status AddProcessSet(int32_t id, std::vector<int32_t> ranks);
  // One cycle; sets *stop when the loop must end. A non-OK status is fatal.
  absl::Status RunCycle(bool* stop);

  // Moves queued entries into pending_, classifying each by the cache; appends the bits of
  // changed cache entries to *invalid_bits. Entries not stamped at submission get `now`.
  void TakeNewEntries(absl::Time now, std::vector<int32_t>* invalid_bits);
  // The entry no longer waits on the cache: it will be sent to the coordinator.
  void Uncache(TensorEntry* entry);
  void UncacheAll();
  // Queues the entry for the next negotiation round.
  void MarkUnsent(TensorEntry* entry);
  // Sends unsent_ to rank 0 and receives the cycle's response list.
  absl::Status Negotiate(ResponseList* out);
  absl::Status ExecuteResponse(const Response& response);
  // Hands a response on GPU tensors to the GPU data plane (created on first use).
  absl::Status LaunchOnGpu(const Response& response, ProcessSet& set,
                           const std::vector<TensorEntry*>& entries);
  using PendingMap = NameMap<absl::string_view, std::unique_ptr<TensorEntry>>;
  // Takes the entry out of pending_ and every index of it (null when unknown).
  std::unique_ptr<TensorEntry> TakePending(absl::string_view name);
  // The same for an element of pending_ (erasing it leaves the other iterators valid).
  std::unique_ptr<TensorEntry> TakePending(PendingMap::iterator it);
  // Forgets the names of finished entries, runs their callbacks, completes their handles and
  // retires the entries to the pool.
  // Thread-safe (queue and handle table are); the GPU completion thread calls it too.
  void Deliver(std::vector<std::unique_ptr<TensorEntry>>* entries,
               std::vector<OpResult>* results,
               std::vector<std::pair<Handle, OpResult>>* handle_scratch);
  // Takes the entry out of pending_ and queues its completion for FlushCompletions (nothing
  // when `name` is not pending).
  void CompleteEntry(absl::string_view name, OpResult result);
  // The same for an element of pending_.
  void CompleteEntry(PendingMap::iterator it, OpResult result);
  // Runs the queued completions: forgets the names, runs callbacks, completes the handles.
  void FlushCompletions();
  void FailAllPending(const absl::Status& status);
  // Timeline records of one executed response (only while the timeline is active): before it
  // runs, after the collective, and after its completions.
  void TraceStart(const Response& response);
  void TraceExecuted(const Response& response, absl::Time started);
  void TraceCompleted(const Response& response, absl::Time executed, absl::Time done);
  // `locals[i]`: this rank's request for negotiated.responses[i], if it held the tensor.
  void UpdateCache(const ResponseList& negotiated,
                   const std::vector<std::optional<Request>>& locals);
  int SetSize(int32_t id) const;

  Config config_;
  SharedConfig shared_;
  std::unique_ptr<Controller> controller_;
  Topology topology_;
  SubmissionQueue* queue_;
  EntryPool* entry_pool_;
  ProcessSetRegistry* registry_;
  HandleTable* handles_;
  timeline::Timeline* timeline_;
  std::thread thread_;
  std::promise<absl::Status> started_;  // set once by the thread after the handshake

  // Loop-thread state.
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  std::unique_ptr<ResponseCache> cache_;
  std::unique_ptr<Executor> executor_;
  std::shared_ptr<ops::gpu::GpuPlatform> gpu_platform_;
  std::unique_ptr<GpuDataPlane> gpu_;  // created by the first GPU response
  std::map<int32_t, ProcessSet> process_sets_;
  // Entries taken from the queue and not yet completed, by name (a view of the owned entry's
  // request.name, which lives as long as the map element).
  PendingMap pending_;
  std::vector<TensorEntry*> unsent_;       // pending entries not yet sent to the coordinator
  // The fused responses of the cycle in progress, then spare buffers for the next cycles
  // (PlanFusionInto reuses their names and shapes).
  std::vector<Response> plan_;
  std::vector<int32_t> joined_ranks_;      // as last broadcast by the coordinator
  TensorEntry* local_join_ = nullptr;      // this rank's pending join, if any (in pending_)
  std::vector<uint64_t> foreign_bits_;     // cache bits of tensors of sets this rank is not in
  absl::flat_hash_map<int32_t, TensorEntry*> by_bit_;  // pending entries waiting on the cache
  absl::Time last_stall_check_ = absl::InfinitePast();
  Counters counters_;
  // Completions of the current response, flushed together (one lock per table, not per op).
  std::vector<std::unique_ptr<TensorEntry>> completed_;
  std::vector<OpResult> completed_results_;
  std::vector<std::pair<Handle, OpResult>> completed_handles_;
  // Timeline scratch for the response being executed: the traced tensors by name index (row
  // -1: not held here) and what the executor did.
  struct TracedTensor {
    int32_t row = -1;
    absl::Time ready_at;
    timeline::OpArgs args;
  };
  std::vector<TracedTensor> traced_;
  std::vector<ExecutionSpan> execution_spans_;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_BACKGROUND_LOOP_H_
