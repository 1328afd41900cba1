#include "runtime/background_loop.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "base/timer_slack.h"
#include "runtime/fusion_planner.h"
#include "runtime/process_set_ranks.h"
#include "runtime/wire_codec.h"

namespace chorus::runtime {
namespace {

// Note [Cache bit vector]
// Each cycle every rank contributes one vector of 1 + 3W words (W = ceil(capacity / 64)):
//   word 0          flags, complemented, so that the AND over ranks yields their OR;
//   words 1..W      bit b set: "I have the cached tensor at bit b pending" (or: it belongs to a
//                   process set I am not in); the AND says "ready on every rank";
//   words W+1..2W   bit b set: "entry b must be erased" (a request under that name changed, or
//                   it waited too long), complemented, so the AND yields the OR;
//   words 2W+1..3W  bit b set: "I have the cached tensor at bit b pending" (mine only),
//                   complemented: the OR says which cached tensors some rank holds.
// After the cycle some rank still has ops pending exactly when one has ops that are not cache
// hits (kFlagUncachedPending), a cache entry was erased (its holders renegotiate), or a cached
// tensor is held somewhere but not ready everywhere. Ranks with nothing pending then wake at
// the cycle time to take part in the next cycles; otherwise only for local work (or the idle
// cycle time). Reading "some rank has ops pending" before this cycle's execution instead would
// count the tensors this very cycle completes: every rank would run an empty cycle after each
// step and meet the next step's burst out of step.
constexpr uint64_t kFlagUncached = 1;         // this rank has requests for the coordinator
constexpr uint64_t kFlagShutdown = 2;         // this rank is shutting down
constexpr uint64_t kFlagUncachedPending = 4;  // this rank has pending ops that are not cache hits
constexpr uint64_t kFlagStallRound = 8;       // rank 0 wants a round to time out stalled ops
constexpr uint64_t kFlagGpuFailed = 16;       // this rank's GPU data plane failed: all ranks stop

// A burst of submissions is over when nothing new arrived for this long.
constexpr absl::Duration kBurstQuiet = absl::Microseconds(50);
// How long an idle loop woken by new work waits at most for the burst to end (when the cycle
// time is shorter). A submitter that blocks on one of its ops ends the wait at once (Hurry),
// one that pauses ends it after kBurstQuiet or so, so the limit only binds for a dense stream
// of submissions that neither blocks nor pauses: a whole step of small gradients, say, which
// is best taken in one cycle. With a wait of one cycle time (1 ms by default) such a step is
// cut into two or three cycles, each with its negotiation, collective and wake-ups.
constexpr absl::Duration kBurstMaxWait = absl::Milliseconds(5);

int Words(int32_t capacity) { return (capacity + 63) / 64; }

void SetBit(std::vector<uint64_t>& words, size_t base, int32_t bit) {
  words[base + bit / 64] |= uint64_t{1} << (bit % 64);
}

// Calls f(bit) for every set bit of words[base .. base+count), ascending.
template <typename F>
void ForEachBit(const std::vector<uint64_t>& words, size_t base, int count, F f) {
  for (int w = 0; w < count; ++w) {
    uint64_t word = words[base + w];
    while (word != 0) {
      int b = __builtin_ctzll(word);
      word &= word - 1;
      f(static_cast<int32_t>(w * 64 + b));
    }
  }
}

}  // namespace

BackgroundLoop::BackgroundLoop(Config config, std::unique_ptr<Controller> controller,
                               SubmissionQueue* queue, EntryPool* entry_pool,
                               ProcessSetRegistry* registry, HandleTable* handles,
                               timeline::Timeline* timeline,
                               std::shared_ptr<ops::gpu::GpuPlatform> gpu_platform)
    : config_(std::move(config)),
      controller_(std::move(controller)),
      topology_(controller_->topology()),
      queue_(queue),
      entry_pool_(entry_pool),
      registry_(registry),
      handles_(handles),
      timeline_(timeline),
      gpu_platform_(std::move(gpu_platform)) {}

BackgroundLoop::~BackgroundLoop() {
  if (thread_.joinable()) thread_.join();
}

absl::Status BackgroundLoop::Start(std::vector<std::vector<int32_t>> process_sets) {
  std::future<absl::Status> started = started_.get_future();
  thread_ = std::thread([this, sets = std::move(process_sets)]() { ThreadMain(sets); });
  absl::Status status = started.get();
  if (!status.ok()) thread_.join();
  return status;
}

void BackgroundLoop::ThreadMain(std::vector<std::vector<int32_t>> process_sets) {
  // The loop sleeps in short waits (burst gathering, cycle windows, waits for late peers).
  UsePreciseSleeps();
  absl::Status status = Handshake(process_sets);
  const bool ok = status.ok();
  started_.set_value(std::move(status));
  if (!ok) {
    timeline_->Finish();
    return;
  }

  bool stop = false;
  while (!stop) {
    absl::Status status = RunCycle(&stop);
    if (!status.ok()) {
      CHORUS_LOG(ERROR) << "background loop stopped: " << status;
      queue_->Close(absl::StrCat("chorus stopped after a failure: ", status.ToString()));
      if (gpu_ != nullptr) {
        gpu_->Fail(status);  // aborts NCCL: nothing may wait for peers that are gone
        gpu_.reset();
      }
      FailAllPending(status);
      timeline_->Finish();
      return;
    }
  }
  queue_->Close("chorus was shut down");
  // Every rank launched the same GPU batches: they complete before the communicators go.
  gpu_.reset();
  FailAllPending(absl::AbortedError("chorus was shut down before this op completed"));
  timeline_->Finish();
  CHORUS_LOG(DEBUG) << "background loop done: " << counters_.cycles.load() << " cycles, "
                    << counters_.negotiation_rounds.load() << " negotiation rounds, "
                    << counters_.cache_hits.load() << " cache hits";
}

absl::Status BackgroundLoop::Handshake(const std::vector<std::vector<int32_t>>& process_sets) {
  // Every rank adopts rank 0's negotiation parameters: fusion and cache decisions must agree.
  SharedConfig mine;
  mine.protocol_version = kProtocolVersion;
  mine.fusion_threshold_bytes = config_.fusion_threshold_bytes;
  mine.pipeline_chunk_bytes = config_.pipeline_chunk_bytes;
  mine.inplace_min_bytes = config_.inplace_min_bytes;
  mine.cache_capacity = config_.cache_capacity;
  mine.num_nccl_streams = config_.num_nccl_streams;
  std::string bytes = SerializeSharedConfig(mine);
  CHORUS_RETURN_IF_ERROR(controller_->BroadcastFromRoot(&bytes));
  // Init-time process sets must be the same everywhere: compare with rank 0's.
  auto render_sets = [](const std::vector<std::vector<int32_t>>& sets) {
    std::vector<std::string> parts;
    for (const auto& set : sets) parts.push_back(absl::StrCat("[", absl::StrJoin(set, ", "), "]"));
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  };
  const std::string my_sets = render_sets(process_sets);
  std::string root_sets = my_sets;
  CHORUS_RETURN_IF_ERROR(controller_->BroadcastFromRoot(&root_sets));

  // Every problem found here is agreed on below, so that all ranks fail together.
  std::string problem;
  absl::StatusOr<SharedConfig> parsed = ParseSharedConfig(bytes);
  if (!parsed.ok()) {
    problem = absl::StrCat("malformed configuration from rank 0: ", parsed.status().ToString());
  } else if (parsed->protocol_version != kProtocolVersion) {
    problem = absl::StrCat("rank 0 speaks chorus protocol ", parsed->protocol_version, ", rank ",
                           topology_.rank, " speaks ", kProtocolVersion, ": mixed chorus versions");
  } else {
    shared_ = *parsed;
  }
  if (problem.empty() && root_sets != my_sets) {
    problem = absl::StrCat("init-time process sets differ: rank 0 has ", root_sets, ", rank ",
                           topology_.rank, " has ", my_sets);
  }
  for (size_t i = 0; i < process_sets.size() && problem.empty(); ++i) {
    absl::Status valid = CheckProcessSetRanks(process_sets[i], topology_.size);
    if (!valid.ok()) problem = absl::StrCat("process set ", i + 1, ": ", valid.message());
  }
  CHORUS_RETURN_IF_ERROR(
      AgreeNoProblem(problem, "chorus init failed on another rank (see its error)"));

  // Timelines need each rank's clock offset, measured now (start_timeline may come later but
  // requires CHORUS_TIMELINE at init). The estimate is collective: run it if any rank has a
  // timeline configured (the variable may be set on some ranks only).
  std::vector<uint64_t> no_timeline = {config_.timeline.empty() ? ~uint64_t{0} : 0};
  CHORUS_RETURN_IF_ERROR(controller_->AllreduceBitAnd(absl::MakeSpan(no_timeline)));
  if (no_timeline[0] == 0) {
    CHORUS_ASSIGN_OR_RETURN(const double clock_offset_us, EstimateClockOffset());
    timeline_->SetClockOffset(clock_offset_us);
  }
  if (!config_.timeline.empty() && config_.timeline != "DYNAMIC") {
    absl::Status opened =
        timeline_->StartOnLoopThread(config_.timeline, config_.timeline_mark_cycles);
    if (!opened.ok()) problem = absl::StrCat("rank ", topology_.rank, ": ", opened.message());
  }
  CHORUS_RETURN_IF_ERROR(AgreeNoProblem(
      problem, "chorus init failed: another rank cannot create its timeline file (see its error)"));

  cache_ = std::make_unique<ResponseCache>(shared_.cache_capacity);
  foreign_bits_.assign(Words(shared_.cache_capacity), 0);
  executor_ = std::make_unique<Executor>(shared_, config_.huge_pages);
  if (topology_.rank == 0) {
    Coordinator::Options options;
    options.stall_warning_time = config_.stall_warning_time;
    options.stall_shutdown_time = config_.stall_shutdown_time;
    options.stall_check_disabled = config_.stall_check_disabled;
    coordinator_ = std::make_unique<Coordinator>(topology_.size, options);
  }
  std::vector<int32_t> world(topology_.size);
  for (int32_t r = 0; r < topology_.size; ++r) world[r] = r;
  CHORUS_RETURN_IF_ERROR(AddProcessSet(kGlobalProcessSetId, world));
  for (size_t i = 0; i < process_sets.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i + 1);
    CHORUS_RETURN_IF_ERROR(AddProcessSet(id, process_sets[i]));
    if (coordinator_) coordinator_->RegisterProcessSet(id, process_sets[i]);
  }
  if (config_.print_config && topology_.rank == 0) {
    for (const std::string& line : config_.Describe()) CHORUS_LOG(INFO) << "config " << line;
  }
  return absl::OkStatus();
}

absl::Status BackgroundLoop::AgreeNoProblem(const std::string& problem,
                                            const std::string& elsewhere) {
  std::vector<uint64_t> valid = {problem.empty() ? ~uint64_t{0} : 0};
  CHORUS_RETURN_IF_ERROR(controller_->AllreduceBitAnd(absl::MakeSpan(valid)));
  if (valid[0] != 0) return absl::OkStatus();
  return absl::InvalidArgumentError(problem.empty() ? elsewhere : problem);
}

absl::StatusOr<double> BackgroundLoop::EstimateClockOffset() {
  // Ranks leave a barrier at nearly the same moment: each round, every rank reads its clock
  // right after one, and rank 0 takes the differences. The median of a few rounds filters out
  // a rank descheduled on the way out.
  constexpr int kRounds = 5;
  std::vector<std::vector<int64_t>> diffs(topology_.size);  // rank 0: per rank, ns
  for (int round = 0; round < kRounds; ++round) {
    CHORUS_RETURN_IF_ERROR(controller_->Barrier());
    const int64_t now = absl::ToUnixNanos(absl::Now());
    std::vector<std::string> all;
    CHORUS_RETURN_IF_ERROR(controller_->GatherToRoot(absl::StrCat(now), &all));
    if (topology_.rank != 0) continue;
    std::vector<int64_t> times(all.size(), 0);
    for (size_t r = 0; r < all.size(); ++r) {
      if (!absl::SimpleAtoi(all[r], &times[r])) times[r] = times[0];
    }
    for (size_t r = 0; r < all.size(); ++r) diffs[r].push_back(times[r] - times[0]);
  }
  std::string offsets;  // rank 0: "ns,ns,..." in rank order
  if (topology_.rank == 0) {
    std::vector<std::string> parts;
    for (std::vector<int64_t>& d : diffs) {
      std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
      parts.push_back(absl::StrCat(d[d.size() / 2]));
    }
    offsets = absl::StrJoin(parts, ",");
  }
  CHORUS_RETURN_IF_ERROR(controller_->BroadcastFromRoot(&offsets));
  const std::vector<std::string> parts = absl::StrSplit(offsets, ',');
  int64_t mine = 0;
  if (static_cast<int>(parts.size()) != topology_.size ||
      !absl::SimpleAtoi(parts[topology_.rank], &mine)) {
    return absl::InternalError(absl::StrCat("malformed clock offsets from rank 0: ", offsets));
  }
  return static_cast<double>(mine) / 1000.0;
}

absl::Status BackgroundLoop::AddProcessSet(int32_t id, std::vector<int32_t> ranks) {
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<ops::CollectiveBackend> backend,
                          controller_->CreateBackend(ranks));
  registry_->Set(id, ranks);
  process_sets_[id] = ProcessSet{std::move(ranks), std::move(backend)};
  return absl::OkStatus();
}

int BackgroundLoop::SetSize(int32_t id) const {
  auto it = process_sets_.find(id);
  return it == process_sets_.end() ? 1 : static_cast<int>(it->second.ranks.size());
}

void BackgroundLoop::TakeNewEntries(absl::Time now, std::vector<int32_t>* invalid_bits) {
  for (std::unique_ptr<TensorEntry>& owned : queue_->DrainAll()) {
    TensorEntry* entry = owned.get();
    // Stamped at submission only when a timeline is configured (Runtime::MakeEntry).
    if (entry->enqueued_at == absl::Time()) entry->enqueued_at = now;
    if (timeline_->active()) {
      timeline_->RequestKnown(entry->request.name, topology_.rank, entry->enqueued_at);
    }
    if (entry->request.type == OpType::kJoin) {
      if (local_join_ != nullptr) {
        completed_results_.push_back(StatusResult(absl::InvalidArgumentError(absl::StrCat(
            "join '", entry->request.name, "': this rank already has join '",
            local_join_->request.name, "' in flight; a rank joins once until the join completes"))));
        completed_.push_back(std::move(owned));
        continue;
      }
      local_join_ = entry;
    }
    pending_[entry->request.name] = std::move(owned);
    if (cache_->capacity() > 0 && entry->request.group_key.empty() && joined_ranks_.empty() &&
        IsDataOp(entry->request.type)) {
      ResponseCache::Lookup lookup = cache_->Find(entry->request);
      if (lookup.state == ResponseCache::State::kHit) {
        entry->cache_bit = lookup.bit;
        by_bit_[lookup.bit] = entry;
        continue;
      }
      if (lookup.state == ResponseCache::State::kInvalid) invalid_bits->push_back(lookup.bit);
    }
    MarkUnsent(entry);
  }
}

void BackgroundLoop::MarkUnsent(TensorEntry* entry) {
  entry->in_unsent = true;
  unsent_.push_back(entry);
}

void BackgroundLoop::UncacheAll() {
  std::vector<TensorEntry*> cached;  // Uncache edits by_bit_: collect first
  cached.reserve(by_bit_.size());
  for (const auto& [bit, entry] : by_bit_) cached.push_back(entry);
  for (TensorEntry* entry : cached) Uncache(entry);
}

void BackgroundLoop::Uncache(TensorEntry* entry) {
  by_bit_.erase(entry->cache_bit);
  entry->cache_bit = -1;
  MarkUnsent(entry);
}

absl::Status BackgroundLoop::RunCycle(bool* stop) {
  const absl::Time cycle_start = absl::Now();
  timeline_->BeginCycle(counters_.cycles.fetch_add(1, std::memory_order_relaxed), cycle_start);
  std::vector<int32_t> invalid_bits;
  TakeNewEntries(cycle_start, &invalid_bits);
  const bool shutting_down = queue_->closed();

  // Cached entries that waited too long go through the coordinator, which can name the
  // missing ranks (the cache path cannot).
  if (!config_.stall_check_disabled) {
    // Early enough that the coordinator can still warn and time out close to the configured
    // times (it counts from when it first sees the request).
    absl::Duration limit = config_.stall_warning_time;
    if (config_.stall_shutdown_time > absl::ZeroDuration()) {
      limit = std::min(limit, config_.stall_shutdown_time);
    }
    limit /= 2;
    for (const auto& [bit, entry] : by_bit_) {
      if (cycle_start - entry->enqueued_at > limit) {
        invalid_bits.push_back(bit);
      }
    }
  }
  bool stall_round = false;
  // Rank 0 looks for stalls a few times per stall period (at most once a second).
  absl::Duration check_every = std::min(absl::Seconds(1), config_.stall_warning_time / 4);
  if (config_.stall_shutdown_time > absl::ZeroDuration()) {
    check_every = std::min(check_every, config_.stall_shutdown_time / 4);
  }
  if (coordinator_ && cycle_start - last_stall_check_ >= check_every) {
    last_stall_check_ = cycle_start;
    for (const StallReport& report : coordinator_->CheckStalls(cycle_start)) {
      CHORUS_LOG(WARNING) << "stalled " << OpTypeName(report.type) << " of tensor '"
                          << report.name << "' (process set " << report.process_set_id
                          << "): waited " << absl::FormatDuration(report.waited)
                          << "; submitted by ranks [" << absl::StrJoin(report.submitted_ranks, ", ")
                          << "], missing ranks [" << absl::StrJoin(report.missing_ranks, ", ")
                          << "]";
    }
    stall_round = config_.stall_shutdown_time > absl::ZeroDuration() && coordinator_->HasPending();
  }

  // Note [Cache bit vector].
  const int w = Words(cache_->capacity());
  std::vector<uint64_t> bits(1 + 3 * w, 0);
  uint64_t flags = 0;
  if (!unsent_.empty()) flags |= kFlagUncached;
  if (shutting_down) flags |= kFlagShutdown;
  if (pending_.size() > by_bit_.size()) flags |= kFlagUncachedPending;
  if (stall_round) flags |= kFlagStallRound;
  // A GPU failure is found by the completion thread at any time; it stops every rank in the
  // same cycle, so no rank is left waiting in a collective for one that has stopped.
  const absl::Status gpu_failure = gpu_ != nullptr ? gpu_->failure() : absl::OkStatus();
  if (!gpu_failure.ok()) flags |= kFlagGpuFailed;
  bits[0] = ~flags;
  for (const auto& [bit, entry] : by_bit_) {
    SetBit(bits, 1, bit);
    SetBit(bits, 1 + 2 * w, bit);
  }
  for (int i = 0; i < w; ++i) bits[1 + i] |= foreign_bits_[i];
  for (int32_t bit : invalid_bits) SetBit(bits, 1 + w, bit);
  for (int i = w; i < 3 * w; ++i) bits[1 + i] = ~bits[1 + i];
  CHORUS_RETURN_IF_ERROR(controller_->AllreduceBitAnd(absl::MakeSpan(bits)));
  const uint64_t global = ~bits[0];
  for (int i = w; i < 3 * w; ++i) bits[1 + i] = ~bits[1 + i];
  // Whether some rank will still have ops pending after this cycle (Note [Cache bit vector]).
  bool pending_after = (global & kFlagUncachedPending) != 0;
  for (int i = 0; i < w && !pending_after; ++i) {
    pending_after = bits[1 + w + i] != 0 || (bits[1 + 2 * w + i] & ~bits[1 + i]) != 0;
  }
  if ((global & kFlagGpuFailed) != 0) {
    if (!gpu_failure.ok()) return gpu_failure;
    return absl::UnavailableError(
        "the GPU data plane of another rank failed (its log says why); chorus stopped");
  }

  // Erase invalidated entries everywhere; their local waiters renegotiate.
  ForEachBit(bits, 1 + w, w, [&](int32_t bit) {
    cache_->Erase(bit);
    foreign_bits_[bit / 64] &= ~(uint64_t{1} << (bit % 64));
    auto it = by_bit_.find(bit);
    if (it != by_bit_.end()) Uncache(it->second);
    bits[1 + bit / 64] &= ~(uint64_t{1} << (bit % 64));
  });
  // Cached tensors ready on every rank, in bit order (read in place: the cache does not change
  // before the plan is made).
  std::vector<const Response*> ready;
  const absl::Time bits_done = timeline_->active() ? absl::Now() : absl::InfinitePast();
  ForEachBit(bits, 1, w, [&](int32_t bit) {
    if (!cache_->Contains(bit)) return;
    cache_->Touch(bit);
    ready.push_back(&cache_->Get(bit));
    counters_.cache_hits.fetch_add(1, std::memory_order_relaxed);
    auto it = by_bit_.find(bit);
    if (it != by_bit_.end()) {
      TensorEntry* entry = it->second;
      if (timeline_->active()) {
        timeline_->Negotiated(entry->request.name, entry->request.type, bits_done, true);
        entry->ready_at = bits_done;
      }
      entry->cache_bit = -1;
      by_bit_.erase(it);
    }
  });

  ResponseList negotiated;
  if ((global & (kFlagUncached | kFlagStallRound)) != 0) {
    counters_.negotiation_rounds.fetch_add(1, std::memory_order_relaxed);
    CHORUS_RETURN_IF_ERROR(Negotiate(&negotiated));
  }

  // This rank's requests for the negotiated single-tensor responses, for the cache.
  std::vector<std::optional<Request>> locals(negotiated.responses.size());
  for (size_t i = 0; i < negotiated.responses.size(); ++i) {
    const Response& r = negotiated.responses[i];
    if (r.names.size() != 1) continue;
    auto it = pending_.find(r.names[0]);
    if (it != pending_.end()) locals[i] = it->second->request;
  }

  std::vector<const Response*> all = std::move(ready);
  for (const Response& r : negotiated.responses) all.push_back(&r);
  const size_t planned = PlanFusionInto(all, shared_.fusion_threshold_bytes,
                                        [this](int32_t id) { return SetSize(id); }, &plan_);
  for (size_t p = 0; p < planned; ++p) {
    const Response& response = plan_[p];
    const bool tracing = timeline_->active();
    const absl::Time started = tracing ? absl::Now() : absl::InfinitePast();
    if (tracing) TraceStart(response);
    absl::Status status = ExecuteResponse(response);
    const absl::Time executed = tracing ? absl::Now() : absl::InfinitePast();
    if (tracing) TraceExecuted(response, started);
    FlushCompletions();
    if (tracing) TraceCompleted(response, executed, absl::Now());
    CHORUS_RETURN_IF_ERROR(status);
  }
  UpdateCache(negotiated, locals);
  FlushCompletions();  // e.g. a second join refused while taking new entries
  timeline_->EndCycle();

  if ((global & kFlagShutdown) != 0) {
    *stop = true;
    return absl::OkStatus();
  }
  // While this rank waits on ops, the cycle time is a batching window for local submissions:
  // the next cycle starts once they pause (kBurstQuiet) or the window ends. Sleeping out the
  // whole window would leave ops idle that became ready everywhere meanwhile (a burst the
  // ranks submit out of step is negotiated in several cycles); a next cycle whose peers are
  // not there yet waits for them in the bit vector's allreduce, without spinning.
  // With nothing pending here, new local work starts the next cycle at once; otherwise wake
  // after the cycle time if some rank still has ops pending, or the idle time if none has.
  const absl::Duration left = cycle_start + config_.cycle_time - absl::Now();
  if (!pending_.empty()) {
    if (left > absl::ZeroDuration()) queue_->WaitForQuiet(kBurstQuiet, left);
  } else {
    const bool woke = queue_->WaitForWork(
        pending_after ? std::max(left, absl::ZeroDuration()) : config_.idle_cycle_time);
    // Take a burst of submissions (a whole model's gradients, say) in one cycle.
    if (woke) queue_->WaitForQuiet(kBurstQuiet, std::max(config_.cycle_time, kBurstMaxWait));
  }
  return absl::OkStatus();
}

absl::Status BackgroundLoop::Negotiate(ResponseList* out) {
  RequestList mine;
  mine.requests.reserve(unsent_.size());
  for (TensorEntry* entry : unsent_) {
    mine.requests.push_back(entry->request);
    entry->in_unsent = false;
  }
  unsent_.clear();
  std::vector<std::string> gathered;
  CHORUS_RETURN_IF_ERROR(controller_->GatherToRoot(SerializeRequestList(mine), &gathered));
  std::string reply;
  bool malformed = false;
  if (coordinator_) {
    const absl::Time now = absl::Now();
    for (size_t r = 0; r < gathered.size(); ++r) {
      absl::StatusOr<RequestList> list = ParseRequestList(gathered[r]);
      if (!list.ok()) {
        // Tell every rank to stop instead of leaving them waiting for the broadcast.
        CHORUS_LOG(ERROR) << "malformed request list from rank " << r << ": " << list.status();
        malformed = true;
        break;
      }
      if (timeline_->active() && r != 0) {
        for (const Request& request : list->requests) {
          timeline_->RequestKnown(request.name, static_cast<int32_t>(r), now);
        }
      }
      coordinator_->AddRequests(static_cast<int32_t>(r), list->requests, now);
    }
    ResponseList stop;
    stop.shutdown = true;
    reply = SerializeResponseList(malformed ? stop : coordinator_->BuildResponses(now));
  }
  CHORUS_RETURN_IF_ERROR(controller_->BroadcastFromRoot(&reply));
  CHORUS_ASSIGN_OR_RETURN(*out, ParseResponseList(reply));
  if (out->shutdown) {
    return absl::InternalError(
        "rank 0 received a malformed negotiation message (mixed chorus builds?); chorus stopped");
  }
  if (timeline_->active()) {
    const absl::Time ready = absl::Now();
    for (const Response& response : out->responses) {
      for (const std::string& name : response.names) {
        auto it = pending_.find(name);
        if (it == pending_.end()) continue;
        timeline_->Negotiated(name, it->second->request.type, ready, false);
        it->second->ready_at = ready;
      }
    }
  }

  const bool was_joined = !joined_ranks_.empty();
  joined_ranks_ = out->joined_ranks;
  if (!was_joined && !joined_ranks_.empty()) {
    // A joined rank never sets cache bits: everything waiting on the cache renegotiates.
    UncacheAll();
  }
  return absl::OkStatus();
}

absl::Status BackgroundLoop::ExecuteResponse(const Response& response) {
  if (response.is_error()) {
    for (const std::string& name : response.names) {
      CompleteEntry(name, StatusResult(response.status()));
    }
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
      std::fill(foreign_bits_.begin(), foreign_bits_.end(), 0);
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
    for (const std::string& name : response.names) {
      CompleteEntry(name, StatusResult(absl::InternalError(absl::StrCat(
                              "process set ", response.process_set_id, " is unknown on rank ",
                              topology_.rank))));
    }
    return absl::OkStatus();
  }
  if (set->second.backend == nullptr) return absl::OkStatus();  // not a member

  std::vector<TensorEntry*> entries(response.names.size(), nullptr);
  std::vector<PendingMap::iterator> found(response.names.size(), pending_.end());
  for (size_t i = 0; i < response.names.size(); ++i) {
    auto it = pending_.find(response.names[i]);
    if (it != pending_.end()) {
      entries[i] = it->second.get();
      found[i] = it;
    } else if (response.type != OpType::kAllreduce) {
      return absl::InternalError(absl::StrCat("rank ", topology_.rank, " must run ",
                                              OpTypeName(response.type), " of tensor '",
                                              response.names[i], "' but holds no such tensor"));
    }
  }
  if (response.device != kCpuDevice) return LaunchOnGpu(response, set->second, entries);
  std::vector<OpResult> results;
  absl::Status status = executor_->Execute(response, entries, *set->second.backend, &results,
                                           timeline_->active() ? &execution_spans_ : nullptr);
  // The executor leaves pending_ alone, so `found` is still valid; a response names a tensor
  // once (an entry is either cached or sent to the coordinator, never both), so no iterator
  // is taken twice.
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i] != nullptr) CompleteEntry(found[i], std::move(results[i]));
  }
  return status;
}

std::unique_ptr<TensorEntry> BackgroundLoop::TakePending(absl::string_view name) {
  auto it = pending_.find(name);
  if (it == pending_.end()) return nullptr;
  return TakePending(it);
}

std::unique_ptr<TensorEntry> BackgroundLoop::TakePending(PendingMap::iterator it) {
  std::unique_ptr<TensorEntry> entry = std::move(it->second);
  pending_.erase(it);
  if (entry->cache_bit >= 0) by_bit_.erase(entry->cache_bit);
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
                             std::vector<OpResult>* results,
                             std::vector<std::pair<Handle, OpResult>>* handle_scratch) {
  // Forget the names first so that a waiter may reuse them as soon as its handle is done.
  queue_->Forget(*entries);
  for (size_t i = 0; i < entries->size(); ++i) {
    TensorEntry& entry = *(*entries)[i];
    if (entry.ready_event != nullptr) {
      gpu_platform_->DestroyEvent(entry.op.input.device, entry.ready_event);
      entry.ready_event = nullptr;
    }
    if (entry.done) {
      entry.done((*results)[i]);
      entry.done = nullptr;  // what it holds goes now, not when the entry is reused
    }
    handle_scratch->emplace_back(entry.handle, std::move((*results)[i]));
  }
  // Retired before their handles complete, so that a waiter's next op reuses one of them.
  entry_pool_->Retire(entries);
  handles_->CompleteMany(handle_scratch);
  results->clear();
}

void BackgroundLoop::FlushCompletions() {
  if (completed_.empty()) return;
  Deliver(&completed_, &completed_results_, &completed_handles_);
}

absl::Status BackgroundLoop::LaunchOnGpu(const Response& response, ProcessSet& set,
                                         const std::vector<TensorEntry*>& entries) {
  if (gpu_ == nullptr) {
    // Runs on the GPU completion thread: only thread-safe state (queue, handles).
    auto deliver = [this](std::vector<std::unique_ptr<TensorEntry>>* done,
                          std::vector<OpResult>* results) {
      std::vector<std::pair<Handle, OpResult>> handles;
      Deliver(done, results, &handles);
    };
    gpu_ = std::make_unique<GpuDataPlane>(gpu_platform_, shared_, config_.gpu_op_timeout,
                                          std::move(deliver));
  }
  std::vector<std::unique_ptr<TensorEntry>> owned(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i] != nullptr) owned[i] = TakePending(response.names[i]);
  }
  return gpu_->Launch(response, response.process_set_id, *set.backend, std::move(owned));
}

void BackgroundLoop::FailAllPending(const absl::Status& status) {
  std::vector<std::string> names;
  names.reserve(pending_.size());
  for (const auto& [name, entry] : pending_) names.emplace_back(name);
  for (const std::string& name : names) CompleteEntry(name, StatusResult(status));
  for (std::unique_ptr<TensorEntry>& entry : queue_->DrainAll()) {
    completed_.push_back(std::move(entry));
    completed_results_.push_back(StatusResult(status));
  }
  FlushCompletions();
  unsent_.clear();
  by_bit_.clear();
}

void BackgroundLoop::UpdateCache(const ResponseList& negotiated,
                                 const std::vector<std::optional<Request>>& locals) {
  if (cache_->capacity() == 0 || !negotiated.joined_ranks.empty()) return;
  for (size_t i = 0; i < negotiated.responses.size(); ++i) {
    const Response& r = negotiated.responses[i];
    if (r.is_error() || !IsDataOp(r.type) || !r.group_key.empty() || r.names.size() != 1) {
      continue;
    }
    const Request* local = locals[i].has_value() ? &*locals[i] : nullptr;
    const int32_t bit = cache_->Put(r, local);
    uint64_t& word = foreign_bits_[bit / 64];
    const uint64_t mask = uint64_t{1} << (bit % 64);
    auto set = process_sets_.find(r.process_set_id);
    const bool member = set != process_sets_.end() && set->second.backend != nullptr;
    word = member ? (word & ~mask) : (word | mask);
  }
  // A Put may have evicted (or reused the bit of) an entry a local op waits on.
  std::vector<TensorEntry*> stale;
  for (const auto& [bit, entry] : by_bit_) {
    if (!cache_->Contains(bit) || cache_->Get(bit).names[0] != entry->request.name) {
      stale.push_back(entry);
    }
  }
  for (TensorEntry* entry : stale) Uncache(entry);
}

void BackgroundLoop::TraceStart(const Response& response) {
  traced_.assign(response.names.size(), TracedTensor());
  execution_spans_.clear();
  const int64_t batch_id = timeline_->NextBatchId();
  for (size_t i = 0; i < response.names.size(); ++i) {
    auto it = pending_.find(response.names[i]);
    if (it == pending_.end()) continue;
    const TensorEntry& entry = *it->second;
    TracedTensor& t = traced_[i];
    t.row = timeline_->Row(response.names[i]);
    t.ready_at = entry.ready_at;
    t.args.dtype = entry.request.dtype;
    t.args.shape.assign(entry.request.shape.begin(), entry.request.shape.end());
    t.args.bytes = NumElements(entry.request.shape) *
                   static_cast<int64_t>(DataTypeSize(entry.request.dtype));
    t.args.batch_id = batch_id;
    t.args.batch_size = static_cast<int32_t>(response.names.size());
    t.args.process_set = response.process_set_id;
  }
}

void BackgroundLoop::TraceExecuted(const Response& response, absl::Time started) {
  for (TracedTensor& t : traced_) {
    if (t.row < 0) continue;
    if (t.ready_at == absl::InfinitePast()) t.ready_at = started;
    timeline_->Span(t.row, "QUEUE", t.ready_at, started);
  }
  if (execution_spans_.empty()) return;
  auto set = process_sets_.find(response.process_set_id);
  const char* collective = timeline::Timeline::CollectiveLabel(
      set != process_sets_.end() && set->second.backend != nullptr ? set->second.backend->name()
                                                                   : "UNKNOWN",
      response.type);
  for (const ExecutionSpan& span : execution_spans_) {
    const int32_t row = traced_[span.index].row;
    if (row < 0) continue;
    switch (span.activity) {
      case ExecutionSpan::Activity::kMemcpyIn:
        timeline_->Span(row, "MEMCPY_IN_FUSION_BUFFER", span.start, span.end);
        break;
      case ExecutionSpan::Activity::kCollective:
        if (span.chunks > 0) {
          timeline_->Span(row, collective, span.start, span.end,
                          timeline::ChunkArgs{span.chunks});
        } else {
          timeline_->Span(row, collective, span.start, span.end);
        }
        break;
      case ExecutionSpan::Activity::kMemcpyOut:
        timeline_->Span(row, "MEMCPY_OUT_FUSION_BUFFER", span.start, span.end);
        break;
    }
  }
}

void BackgroundLoop::TraceCompleted(const Response& response, absl::Time executed,
                                    absl::Time done) {
  for (TracedTensor& t : traced_) {
    if (t.row < 0) continue;
    timeline_->Span(t.row, "CALLBACK", executed, done);
    timeline_->Span(t.row, timeline::Timeline::OpLabel(response.type), t.ready_at, done,
                    std::move(t.args));
  }
}

}  // namespace chorus::runtime
