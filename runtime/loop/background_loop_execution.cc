// File: runtime/loop/background_loop_execution.cc
//
// The background loop's execution of a negotiated cycle (runtime/loop/background_loop.h): the
// fusion plan (Note [Plan reuse]), each fused response's run on its process set's data plane (CPU
// through the executor, GPU batches launched on the GPU data plane), the special ops (join,
// process-set changes), and the completion of the entries, delivered to their waiters in
// batches. The cycle itself (submissions, cache bits, negotiation) is background_loop.cc.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "base/op_kind.h"
#include "base/status_macros.h"
#include "ops/no_progress.h"
#include "runtime/execute/fusion_planner.h"
#include "runtime/loop/background_loop.h"

namespace chorus::runtime {

absl::Status BackgroundLoop::PlanAndExecute(const ResponseList& negotiated) {
  // Note [Plan reuse]: a cycle of cached responses only, the same ones as the last such cycle
  // (same bits, the cache unchanged since), with the same threshold, has the same plan (a pure
  // function of those): the steady state of a training loop plans once.
  const bool same = negotiated.responses.empty() && last_plan_.cached_only &&
                    last_plan_.epoch == cache_->epoch() &&
                    last_plan_.threshold == shared_.fusion_threshold_bytes &&
                    last_plan_.bits == ready_bits_;
  if (!same) {
    plan_inputs_.assign(ready_.begin(), ready_.end());
    for (const Response& r : negotiated.responses) plan_inputs_.push_back(&r);
    planned_ = PlanFusionInto(
        plan_inputs_, shared_.fusion_threshold_bytes, [this](int32_t id) { return SetSize(id); },
        &plan_, &plan_sources_);
    last_plan_.cached_only = negotiated.responses.empty();
    last_plan_.epoch = cache_->epoch();
    last_plan_.threshold = shared_.fusion_threshold_bytes;
    last_plan_.bits.assign(ready_bits_.begin(), ready_bits_.end());
    // What each batch moves, for its flight record: per tensor, so once per plan, not per step.
    plan_bytes_.resize(planned_);
    for (size_t p = 0; p < planned_; ++p) {
      plan_bytes_[p] =
          flight_.enabled() ? ResponseBytes(plan_[p], SetSize(plan_[p].process_set_id)) : 0;
    }
  }
  const size_t planned = planned_;
  size_t first_name = 0;  // of the response in plan_sources_
  for (size_t p = 0; p < planned; ++p) {
    const Response& response = plan_[p];
    const absl::Span<const int32_t> sources =
        absl::MakeConstSpan(plan_sources_).subspan(first_name, response.names.size());
    first_name += response.names.size();
    if (tracer_.active()) {
      response_entries_.assign(response.names.size(), nullptr);
      for (size_t i = 0; i < response.names.size(); ++i) {
        response_entries_[i] = PeekSource(sources[i], response.names[i]);
      }
      tracer_.Start(response, response_entries_);
    }
    // Note [Flight recorder]: every rank numbers every planned batch; it records those it takes
    // part in (its set's, and failed ones, which every rank delivers).
    const int64_t batch = batches_++;
    flight_token_ = -1;
    if (flight_.enabled() && (response.is_error() || Backend(response.process_set_id) != nullptr)) {
      flight_token_ = flight_.Begin(
          response, plan_bytes_[p], batch, counters_.cycles.load(std::memory_order_relaxed) - 1,
          /*launched=*/response.device != kCpuDevice && !response.is_error(), absl::Now());
    }
    executing_ = &response;
    const absl::Status status = ExecuteResponse(response, sources);
    executing_ = nullptr;
    if (flight_token_ >= 0 &&
        (response.device == kCpuDevice || response.is_error() || !status.ok())) {
      flight_.End(flight_token_, response.is_error() ? response.status() : status, absl::Now());
    }
    if (response.is_error() && !dumped_failed_batch_ && flight_.enabled()) {
      dumped_failed_batch_ = true;  // the first failed batch of this world, on every rank
      if (dump_reason_.empty() || dump_asked_) {
        dump_reason_ = absl::StrCat("batch ", batch, " failed: ", response.error_message);
        dump_asked_ = false;
      }
    }
    tracer_.Executed(response, Backend(response.process_set_id));
    FlushCompletions();
    tracer_.Completed(response);
    CHORUS_RETURN_IF_ERROR(status);
  }
  // Hits of responses that did not run (an error stopped the cycle) are failed with the rest
  // of the pending ops (FailAllPending).
  return absl::OkStatus();
}

TensorEntry* BackgroundLoop::PeekSource(int32_t source, const std::string& name) const {
  if (source >= 0 && static_cast<size_t>(source) < ready_.size()) {
    return hits_[static_cast<size_t>(source)].get();
  }
  auto it = pending_.find(name);
  return it == pending_.end() ? nullptr : it->second.get();
}

std::unique_ptr<TensorEntry> BackgroundLoop::TakeSource(int32_t source, const std::string& name) {
  if (source >= 0 && static_cast<size_t>(source) < ready_.size()) {
    return std::move(hits_[static_cast<size_t>(source)]);
  }
  return TakePending(name);
}

absl::Status BackgroundLoop::ExecuteResponse(const Response& response,
                                             absl::Span<const int32_t> sources) {
  // Takes this rank's entries of the response and completes each with `status`.
  auto fail_all = [&](const absl::Status& status) {
    for (size_t i = 0; i < response.names.size(); ++i) {
      std::unique_ptr<TensorEntry> entry = TakeSource(sources[i], response.names[i]);
      if (entry == nullptr) continue;
      completed_.push_back(std::move(entry));
      completed_results_.push_back(StatusResult(status));
    }
  };
  if (response.is_error()) {
    fail_all(response.status());
    return absl::OkStatus();
  }
  switch (response.type) {
    case OpType::kJoin: {
      // This rank's join completes whatever name it was given.
      OpResult result;
      result.last_joined_rank = response.last_joined_rank;
      if (local_join_ != nullptr) {
        const std::string name = local_join_->request.name;
        local_join_ = nullptr;
        CompleteEntry(name, result);
      }
      // Ops submitted before the join may still wait in the coordinator for ranks that have
      // now left the join; a cache hit under the same name would never meet them. The join
      // response sits at one point of the global order, so every rank clears its cache here.
      cache_->Clear();
      bits_.ClearForeign();
      UncacheAll();
      return absl::OkStatus();
    }
    case OpType::kAddProcessSet: {
      CHORUS_RETURN_IF_ERROR(
          AddProcessSet(response.new_process_set_id, response.process_set_ranks));
      OpResult result;
      result.process_set_id = response.new_process_set_id;
      for (const std::string& name : response.names) CompleteEntry(name, result);
      return absl::OkStatus();
    }
    case OpType::kRemoveProcessSet: {
      if (gpu_ != nullptr) gpu_->RemoveSet(response.new_process_set_id);
      process_sets_.erase(response.new_process_set_id);
      registry_->Erase(response.new_process_set_id);
      OpResult result;
      result.process_set_id = response.new_process_set_id;
      for (const std::string& name : response.names) CompleteEntry(name, result);
      return absl::OkStatus();
    }
    default:
      break;
  }

  auto set = process_sets_.find(response.process_set_id);
  if (set == process_sets_.end()) {
    fail_all(absl::InternalError(absl::StrCat("process set ", response.process_set_id,
                                              " is unknown on rank ", topology_.rank)));
    return absl::OkStatus();
  }
  const ops::HierarchyModes modes = HierarchyModes();
  if (set->second.backend == nullptr) {
    // Not a member: the next call meets the members after they ran it (Note [No-progress
    // bound] in runtime/progress/progress_watchdog.h).
    if (watchdog_ != nullptr) {
      watchdog_->AllowForeignCalls(
          MaxBlockingCalls(response, shared_.pipeline_chunk_bytes,
                           set->second.hierarchical && (modes.allreduce || modes.allgather)));
    }
    return absl::OkStatus();
  }
  // Note [Hierarchy per batch]: the modes are read from shared_ for every batch, at the same
  // point of the global order on every member, so a change of shared_.hierarchical_* made at one
  // point of that order on every rank (an autotuner's decision) applies from the next batch.
  if (set->second.hierarchy != nullptr) set->second.hierarchy->set_modes(modes);

  const size_t n = response.names.size();
  owned_.clear();
  response_entries_.assign(n, nullptr);
  size_t missing = n;  // the first name this rank holds no entry of
  for (size_t i = 0; i < n; ++i) {
    owned_.push_back(TakeSource(sources[i], response.names[i]));
    response_entries_[i] = owned_[i].get();
    if (owned_[i] == nullptr && missing == n) missing = i;
  }
  // A rank that joined holds no entry of an op that proceeds with joined ranks (it contributes
  // zeros); of any other op, every member must hold one.
  if (missing < n && !KindOf(response.type).proceeds_with_joined_ranks) {
    const absl::Status status = absl::InternalError(
        absl::StrCat("rank ", topology_.rank, " must run ", OpTypeName(response.type),
                     " of tensor '", response.names[missing], "' but holds no such tensor"));
    for (std::unique_ptr<TensorEntry>& entry : owned_) {
      if (entry == nullptr) continue;
      completed_.push_back(std::move(entry));
      completed_results_.push_back(StatusResult(status));
    }
    owned_.clear();
    return status;
  }
  if (response.device != kCpuDevice) {
    absl::Status launched = LaunchOnGpu(response, set->second, std::move(owned_));
    owned_.clear();
    return launched;
  }
  ops::HierarchicalBackend* hierarchy = set->second.hierarchy;
  const ops::HierarchicalBackend::Counters before =
      hierarchy != nullptr ? hierarchy->counters() : ops::HierarchicalBackend::Counters();
  absl::Status status = executor_->Execute(response, response_entries_, *set->second.backend,
                                           &results_, tracer_.spans());
  if (ops::NoProgressOf(status).has_value()) {
    // The transport gave up (ops/no_progress.h): the ops fail with the report.
    status = ReportNoProgress(std::move(status));
    for (OpResult& result : results_) {
      if (ops::NoProgressOf(result.status).has_value()) result = StatusResult(status);
    }
  }
  counters_.copied_windows.store(executor_->counters().copied_windows, std::memory_order_relaxed);
  counters_.zero_copy_windows.store(executor_->counters().zero_copy_windows,
                                    std::memory_order_relaxed);
  if (hierarchy != nullptr) {
    const ops::HierarchicalBackend::Counters& after = hierarchy->counters();
    counters_.hierarchical_allreduces.fetch_add(
        after.hierarchical_allreduces - before.hierarchical_allreduces, std::memory_order_relaxed);
    counters_.flat_allreduces.fetch_add(after.flat_allreduces - before.flat_allreduces,
                                        std::memory_order_relaxed);
  }
  for (size_t i = 0; i < n; ++i) {
    if (owned_[i] == nullptr) continue;
    completed_.push_back(std::move(owned_[i]));
    completed_results_.push_back(std::move(results_[i]));
  }
  owned_.clear();
  return status;
}

absl::Status BackgroundLoop::ReportNoProgress(absl::Status status) const {
  const std::optional<ops::NoProgress> what = ops::NoProgressOf(status);
  if (!what.has_value()) return status;
  NoProgressReport report;
  report.rank = topology_.rank;
  report.bound = what->bound;
  report.call = what->call;
  report.work = DescribeWork();
  report.peers = what->peers;
  report.ends_job = false;
  return absl::UnavailableError(DescribeNoProgress(report));
}

std::string BackgroundLoop::DescribeWork() const {
  if (executing_ != nullptr) return DescribeResponseWork(*executing_);
  const size_t total = pending_.size() + static_cast<size_t>(waiters_.count());
  if (total == 0) return "the cycle's negotiation, no op pending on this rank";
  constexpr size_t kNamed = 3;
  std::vector<std::string> named;
  auto name = [&](const TensorEntry& entry) {
    if (named.size() < kNamed) {
      named.push_back(absl::StrCat(OpTypeName(entry.request.type), " '", entry.request.name, "'"));
    }
  };
  ForEachHeldEntry(name);
  std::string more;
  if (total > kNamed) more = absl::StrCat(" and ", total - kNamed, " more");
  return absl::StrCat("the cycle's negotiation, ", total, " op", total == 1 ? "" : "s",
                      " pending on this rank: ", absl::StrJoin(named, ", "), more);
}

std::unique_ptr<TensorEntry> BackgroundLoop::TakePending(absl::string_view name) {
  auto it = pending_.find(name);
  if (it == pending_.end()) return nullptr;
  return TakePending(it);
}

std::unique_ptr<TensorEntry> BackgroundLoop::TakePending(PendingMap::iterator it) {
  std::unique_ptr<TensorEntry> entry = std::move(it->second);
  pending_.erase(it);
  if (entry.get() == local_join_) local_join_ = nullptr;
  if (entry->in_unsent) {
    // Rare (an entry re-queued for the coordinator completes in the same cycle): never leave
    // a dangling pointer behind.
    unsent_.erase(std::find(unsent_.begin(), unsent_.end(), entry.get()));
  }
  return entry;
}

void BackgroundLoop::CompleteEntry(absl::string_view name, OpResult result) {
  auto it = pending_.find(name);
  if (it != pending_.end()) CompleteEntry(it, std::move(result));
}

void BackgroundLoop::CompleteEntry(PendingMap::iterator it, OpResult result) {
  completed_.push_back(TakePending(it));
  completed_results_.push_back(std::move(result));
}

void BackgroundLoop::Deliver(std::vector<std::unique_ptr<TensorEntry>>* entries,
                             std::vector<OpResult>* results, DeliveryScratch* scratch) {
  // Forget the names first so that a waiter may reuse them as soon as its handle is done.
  queue_->Forget(*entries);
  for (size_t i = 0; i < entries->size(); ++i) {
    TensorEntry& entry = *(*entries)[i];
    // A registered op keeps its event for its next submission (Runtime::RecordReadyEvent).
    if (entry.ready_event != nullptr && entry.slot < 0) {
      gpu_platform_->DestroyEvent(entry.op.input.device, entry.ready_event);
      entry.ready_event = nullptr;
    }
    if (entry.done) {
      entry.done((*results)[i]);
      entry.done = nullptr;  // what it holds goes now, not when the entry is reused
    }
    if (entry.slot >= 0) {
      scratch->slots.emplace_back(std::move((*entries)[i]), std::move((*results)[i].status));
    } else {
      scratch->handles.emplace_back(entry.handle, std::move((*results)[i]));
    }
  }
  // Retired before their handles complete, so that a waiter's next op reuses one of them
  // (registered ops' entries, moved out above, go back to their slots).
  entry_pool_->Retire(entries);
  if (!scratch->slots.empty()) slots_->Complete(&scratch->slots);
  if (!scratch->handles.empty()) handles_->CompleteMany(&scratch->handles);
  results->clear();
}

void BackgroundLoop::FlushCompletions() {
  if (completed_.empty()) return;
  Deliver(&completed_, &completed_results_, &delivery_);
}

absl::Status BackgroundLoop::LaunchOnGpu(const Response& response, ProcessSet& set,
                                         std::vector<std::unique_ptr<TensorEntry>> owned) {
  if (gpu_ == nullptr) {
    // Runs on the GPU completion thread: only thread-safe state (queue, handles, the flight
    // recorder).
    auto deliver = [this](std::vector<std::unique_ptr<TensorEntry>>* done,
                          std::vector<OpResult>* results, int64_t flight_token) {
      // A failed batch fails each of its entries with the batch's status (GpuCompletionQueue).
      flight_.End(flight_token, results->empty() ? absl::OkStatus() : results->front().status,
                  absl::Now());
      DeliveryScratch scratch;
      Deliver(done, results, &scratch);
    };
    gpu_ = std::make_unique<GpuDataPlane>(gpu_platform_, shared_, config_.no_progress_timeout,
                                          topology_.rank, std::move(deliver));
  }
  return gpu_->Launch(response, response.process_set_id, *set.backend, set.ranks, std::move(owned),
                      set.hierarchy, flight_token_);
}

void BackgroundLoop::FailAllPending(const absl::Status& status) {
  std::vector<std::string> names;
  names.reserve(pending_.size());
  for (const auto& [name, entry] : pending_) names.emplace_back(name);
  for (const std::string& name : names) CompleteEntry(name, StatusResult(status));
  auto fail = [&](std::unique_ptr<TensorEntry> entry) {
    if (entry == nullptr) return;
    completed_.push_back(std::move(entry));
    completed_results_.push_back(StatusResult(status));
  };
  std::vector<int32_t> waiting;
  waiters_.ForEach([&](int32_t bit, TensorEntry*) { waiting.push_back(bit); });
  for (int32_t bit : waiting) fail(waiters_.Take(bit));
  for (std::unique_ptr<TensorEntry>& entry : hits_) fail(std::move(entry));
  hits_.clear();
  for (std::unique_ptr<TensorEntry>& entry : queue_->DrainAll()) fail(std::move(entry));
  FlushCompletions();
  unsent_.clear();
}

}  // namespace chorus::runtime
