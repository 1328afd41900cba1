#include "runtime/loop/background_loop.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "base/config_names.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "base/timer_slack.h"
#include "runtime/loop/thread_affinity.h"
#include "runtime/negotiate/process_set_ranks.h"
#include "runtime/negotiate/wire_codec.h"

namespace chorus::runtime {
namespace {

// This rank's host as the others name it: the launcher's name for it (chorusrun and horovodrun
// set CHORUS_HOSTNAME / HOROVOD_HOSTNAME: the -H name), else the machine's (gethostname: under
// mpirun); "" when neither is known. Without the handshake's separators.
std::string HostLabel() {
  std::string label;
  for (const char* name : {config_names::kHostname, "HOROVOD_HOSTNAME"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') {
      label = value;
      break;
    }
  }
  if (label.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) label = host;
  }
  std::erase_if(label, [](char c) { return c == ',' || c == ';'; });
  return label;
}

}  // namespace

BackgroundLoop::BackgroundLoop(Config config, std::unique_ptr<Controller> controller,
                               SubmissionQueue* queue, EntryPool* entry_pool, SlotTable* slots,
                               ProcessSetRegistry* registry, HandleTable* handles,
                               timeline::Timeline* timeline,
                               std::shared_ptr<ops::gpu::GpuPlatform> gpu_platform,
                               AutotuneMemory* autotune_memory, BatchMetrics* metrics)
    : config_(std::move(config)),
      controller_(std::move(controller)),
      topology_(controller_->topology()),
      queue_(queue),
      entry_pool_(entry_pool),
      slots_(slots),
      registry_(registry),
      handles_(handles),
      timeline_(timeline),
      gpu_platform_(std::move(gpu_platform)),
      stall_policy_(StallPolicyFor(config_)),
      metrics_(metrics),
      flight_(config_.flight_recorder_entries, metrics),
      flight_dir_(FlightDirectory(config_.flight_recorder_dir)),
      flight_job_(FlightJobId()),
      tracer_(timeline),
      autotune_memory_(autotune_memory) {}

BackgroundLoop::~BackgroundLoop() {
  if (thread_.joinable()) thread_.join();
}

absl::Status BackgroundLoop::Start(std::vector<std::vector<int32_t>> process_sets) {
  // Note [Flight dump on demand]: on init's thread, before the handshake, recorder or not: from
  // init on, a SIGUSR2 (chorusrun passes it to every worker) asks for a dump and ends nothing.
  if (!InstallFlightDumpSignal() && flight_.enabled()) {
    CHORUS_LOG(INFO) << "flight recorder: SIGUSR2 has the application's own action; no dump on "
                        "demand (the recorder still dumps on a stall, a failure or no progress)";
  }
  dump_requests_seen_.store(FlightDumpRequests(), std::memory_order_relaxed);
  std::future<absl::Status> started = started_.get_future();
  thread_ = std::thread([this, sets = std::move(process_sets)]() { ThreadMain(sets); });
  absl::Status status = started.get();
  if (!status.ok()) thread_.join();
  return status;
}

void BackgroundLoop::ThreadMain(std::vector<std::vector<int32_t>> process_sets) {
  // Named for tools (top -H, /proc/<pid>/task/*/comm) and the affinity test.
  ::pthread_setname_np(::pthread_self(), "chorus-loop");
  PinAsConfigured();
  // The loop sleeps in short waits (burst gathering, cycle windows, waits for late peers).
  UsePreciseSleeps();
  absl::Status status = Handshake(process_sets);
  const bool ok = status.ok();
  // Open for this loop's first cycle (a re-formed runtime's queue was closed by the last one).
  if (ok) queue_->Reopen();
  started_.set_value(std::move(status));
  if (!ok) {
    timeline_->Finish();
    return;
  }
  StartWatching();

  bool stop = false;
  while (!stop) {
    absl::Status status = ReportNoProgress(RunCycle(&stop));
    if (!status.ok()) {
      if (watchdog_ != nullptr) watchdog_->Disarm();
      // An elastic reset aborts the world on purpose (Aborted, from chorusrun's generation):
      // the training loop rolls back; it is not an error of this process.
      if (absl::IsAborted(status)) {
        CHORUS_LOG(WARNING) << "background loop stopped: " << status;
      } else {
        CHORUS_LOG(ERROR) << "background loop stopped: " << status;
        DumpFlight(std::string(status.message()), /*loud=*/true);
      }
      queue_->Fail(absl::StrCat("chorus stopped after a failure: ", status.ToString()));
      if (gpu_ != nullptr) {
        gpu_->Fail(status);  // aborts NCCL: nothing may wait for peers that are gone
        gpu_.reset();
      }
      FailAllPending(status);
      timeline_->Finish();
      return;
    }
  }
  if (watchdog_ != nullptr) watchdog_->Disarm();  // no more calls to peers
  // Another rank shutting down (its process ending: an exception, an exit) shuts chorus down on
  // every rank; its ops here then fail saying so, rather than as if this process had asked.
  queue_->CloseIfOpen(
      DescribeShutdown(shutdown_sent_, shutdown_ranks_, host_names_, shutdown_causes_, ""));
  // Every rank launched the same GPU batches: they complete before the communicators go.
  gpu_.reset();
  FailAllPending(
      absl::AbortedError(DescribeShutdown(shutdown_sent_, shutdown_ranks_, host_names_,
                                          shutdown_causes_, " before this op completed")));
  timeline_->Finish();
  CHORUS_LOG(DEBUG) << "background loop done: " << counters_.cycles.load() << " cycles, "
                    << counters_.negotiation_rounds.load() << " negotiation rounds, "
                    << counters_.cache_hits.load() << " cache hits";
}

void BackgroundLoop::PinAsConfigured() {
  absl::StatusOr<std::optional<int>> core =
      CoreFor(config_.thread_affinity, topology_.local_rank, topology_.local_size);
  absl::Status pinned = core.ok() && core->has_value() ? PinCallingThread(**core) : core.status();
  if (!pinned.ok()) {
    CHORUS_LOG(WARNING) << pinned.message();
  }
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
  mine.hierarchical_allreduce = config_.hierarchical_allreduce;
  mine.hierarchical_allgather = config_.hierarchical_allgather;
  if (config_.autotune && topology_.rank == 0) {
    // Whether the hierarchical knob applies is known once the hosts are (StartAutotune).
    mine.autotune_start =
        Autotuner::StartPoint(*autotune_memory_, CurrentParameters(mine, config_.cycle_time));
    // An elastic job's generation, else the worlds this runtime has formed.
    mine.autotune_generation =
        config_.elastic ? config_.elastic_generation : autotune_memory_->worlds;
  }
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
    problem = OpenAutotuneLog();
  }
  if (problem.empty() && root_sets != my_sets) {
    problem = absl::StrCat("init-time process sets differ: rank 0 has ", root_sets, ", rank ",
                           topology_.rank, " has ", my_sets);
  }
  for (size_t i = 0; i < process_sets.size() && problem.empty(); ++i) {
    absl::Status valid = CheckProcessSetRanks(process_sets[i], topology_.size);
    if (!valid.ok()) problem = absl::StrCat("process set ", i + 1, ": ", valid.message());
  }
  CHORUS_RETURN_IF_ERROR(AgreeNoProblem(*controller_, problem, "its runtime could not start"));

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
  CHORUS_RETURN_IF_ERROR(
      AgreeNoProblem(*controller_, problem, "it cannot create its timeline file"));

  cache_ = std::make_unique<ResponseCache>(shared_.cache_capacity);
  bits_ = CacheBitVector(shared_.cache_capacity);
  waiters_ = CacheWaiters(shared_.cache_capacity);
  executor_ = std::make_unique<Executor>(shared_, config_.huge_pages);
  if (topology_.rank == 0) {
    Coordinator::Options options;
    options.stall_warning_time = config_.stall_warning_time;
    options.stall_shutdown_time = config_.stall_shutdown_time;
    options.stall_check_disabled = config_.stall_check_disabled;
    coordinator_ = std::make_unique<Coordinator>(topology_.size, options);
  }
  CHORUS_RETURN_IF_ERROR(GatherPlaces());
  StartAutotune();
  std::vector<int32_t> world(topology_.size);
  for (int32_t r = 0; r < topology_.size; ++r) world[r] = r;
  CHORUS_RETURN_IF_ERROR(AddProcessSet(kGlobalProcessSetId, world));
  for (size_t i = 0; i < process_sets.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i + 1);
    CHORUS_RETURN_IF_ERROR(AddProcessSet(id, process_sets[i]));
    if (coordinator_) coordinator_->RegisterProcessSet(id, process_sets[i]);
  }
  if (config_.print_config && topology_.rank == 0) {
    // Asked for explicitly: printed at any log level (an INFO line is hidden by the default).
    for (const std::string& line : config_.Describe()) {
      log::LogMessage(log::Level::kInfo, __FILE__, __LINE__).stream() << "config " << line;
    }
  }
  return absl::OkStatus();
}

std::string BackgroundLoop::OpenAutotuneLog() {
  const int64_t world = autotune_memory_->worlds++;
  if (!shared_.autotune_start.has_value()) return "";
  if (topology_.rank != 0 || config_.autotune_log.empty()) return "";
  // A job's first world starts the file afresh; later ones (re-formed worlds, elastic
  // generations, possibly with another process as rank 0) append to it.
  absl::StatusOr<std::unique_ptr<AutotuneLog>> opened = AutotuneLog::Open(
      config_.autotune_log, /*truncate=*/world == 0 && shared_.autotune_generation == 0);
  if (!opened.ok()) return absl::StrCat("rank 0: ", opened.status().message());
  autotune_log_ = *std::move(opened);
  return "";
}

void BackgroundLoop::StartAutotune() {
  // Rank 0 sent a starting point: it autotunes.
  if (!shared_.autotune_start.has_value()) return;
  const bool hierarchical = HierarchicalAllreduceApplies();
  autotuner_ = std::make_unique<Autotuner>(config_, /*decides=*/topology_.rank == 0,
                                           std::move(autotune_log_), shared_.autotune_generation,
                                           hierarchical, autotune_memory_);
  const TunedParameters start = KnobSpace(hierarchical).Conform(*shared_.autotune_start);
  autotuner_->Start(start);
  ApplyTuned(start);
}

bool BackgroundLoop::HierarchicalAllreduceApplies() const {
  // Hierarchical allreduce joins the search (Knob::kHierarchical, runtime/autotune/knob_space.h)
  // where the world's layout lets it run: the condition AddProcessSet uses to give the global
  // set a HierarchicalBackend (several hosts, several ranks on each, the same number on every
  // one). Its data planes read SharedConfig::hierarchical_allreduce per batch (Note [Hierarchy
  // per batch]), on the CPU and the GPU.
  std::vector<int32_t> world(static_cast<size_t>(topology_.size));
  for (int32_t r = 0; r < topology_.size; ++r) world[static_cast<size_t>(r)] = r;
  return PlanHierarchyOf(world).kind == ops::HierarchyPlan::Kind::kHierarchical;
}

void BackgroundLoop::ApplyTuned(const TunedParameters& p) {
  shared_.fusion_threshold_bytes = p.fusion_threshold_bytes;
  shared_.pipeline_chunk_bytes = p.pipeline_chunk_bytes;
  shared_.inplace_min_bytes = p.inplace_min_bytes;
  if (p.hierarchical_allreduce.has_value()) {
    shared_.hierarchical_allreduce = *p.hierarchical_allreduce;
  }
  config_.cycle_time = p.cycle_time;
  if (executor_ != nullptr) executor_->Reconfigure(shared_);
}

void BackgroundLoop::ApplyAutotune(const AutotuneUpdate& update, int64_t cycle) {
  ApplyTuned(update.apply);
  if (autotuner_ != nullptr) autotuner_->Applied(update, cycle);
}

std::vector<Autotuner::Switch> BackgroundLoop::autotune_history() const {
  if (autotuner_ == nullptr) return {};
  return autotuner_->history();
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

void BackgroundLoop::ShareShutdownCauses() {
  const std::string mine = ShutdownPart(shutdown_sent_, queue_->shutdown_cause());
  std::vector<std::string> parts;
  absl::Status status = controller_->GatherToRoot(mine, &parts);
  std::string joined = status.ok() && topology_.rank == 0 ? JoinShutdownParts(parts) : "";
  if (status.ok()) status = controller_->BroadcastFromRoot(&joined);
  if (!status.ok()) {
    CHORUS_LOG(DEBUG) << "shutdown causes not exchanged: " << status;
    return;
  }
  if (!ParseShutdownParts(joined, topology_.size, &shutdown_ranks_, &shutdown_causes_)) {
    CHORUS_LOG(DEBUG) << "shutdown causes not understood: " << joined.size() << " bytes";
  }
}

absl::Status BackgroundLoop::GatherPlaces() {
  const std::string mine =
      absl::StrCat(topology_.local_rank, ",", topology_.local_size, ",", topology_.cross_rank, ",",
                   topology_.cross_size, ",", HostLabel());
  std::vector<std::string> all;
  CHORUS_RETURN_IF_ERROR(controller_->GatherToRoot(mine, &all));
  std::string joined = absl::StrJoin(all, ";");  // rank 0's; empty elsewhere
  CHORUS_RETURN_IF_ERROR(controller_->BroadcastFromRoot(&joined));
  std::vector<ops::RankPlace> places;
  host_names_.clear();
  for (absl::string_view place : absl::StrSplit(joined, ';')) {
    const std::vector<absl::string_view> n = absl::StrSplit(place, ',');
    ops::RankPlace p;
    if (n.size() != 5 || !absl::SimpleAtoi(n[0], &p.local_rank) ||
        !absl::SimpleAtoi(n[1], &p.local_size) || !absl::SimpleAtoi(n[2], &p.cross_rank) ||
        !absl::SimpleAtoi(n[3], &p.cross_size)) {
      return absl::InternalError(absl::StrCat("malformed rank places from rank 0: ", joined));
    }
    places.push_back(p);
    host_names_.emplace_back(n[4]);
  }
  if (static_cast<int32_t>(places.size()) != topology_.size) {
    return absl::InternalError(absl::StrCat("rank 0 sent ", places.size(),
                                            " rank places for a world of ", topology_.size));
  }
  hosts_ = ops::HostsOfRanks(places);
  return absl::OkStatus();
}

ops::HierarchyPlan BackgroundLoop::PlanHierarchyOf(const std::vector<int32_t>& ranks) const {
  if (!hosts_.ok()) {
    ops::HierarchyPlan plan;
    plan.kind = ops::HierarchyPlan::Kind::kUnknownHosts;
    plan.reason = absl::StrCat("the ranks' local and cross numbers do not describe hosts (",
                               hosts_.status().message(), ")");
    return plan;
  }
  std::vector<int32_t> host_of_member;
  host_of_member.reserve(ranks.size());
  for (int32_t r : ranks) host_of_member.push_back((*hosts_)[static_cast<size_t>(r)]);
  return ops::PlanHierarchy(host_of_member);
}

absl::Status BackgroundLoop::AddProcessSet(int32_t id, std::vector<int32_t> ranks) {
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<ops::CollectiveBackend> backend,
                          controller_->CreateBackend(ranks));
  ops::HierarchyPlan plan = PlanHierarchyOf(ranks);
  ProcessSet set;
  const ops::HierarchyModes modes = HierarchyModes();
  const bool asked = modes.allreduce || modes.allgather;
  const char* variables = modes.allreduce && modes.allgather
                              ? "CHORUS_HIERARCHICAL_ALLREDUCE and CHORUS_HIERARCHICAL_ALLGATHER"
                          : modes.allreduce ? "CHORUS_HIERARCHICAL_ALLREDUCE"
                                            : "CHORUS_HIERARCHICAL_ALLGATHER";
  if (plan.kind == ops::HierarchyPlan::Kind::kHierarchical) {
    // Every world rank takes part in both partitions (collective over the world, as
    // CreateBackend); the ranks outside the set in no group.
    const size_t world = static_cast<size_t>(topology_.size);
    std::vector<int32_t> local_group(world, -1), cross_group(world, -1);
    for (size_t i = 0; i < ranks.size(); ++i) {
      local_group[static_cast<size_t>(ranks[i])] = plan.layout.host[i];
      cross_group[static_cast<size_t>(ranks[i])] = plan.layout.local[i];
    }
    CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<ops::CollectiveBackend> local,
                            controller_->CreateGroupBackend(local_group));
    CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<ops::CollectiveBackend> cross,
                            controller_->CreateGroupBackend(cross_group));
    set.hierarchical = true;
    if (asked && topology_.rank == 0 && id == kGlobalProcessSetId) {
      CHORUS_LOG(INFO) << variables << ": hierarchical over " << plan.layout.cross_size
                       << " hosts x " << plan.layout.local_size << " ranks";
    }
    if (backend != nullptr) {
      CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<ops::HierarchicalBackend> hierarchical,
                              ops::HierarchicalBackend::Create(std::move(backend), std::move(local),
                                                               std::move(cross), std::move(plan)));
      hierarchical->set_modes(modes);
      set.hierarchy = hierarchical.get();
      backend = std::move(hierarchical);
    }
  } else if (asked && !warned_flat_ && topology_.rank == 0 &&
             (plan.kind == ops::HierarchyPlan::Kind::kHeterogeneous ||
              plan.kind == ops::HierarchyPlan::Kind::kUnknownHosts)) {
    // Once per world (Horovod's condition: every host runs the same number of ranks).
    warned_flat_ = true;
    CHORUS_LOG(WARNING) << variables << (modes.allreduce && modes.allgather ? " are" : " is")
                        << " set, but process set " << id
                        << " cannot run hierarchically: " << plan.reason
                        << "; that needs the same number of ranks on every host. Its "
                        << "collectives run flat (one collective over all its ranks).";
  }
  set.ranks = ranks;
  set.backend = std::move(backend);
  registry_->Set(id, std::move(ranks));
  process_sets_[id] = std::move(set);
  return absl::OkStatus();
}

ops::CollectiveBackend* BackgroundLoop::Backend(int32_t id) const {
  auto it = process_sets_.find(id);
  return it == process_sets_.end() ? nullptr : it->second.backend.get();
}

int BackgroundLoop::SetSize(int32_t id) const {
  auto it = process_sets_.find(id);
  return it == process_sets_.end() ? 1 : static_cast<int>(it->second.ranks.size());
}

void BackgroundLoop::TakeNewEntries(absl::Time now, std::vector<int32_t>* invalid_bits) {
  queue_->DrainAll(&drained_);
  for (std::unique_ptr<TensorEntry>& owned : drained_) {
    TensorEntry* entry = owned.get();
    // Stamped at submission only when a timeline is configured (Runtime::MakeEntry).
    if (entry->enqueued_at == absl::Time()) entry->enqueued_at = now;
    tracer_.RequestKnown(entry->request.name, topology_.rank, entry->enqueued_at);
    if (entry->request.type == OpType::kJoin) {
      if (local_join_ != nullptr) {
        completed_results_.push_back(StatusResult(absl::InvalidArgumentError(
            absl::StrCat("join '", entry->request.name, "': this rank already has join '",
                         local_join_->request.name,
                         "' in flight; a rank joins once until the join completes"))));
        completed_.push_back(std::move(owned));
        continue;
      }
      local_join_ = entry;
    }
    const int32_t bit = CachedBit(*entry, invalid_bits);
    if (bit >= 0) {
      entry->cache_bit = bit;
      if (waiters_.Put(bit, cache_->VersionAt(bit), owned)) continue;
      entry->cache_bit = -1;  // cannot happen: two pending entries of one name
    }
    const std::string& name = entry->request.name;
    pending_[name] = std::move(owned);
    MarkUnsent(entry);
  }
  drained_.clear();
}

int32_t BackgroundLoop::CachedBit(const TensorEntry& entry, std::vector<int32_t>* invalid_bits) {
  const Request& request = entry.request;
  if (cache_->capacity() == 0 || !request.group_key.empty() || !joined_ranks_.empty() ||
      !IsDataOp(request.type)) {
    return -1;
  }
  // A registered op whose cache entry is still the one its last submission found.
  if (entry.slot >= 0 && SlotIndex(entry.slot) < slot_bindings_.size()) {
    const SlotBinding& b = slot_bindings_[SlotIndex(entry.slot)];
    if (b.version != 0 && b.registration == entry.registration &&
        cache_->VersionAt(b.bit) == b.version) {
      return b.bit;
    }
  }
  ResponseCache::Lookup lookup = cache_->Find(request);
  if (lookup.state == ResponseCache::State::kHit) {
    if (entry.slot >= 0) Bind({entry.slot, entry.registration}, lookup.bit);
    return lookup.bit;
  }
  if (lookup.state == ResponseCache::State::kInvalid) invalid_bits->push_back(lookup.bit);
  return -1;
}

void BackgroundLoop::Bind(const LocalSlot& op, int32_t bit) {
  const size_t s = SlotIndex(op.slot);
  if (s >= slot_bindings_.size()) slot_bindings_.resize(s + 1);
  slot_bindings_[s] = {bit, cache_->VersionAt(bit), op.registration};
}

void BackgroundLoop::MarkUnsent(TensorEntry* entry) {
  entry->in_unsent = true;
  unsent_.push_back(entry);
}

void BackgroundLoop::UncacheAll() {
  std::vector<int32_t> held;  // Uncache edits waiters_: collect first
  held.reserve(static_cast<size_t>(waiters_.count()));
  waiters_.ForEach([&](int32_t bit, TensorEntry*) { held.push_back(bit); });
  for (int32_t bit : held) Uncache(bit);
}

void BackgroundLoop::Uncache(int32_t bit) {
  std::unique_ptr<TensorEntry> owned = waiters_.Take(bit);
  if (owned == nullptr) return;
  TensorEntry* entry = owned.get();
  entry->cache_bit = -1;
  const std::string& name = entry->request.name;
  pending_[name] = std::move(owned);
  MarkUnsent(entry);
}

absl::Status BackgroundLoop::RunCycle(bool* stop) {
  const absl::Time cycle_start = absl::Now();
  const int64_t cycle = counters_.cycles.fetch_add(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->AddCycle();
  timeline_->BeginCycle(cycle, cycle_start);

  // 1. Take new submissions; expire cache waits; rank 0 reports stalls.
  std::vector<int32_t> invalid_bits;
  TakeNewEntries(cycle_start, &invalid_bits);
  ExpireCacheWaits(cycle_start, &invalid_bits);
  const bool stall_round = ReportStalls(cycle_start);

  // 2. Exchange the cache bit vector; take the cached responses ready on every rank.
  CHORUS_RETURN_IF_ERROR(ExchangeBits(invalid_bits, stall_round));
  TakeCacheHits();

  // 3. Negotiate the uncached requests with the coordinator, if any rank has some.
  ResponseList negotiated;
  if (bits_.any(CacheBitVector::kUncached | CacheBitVector::kStallRound |
                CacheBitVector::kAutotune)) {
    counters_.negotiation_rounds.fetch_add(1, std::memory_order_relaxed);
    CHORUS_RETURN_IF_ERROR(Negotiate(&negotiated));
  }
  std::vector<LocalSlot> local_slots;
  const std::vector<std::optional<Request>> locals = LocalRequests(negotiated, &local_slots);

  // 4. Switch to rank 0's autotune parameters, if it sent some: every rank in this cycle.
  // Plan fusion over both lists; execute each response; complete its entries.
  if (negotiated.autotune.has_value()) ApplyAutotune(*negotiated.autotune, cycle);
  CHORUS_RETURN_IF_ERROR(PlanAndExecute(negotiated));
  if (autotuner_ != nullptr) {
    autotuner_->AfterCycle(cycle_start, absl::MakeConstSpan(plan_.data(), planned_));
  }

  // 5. Put the newly negotiated responses into the cache.
  UpdateCache(negotiated, locals, local_slots);
  FlushCompletions();  // e.g. a second join refused while taking new entries
  // The GPU batches launched in this cycle: those already done complete here, the rest wait on
  // the completion thread.
  if (gpu_ != nullptr) gpu_->Settle();
  if (!dump_reason_.empty()) {
    DumpFlight(dump_reason_, dump_loud_);
    dump_reason_.clear();
    dump_loud_ = false;
    dump_asked_ = false;
  }
  timeline_->EndCycle();
  if (bits_.any(CacheBitVector::kShutdown)) {
    shutdown_ranks_ = bits_.ShutdownRanks();
    if (bits_.any(CacheBitVector::kShutdownCause)) ShareShutdownCauses();
    *stop = true;
    return absl::OkStatus();
  }

  // 6. Sleep until the next cycle.
  WaitForNextCycle(config_, cycle_start, !pending_.empty() || !waiters_.empty(),
                   bits_.pending_after(), queue_);
  return absl::OkStatus();
}

void BackgroundLoop::ExpireCacheWaits(absl::Time now, std::vector<int32_t>* invalid_bits) {
  if (!stall_policy_.enabled) return;
  waiters_.ForEach([&](int32_t bit, TensorEntry* entry) {
    if (now - entry->enqueued_at > stall_policy_.cache_wait_limit) invalid_bits->push_back(bit);
  });
}

bool BackgroundLoop::ReportStalls(absl::Time now) {
  if (!coordinator_ || now - last_stall_check_ < stall_policy_.check_every) return false;
  last_stall_check_ = now;
  for (const StallReport& report : coordinator_->CheckStalls(now)) {
    CHORUS_LOG(WARNING) << DescribeStall(report, config_);
    stall_dump_ = true;  // every rank dumps after this cycle's exchange (Note [Flight recorder])
  }
  return stall_policy_.shutdown_rounds && coordinator_->HasPending();
}

absl::Status BackgroundLoop::ExchangeBits(const std::vector<int32_t>& invalid_bits,
                                          bool stall_round) {
  // A GPU failure is found by the completion thread at any time; it stops every rank in the
  // same cycle, so no rank is left waiting in a collective for one that has stopped.
  const absl::Status gpu_failure = gpu_ != nullptr ? gpu_->failure() : absl::OkStatus();
  uint64_t flags = 0;
  if (!unsent_.empty()) flags |= CacheBitVector::kUncached;
  shutdown_sent_ = queue_->closed();
  if (shutdown_sent_) {
    flags |= CacheBitVector::ShutdownFlags(topology_.rank);
    if (!queue_->shutdown_cause().empty()) flags |= CacheBitVector::kShutdownCause;
  }
  if (!pending_.empty()) flags |= CacheBitVector::kUncachedPending;
  if (stall_round) flags |= CacheBitVector::kStallRound;
  if (!gpu_failure.ok()) flags |= CacheBitVector::kGpuFailed;
  if (autotuner_ != nullptr && autotuner_->has_update()) flags |= CacheBitVector::kAutotune;
  if (std::exchange(stall_dump_, false)) flags |= CacheBitVector::kFlightDump;
  if (TakeDumpRequest()) flags |= CacheBitVector::kFlightDumpAsked;
  bits_.Begin(flags);
  waiters_.ForEach([&](int32_t bit, TensorEntry*) { bits_.Hold(bit); });
  for (int32_t bit : invalid_bits) bits_.Invalidate(bit);
  CHORUS_RETURN_IF_ERROR(controller_->AllreduceBitAnd(bits_.Pack()));
  bits_.Unpack();
  if (bits_.any(CacheBitVector::kFlightDumpAsked) && flight_.enabled()) {
    dump_reason_ = "asked for (SIGUSR2 to a rank of this job)";
    dump_loud_ = true;
    dump_asked_ = true;  // a failed batch in the same cycle gives its reason instead
  }
  if (bits_.any(CacheBitVector::kFlightDump) && flight_.enabled()) {  // the stall's reason wins
    dump_asked_ = false;
    dump_reason_ = "the stall inspector on rank 0 reported ops that some ranks have not submitted";
    dump_loud_ = true;  // a failed batch in the same cycle keeps this reason (PlanAndExecute)
  }
  if (bits_.any(CacheBitVector::kGpuFailed)) {
    if (!gpu_failure.ok()) return gpu_failure;
    return absl::UnavailableError(
        "the GPU data plane of another rank failed (its log says why); chorus stopped");
  }
  // Erase invalidated entries everywhere; their local waiters renegotiate.
  bits_.ForEachInvalid([&](int32_t bit) {
    cache_->Erase(bit);
    Uncache(bit);
  });
  return absl::OkStatus();
}

void BackgroundLoop::TakeCacheHits() {
  // In bit order, read in place: the cache does not change before the plan is made.
  ready_.clear();
  ready_bits_.clear();
  hits_.clear();
  int64_t hits = 0;
  const absl::Time now = tracer_.Now();
  bits_.ForEachReady([&](int32_t bit) {
    if (!cache_->Contains(bit)) return;
    cache_->Touch(bit);
    ready_.push_back(&cache_->Get(bit));
    ready_bits_.push_back(bit);
    ++hits;
    std::unique_ptr<TensorEntry> entry = waiters_.Take(bit);  // null: a set this rank is not in
    if (entry != nullptr) {
      tracer_.Negotiated(*entry, now, /*cached=*/true);
      entry->cache_bit = -1;
    }
    hits_.push_back(std::move(entry));
  });
  counters_.cache_hits.fetch_add(hits, std::memory_order_relaxed);
}

std::vector<std::optional<Request>> BackgroundLoop::LocalRequests(
    const ResponseList& negotiated, std::vector<LocalSlot>* slots) const {
  std::vector<std::optional<Request>> locals(negotiated.responses.size());
  slots->assign(negotiated.responses.size(), LocalSlot{});
  for (size_t i = 0; i < negotiated.responses.size(); ++i) {
    const Response& r = negotiated.responses[i];
    if (r.names.size() != 1) continue;
    auto it = pending_.find(r.names[0]);
    if (it != pending_.end()) {
      locals[i] = it->second->request;
      (*slots)[i] = {it->second->slot, it->second->registration};
    }
  }
  return locals;
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
      if (tracer_.active() && r != 0) {
        for (const Request& request : list->requests) {
          tracer_.RequestKnown(request.name, static_cast<int32_t>(r), now);
        }
      }
      coordinator_->AddRequests(static_cast<int32_t>(r), list->requests, now);
    }
    ResponseList stop;
    stop.shutdown = true;
    ResponseList built = malformed ? stop : coordinator_->BuildResponses(now);
    // Rank 0's autotune decision travels with this cycle's responses (kAutotune).
    if (!malformed && autotuner_ != nullptr) built.autotune = autotuner_->TakeUpdate();
    reply = SerializeResponseList(built);
  }
  CHORUS_RETURN_IF_ERROR(controller_->BroadcastFromRoot(&reply));
  CHORUS_ASSIGN_OR_RETURN(*out, ParseResponseList(reply));
  if (out->shutdown) {
    return absl::InternalError(
        "rank 0 received a malformed negotiation message (mixed chorus builds?); chorus stopped");
  }
  if (tracer_.active()) {
    const absl::Time ready = absl::Now();
    for (const Response& response : out->responses) {
      for (const std::string& name : response.names) {
        auto it = pending_.find(name);
        if (it != pending_.end()) tracer_.Negotiated(*it->second, ready, /*cached=*/false);
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

void BackgroundLoop::UpdateCache(const ResponseList& negotiated,
                                 const std::vector<std::optional<Request>>& locals,
                                 const std::vector<LocalSlot>& local_slots) {
  if (cache_->capacity() == 0 || !negotiated.joined_ranks.empty()) return;
  bool put = false;
  for (size_t i = 0; i < negotiated.responses.size(); ++i) {
    const Response& r = negotiated.responses[i];
    if (r.is_error() || !IsDataOp(r.type) || !r.group_key.empty() || r.names.size() != 1) {
      continue;
    }
    const Request* local = locals[i].has_value() ? &*locals[i] : nullptr;
    const int32_t bit = cache_->Put(r, local);
    put = true;
    bits_.SetForeign(bit, Backend(r.process_set_id) == nullptr);
    if (local_slots[i].slot >= 0) Bind(local_slots[i], bit);
  }
  if (!put) return;
  // A Put may have evicted (or reused the bit of) an entry a local op waits on.
  std::vector<int32_t> stale;
  waiters_.ForEach([&](int32_t bit, TensorEntry*) {
    if (cache_->VersionAt(bit) != waiters_.VersionOf(bit)) stale.push_back(bit);
  });
  for (int32_t bit : stale) Uncache(bit);
}

}  // namespace chorus::runtime
