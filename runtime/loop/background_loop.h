// File: runtime/loop/background_loop.h
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
// One cycle (RunCycle), on every rank; each step is one function of a screen or so:
//   1. Take: drain the submission queue and look each new request up in the response cache
//      (TakeNewEntries); send cached entries that waited too long to the coordinator instead
//      (ExpireCacheWaits); rank 0 logs stalled ops (ReportStalls; the stall policy is in
//      runtime/loop/cycle_policy.h).
//   2. Exchange bits: one AllreduceBitAnd of the cache bit vector (ExchangeBits; Note [Cache
//      bit vector] in runtime/negotiate/cache_bit_vector.h). Invalidated entries are erased
//      everywhere; tensors whose bit is set on every rank are ready without any coordinator
//      involvement (TakeCacheHits); every rank learns whether some rank will still have ops pending
//      after this cycle.
//   3. Negotiate: only if some rank has uncached requests (or rank 0 must time out stalled
//      ops), every rank sends its new requests to rank 0 (GatherToRoot); the Coordinator
//      builds the response list; rank 0 broadcasts it (BroadcastFromRoot).
//   4. Plan and execute: switch to the autotune parameters rank 0 sent with the responses, if
//      any (ApplyAutotune); fuse the cached and negotiated responses; execute each; complete
//      each entry's callback (PlanAndExecute); rank 0's autotuner takes the cycle's measure
//      (runtime/autotune/autotuner.h). A response on GPU tensors is only launched
//      (runtime/gpu/gpu_data_plane.h): its entries leave pending_ and complete later on the
//      GPU completion thread.
//   5. Update the cache with the newly negotiated responses (same order on every rank).
//   6. Sleep until the next cycle (WaitForNextCycle in runtime/loop/cycle_policy.h).
// A shutdown request on any rank travels in the flags; every rank then stops after that cycle
// and fails what is still pending with Aborted. A transport failure stops the loop and fails
// everything pending (and every later Enqueue) with the transport's status.
// A controller with a no-progress bound (MPI: runtime/progress/progress_watchdog.h) is armed once
// the handshake is done: a cycle whose calls make no progress for the bound ends the job, and the
// report names the ops this loop was running or negotiating (DescribeWork).
//
// Thread-safety: the constructor and Start run on the caller's thread; everything else on the
// loop thread. The queue, registry and handle callbacks are the only shared state.
#ifndef CHORUS_RUNTIME_LOOP_BACKGROUND_LOOP_H_
#define CHORUS_RUNTIME_LOOP_BACKGROUND_LOOP_H_

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
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "ops/gpu_platform.h"
#include "ops/hierarchical/hierarchical_backend.h"
#include "runtime/autotune/autotuner.h"
#include "runtime/config.h"
#include "runtime/controller.h"
#include "runtime/execute/executor.h"
#include "runtime/flight/flight_recorder.h"
#include "runtime/gpu/gpu_data_plane.h"
#include "runtime/loop/cycle_policy.h"
#include "runtime/loop/cycle_tracer.h"
#include "runtime/negotiate/cache_bit_vector.h"
#include "runtime/negotiate/cache_waiters.h"
#include "runtime/negotiate/coordinator.h"
#include "runtime/negotiate/process_set_registry.h"
#include "runtime/negotiate/response_cache.h"
#include "runtime/progress/progress_watchdog.h"
#include "runtime/submit/entry_pool.h"
#include "runtime/submit/handle_table.h"
#include "runtime/submit/name_hash.h"
#include "runtime/submit/op_slots.h"
#include "runtime/submit/submission_queue.h"
#include "timeline/timeline.h"

namespace chorus::runtime {

class BackgroundLoop {
 public:
  // Borrows `queue`, `entry_pool` (where completed entries go), `slots` (where registered ops'
  // entries go back), `registry`, `handles`, `timeline` and `autotune_memory` (what autotune
  // carries from one world to the next; they outlive the loop) and `metrics` (this process's
  // batch totals, Note [Batch metrics]; may be null). GPU tensors run on `gpu_platform`
  // (ops/gpu_platform.h).
  BackgroundLoop(Config config, std::unique_ptr<Controller> controller, SubmissionQueue* queue,
                 EntryPool* entry_pool, SlotTable* slots, ProcessSetRegistry* registry,
                 HandleTable* handles, timeline::Timeline* timeline,
                 std::shared_ptr<ops::gpu::GpuPlatform> gpu_platform,
                 AutotuneMemory* autotune_memory, BatchMetrics* metrics = nullptr);
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
    // Allreduce calls (each piece of a CPU batch) of process sets whose layout allows the
    // hierarchical algorithm, by the algorithm HierarchicalBackend ran; published after each
    // batch, before its ops complete. Calls of sets that can only run flat are not counted.
    std::atomic<int64_t> hierarchical_allreduces{0};
    std::atomic<int64_t> flat_allreduces{0};
    // Windows of small CPU tensors reduced through the fusion buffer, and where they lie
    // (Note [Zero-copy windows] in docs/fusion.md); published after each batch.
    std::atomic<int64_t> copied_windows{0};
    std::atomic<int64_t> zero_copy_windows{0};
  };
  const Counters& counters() const { return counters_; }
  // Autotune's parameters of this world, each with the cycle it took effect in (empty when rank
  // 0 does not autotune). Thread-safe; for tests.
  std::vector<Autotuner::Switch> autotune_history() const;

 private:
  // A registered op's slot and registration (TensorEntry::slot, ::registration); slot -1: none.
  struct LocalSlot {
    int32_t slot = -1;
    uint64_t registration = 0;
  };
  struct ProcessSet {
    std::vector<int32_t> ranks;                       // world ranks, ascending
    std::unique_ptr<ops::CollectiveBackend> backend;  // null when this rank is not a member
    // Whether the set's layout allows hierarchical collectives (on every rank, members or not).
    bool hierarchical = false;
    // The backend itself when it is hierarchical (members only), else null: the loop hands it
    // the modes before each batch.
    ops::HierarchicalBackend* hierarchy = nullptr;
  };

  void ThreadMain(std::vector<std::vector<int32_t>> process_sets);
  // CHORUS_THREAD_AFFINITY: pins this thread (runtime/loop/thread_affinity.h); a warning when the
  // setting cannot be applied.
  void PinAsConfigured();
  absl::Status Handshake(const std::vector<std::vector<int32_t>>& process_sets);
  // Handshake, after the shared config: counts the world; when rank 0 autotunes, rank 0 opens
  // the autotune log (autotune_log_). The problem, if any.
  std::string OpenAutotuneLog();
  // Handshake, once the hosts are known (GatherPlaces) and before the process sets are made:
  // when rank 0 autotunes, makes this world's autotuner, with the hierarchical knob where it
  // applies, and switches to rank 0's start point (conformed to the world's knobs).
  void StartAutotune();
  // Whether hierarchical allreduce is a knob of this world's autotune search: the world can run
  // it (the global set's plan is kHierarchical). The same on every rank (hosts_ is rank 0's).
  bool HierarchicalAllreduceApplies() const;
  // Runs the next responses with `p` (shared config, executor, cycle time).
  void ApplyTuned(const TunedParameters& p);
  // This rank's wall clock minus rank 0's, in microseconds (median of a few barrier exits).
  absl::StatusOr<double> EstimateClockOffset();
  // Every rank's local and cross numbers and host name, to every rank: the hosts (hosts_,
  // host_names_).
  absl::Status GatherPlaces();
  // In the cycle that saw a shutdown with a cause (kShutdownCause): every rank's part to every
  // rank (Note [Shutdown causes]), into shutdown_ranks_ and shutdown_causes_. Where the exchange
  // fails (a peer gone since the flags, a world aborted), the flags' ranks stay, with no cause.
  void ShareShutdownCauses();
  absl::Status AddProcessSet(int32_t id, std::vector<int32_t> ranks);
  // Whether and how the set of these world ranks runs hierarchical collectives.
  ops::HierarchyPlan PlanHierarchyOf(const std::vector<int32_t>& ranks) const;
  // The hierarchical modes in effect for the next batch (Note [Hierarchy per batch] in
  // background_loop_execution.cc).
  ops::HierarchyModes HierarchyModes() const {
    return {shared_.hierarchical_allreduce, shared_.hierarchical_allgather};
  }
  // One cycle; sets *stop when the loop must end. A non-OK status is fatal.
  absl::Status RunCycle(bool* stop);

  // Step 1. Takes queued entries: those the cache knows wait on their bit (waiters_), the
  // others go to pending_ for the coordinator; appends the bits of changed cache entries to
  // *invalid_bits. Entries not stamped at submission get `now`.
  void TakeNewEntries(absl::Time now, std::vector<int32_t>* invalid_bits);
  // The cache bit of `entry`'s response if the cache knows it (-1 otherwise), through the
  // binding of a registered op or a lookup; appends a bit that must be erased everywhere to
  // *invalid_bits.
  int32_t CachedBit(const TensorEntry& entry, std::vector<int32_t>* invalid_bits);
  // Step 1. Appends the bits of cached entries pending longer than the stall policy allows.
  void ExpireCacheWaits(absl::Time now, std::vector<int32_t>* invalid_bits);
  // Step 1, rank 0. Logs stalled ops (a few times per stall period); true when this cycle must
  // negotiate so that the coordinator can time stalled ops out.
  bool ReportStalls(absl::Time now);
  // Step 2. ANDs the bit vector with every rank's and erases the invalidated cache entries.
  // An error when some rank's GPU data plane failed.
  absl::Status ExchangeBits(const std::vector<int32_t>& invalid_bits, bool stall_round);
  // Step 2. The cached responses ready on every rank, in bit order, into ready_; their entries
  // (null where this rank holds none) into hits_, aligned. The pointers are into the cache,
  // valid until UpdateCache.
  void TakeCacheHits();
  // Step 3. `locals[i]`: this rank's request for negotiated.responses[i] if it holds that single
  // tensor (what UpdateCache keeps for later lookups).
  // `*slots` (aligned): the slot of that entry when it is a registered op's.
  std::vector<std::optional<Request>> LocalRequests(const ResponseList& negotiated,
                                                    std::vector<LocalSlot>* slots) const;
  // Step 4. Switches to rank 0's autotune decision, received in cycle `cycle`.
  void ApplyAutotune(const AutotuneUpdate& update, int64_t cycle);
  // Step 4. Fuses ready_ then `negotiated` and executes the plan in order.
  absl::Status PlanAndExecute(const ResponseList& negotiated);
  // The entry waiting on `bit` no longer waits on the cache: it will be sent to the
  // coordinator.
  void Uncache(int32_t bit);
  void UncacheAll();
  // Queues the entry for the next negotiation round.
  void MarkUnsent(TensorEntry* entry);
  // Sends unsent_ to rank 0 and receives the cycle's response list.
  absl::Status Negotiate(ResponseList* out);
  // Runs a planned response whose names come from the cycle's responses `sources` (indices into
  // ready_, then the negotiated list: PlanFusionInto).
  absl::Status ExecuteResponse(const Response& response, absl::Span<const int32_t> sources);
  // This rank's entry of a planned name (null: none here), where it waits: hits_ for a cached
  // response, pending_ for a negotiated one. PeekSource leaves it there, TakeSource takes it.
  TensorEntry* PeekSource(int32_t source, const std::string& name) const;
  std::unique_ptr<TensorEntry> TakeSource(int32_t source, const std::string& name);
  // Hands a response on GPU tensors to the GPU data plane (created on first use).
  absl::Status LaunchOnGpu(const Response& response, ProcessSet& set,
                           std::vector<std::unique_ptr<TensorEntry>> entries);
  using PendingMap = NameMap<absl::string_view, std::unique_ptr<TensorEntry>>;
  // Takes the entry out of pending_ and every index of it (null when unknown).
  std::unique_ptr<TensorEntry> TakePending(absl::string_view name);
  // The same for an element of pending_ (erasing it leaves the other iterators valid).
  std::unique_ptr<TensorEntry> TakePending(PendingMap::iterator it);
  // What Deliver reuses from one call to the next (one per calling thread).
  struct DeliveryScratch {
    std::vector<std::pair<Handle, OpResult>> handles;
    std::vector<std::pair<std::unique_ptr<TensorEntry>, absl::Status>> slots;
  };
  // Forgets the names of finished entries, runs their callbacks, completes their handles and
  // retires the entries to the pool (registered ops' go back to their slots).
  // Thread-safe (queue, slots and handle table are); the GPU completion thread calls it too.
  void Deliver(std::vector<std::unique_ptr<TensorEntry>>* entries, std::vector<OpResult>* results,
               DeliveryScratch* scratch);
  // Takes the entry out of pending_ and queues its completion for FlushCompletions (nothing
  // when `name` is not pending).
  void CompleteEntry(absl::string_view name, OpResult result);
  // The same for an element of pending_.
  void CompleteEntry(PendingMap::iterator it, OpResult result);
  // Runs the queued completions: forgets the names, runs callbacks, completes the handles.
  void FlushCompletions();
  void FailAllPending(const absl::Status& status);
  // Step 5. `locals` and `local_slots` as from LocalRequests.
  void UpdateCache(const ResponseList& negotiated,
                   const std::vector<std::optional<Request>>& locals,
                   const std::vector<LocalSlot>& local_slots);
  // Registered ops (Note [Registered ops] in runtime/submit/op_slots.h): the cache bit (and its
  // version) that answered the op of each slot last, so that its next submission finds it
  // without a lookup by name.
  struct SlotBinding {
    int32_t bit = -1;
    uint64_t version = 0;       // ResponseCache::VersionAt(bit) when bound; 0: unbound
    uint64_t registration = 0;  // TensorEntry::registration of the op bound
  };
  // Binds the registered op `op` to `bit`.
  void Bind(const LocalSlot& op, int32_t bit);
  int SetSize(int32_t id) const;
  // This rank's backend for the process set (null: unknown set, or not a member).
  ops::CollectiveBackend* Backend(int32_t id) const;
  // What the loop is doing, for the no-progress report: the response it executes, or the
  // negotiation and the ops pending here. Runs on the loop thread, or on the watchdog's while
  // the loop thread is inside a watched call (Note [No-progress bound]).
  std::string DescribeWork() const;
  // Calls f(const TensorEntry&) for every entry this rank holds that has not run: those pending_
  // for the coordinator, then those waiting on a cache bit (waiters_). Where DescribeWork runs.
  template <typename F>
  void ForEachHeldEntry(F f) const {
    for (const auto& [unused, entry] : pending_) f(*entry);
    waiters_.ForEach([&](int32_t, const TensorEntry* entry) { f(*entry); });
  }
  // A transport's own no-progress error (ops/no_progress.h) as the watchdog's report
  // (DescribeNoProgress, naming DescribeWork); any other status unchanged.
  absl::Status ReportNoProgress(absl::Status status) const;
  // Note [Flight recorder]: writes this rank's dump (its records, the ops pending here, on rank
  // 0 the coordinator's waiting ops) and logs where it went, at WARNING (else INFO when not
  // `loud`). Nothing when the recorder is off. Runs on the loop thread, or on the watchdog's
  // while the loop thread is inside a watched call (as DescribeWork).
  void DumpFlight(const std::string& reason, bool loud) const;
  // From the first cycle on: the dumps on demand (Note [Flight dump on demand]) and the
  // no-progress watchdog (Note [No-progress bound]), which leaves the flight recorder's dump
  // before it ends the job and answers a dump request while the loop is inside a call.
  void StartWatching();
  // Note [Flight dump on demand]: whether a SIGUSR2 came since the last call. The loop thread's
  // only; false when the recorder is off.
  bool TakeDumpRequest();

  Config config_;
  SharedConfig shared_;
  std::unique_ptr<Controller> controller_;
  ProgressWatchdog* watchdog_ = nullptr;  // the controller's, armed after the handshake; or null
  Topology topology_;
  // Every world rank's host (ops::HostsOfRanks of the numbers gathered at the handshake), or
  // why those numbers do not describe hosts.
  absl::StatusOr<std::vector<int32_t>> hosts_ = std::vector<int32_t>();
  // Every world rank's host name (HostLabel: the launcher's -H name, else the machine's), for
  // messages; "" where unknown.
  std::vector<std::string> host_names_;
  bool warned_flat_ = false;  // the one warning that a set runs flat despite the config
  SubmissionQueue* queue_;
  EntryPool* entry_pool_;
  SlotTable* slots_;
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
  // Entries taken from the queue that wait for the coordinator or run, by name (a view of the
  // owned entry's request.name, which lives as long as the map element). Entries that wait on
  // the cache are in waiters_, those of the cycle's cache hits in hits_.
  PendingMap pending_;
  CacheWaiters waiters_;  // sized by the handshake (shared cache capacity)
  // The cycle's cached responses ready everywhere (TakeCacheHits), and this rank's entries of
  // them, aligned (null: not held here, or taken by their execution).
  std::vector<const Response*> ready_;
  std::vector<int32_t> ready_bits_;  // their bits
  std::vector<std::unique_ptr<TensorEntry>> hits_;
  // What the current plan (plan_, plan_sources_) was made of (Note [Plan reuse]).
  struct PlanKey {
    bool cached_only = false;  // no negotiated response among its inputs
    uint64_t epoch = 0;        // ResponseCache::epoch() then
    int64_t threshold = 0;
    std::vector<int32_t> bits;  // ready_bits_ then
  };
  PlanKey last_plan_;
  std::vector<SlotBinding> slot_bindings_;  // by slot index (SlotIndex)
  // Scratch of each cycle, kept for its buffers.
  std::vector<std::unique_ptr<TensorEntry>> drained_;
  std::vector<const Response*> plan_inputs_;
  std::vector<int32_t> plan_sources_;                // PlanFusionInto's
  std::vector<TensorEntry*> response_entries_;       // of the response being executed
  std::vector<std::unique_ptr<TensorEntry>> owned_;  // its entries, taken for execution
  std::vector<OpResult> results_;                    // their results
  std::vector<TensorEntry*> unsent_;  // pending entries not yet sent to the coordinator
  // The fused responses of the cycle in progress, then spare buffers for the next cycles
  // (PlanFusionInto reuses their names and shapes).
  std::vector<Response> plan_;
  std::vector<int64_t> plan_bytes_;      // ResponseBytes of each, for the flight recorder
  size_t planned_ = 0;                   // the current plan's length
  const Response* executing_ = nullptr;  // the response ExecuteResponse runs, for DescribeWork
  std::vector<int32_t> joined_ranks_;    // as last broadcast by the coordinator
  TensorEntry* local_join_ = nullptr;    // this rank's pending join, if any (in pending_)
  CacheBitVector bits_{0};               // sized by the handshake (shared cache capacity)
  const StallPolicy stall_policy_;
  absl::Time last_stall_check_ = absl::InfinitePast();
  // This rank asked for the shutdown in the last bit exchange (else a peer did), the ranks that
  // did, and the causes they gave, by world rank (ShareShutdownCauses; before it, the ranks
  // below CacheBitVector::kNamedShutdownRanks from the flags, and no causes).
  bool shutdown_sent_ = false;
  std::vector<int> shutdown_ranks_;
  std::vector<std::string> shutdown_causes_;
  Counters counters_;
  // Note [Flight recorder]: the batches this rank ran; the number of the next planned batch (the
  // same on every rank); a dump asked for in this cycle, written at its end (why, and whether
  // to log it as a warning); rank 0: a stall was reported, every rank dumps after this cycle's
  // bit exchange (CacheBitVector::kFlightDump); whether this world dumped for a failed batch yet
  // (only its first).
  BatchMetrics* const metrics_;  // may be null
  FlightRecorder flight_;
  const std::string flight_dir_;  // where dumps go (read at construction, not on the watchdog's)
  const std::string flight_job_;  // FlightJobId()
  int64_t batches_ = 0;
  int64_t flight_token_ = -1;  // the record of the batch being executed (-1: none)
  std::string dump_reason_;
  bool dump_loud_ = false;
  bool stall_dump_ = false;
  bool dumped_failed_batch_ = false;
  // Note [Flight dump on demand]: the SIGUSR2 count the loop has answered (written by the loop
  // thread, read by the watchdog's), and the one the watchdog's thread answered while the loop
  // was stuck in a call (that thread's only); whether the dump due at this cycle's end was asked
  // for (a failed batch's reason then replaces it).
  std::atomic<uint64_t> dump_requests_seen_{0};
  uint64_t watchdog_answered_ = 0;
  bool dump_asked_ = false;
  // How long the loop must have been inside one call before the watchdog's thread answers a
  // request for it (a healthy loop answers from its next cycle, within milliseconds).
  static constexpr absl::Duration kStuckForDump = absl::Seconds(1);
  // Completions of the current response, flushed together (one lock per table, not per op).
  std::vector<std::unique_ptr<TensorEntry>> completed_;
  std::vector<OpResult> completed_results_;
  DeliveryScratch delivery_;
  CycleTracer tracer_;
  AutotuneMemory* autotune_memory_;
  std::unique_ptr<Autotuner> autotuner_;       // when rank 0 autotunes; set by the handshake
  std::unique_ptr<AutotuneLog> autotune_log_;  // rank 0, between OpenAutotuneLog and StartAutotune
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_LOOP_BACKGROUND_LOOP_H_
