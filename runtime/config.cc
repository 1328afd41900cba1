// Config::FromEnvironment and Config::Describe, both driven by one table of variables.
//
// This is the only file of chorus that reads the process environment (::getenv).
#include "runtime/config.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "base/config_names.h"
#include "base/shortest_double.h"
#include "base/status_macros.h"

namespace chorus::runtime {
namespace {

// Parses `text` (already stripped) into the field of `config`; on failure returns the
// "expected ..." part of the error message.
using Parser = bool (*)(absl::string_view text, Config* config);
// Renders the field of `config` in a form its Parser accepts.
using Formatter = std::string (*)(const Config& config);

struct Variable {
  const char* name;        // CHORUS_* name; wins over the aliases
  const char* aliases[2];  // Horovod names, null-terminated
  const char* expected;    // "expected ..." text of the error for a bad value
  const char* help;        // one-line description; the default is Describe() of Config{}
  Parser parse;
  Formatter format;
};

bool ParseInt64(absl::string_view text, int64_t min, int64_t max, int64_t* out) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) return false;
  *out = value;
  return true;
}

// ParseInt64 into an int32_t field; REQUIRES: [min, max] within int32_t's range.
bool ParseInt32(absl::string_view text, int64_t min, int64_t max, int32_t* out) {
  int64_t value = 0;
  if (!ParseInt64(text, min, max, &value)) return false;
  *out = static_cast<int32_t>(value);
  return true;
}

bool ParseDouble(absl::string_view text, bool allow_zero, double* out) {
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) return false;
  if (value < 0 || (value == 0 && !allow_zero)) return false;
  *out = value;
  return true;
}

// Parses a number of `unit`s (absl::Milliseconds(1) or absl::Seconds(1)) as ParseDouble does, into
// a Duration it fits: too large a count would saturate to InfiniteDuration (which no variable
// means, and Describe() cannot render back), and where zero is not allowed, one so small that it
// rounds to zero is refused too.
bool ParseDuration(absl::string_view text, absl::Duration unit, bool allow_zero,
                   absl::Duration* out) {
  double count = 0;
  if (!ParseDouble(text, allow_zero, &count)) return false;
  const absl::Duration d = count * unit;
  if (d == absl::InfiniteDuration() || (d == absl::ZeroDuration() && !allow_zero)) return false;
  *out = d;
  return true;
}

bool ParseBool(absl::string_view text, bool* out) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") {
    *out = true;
    return true;
  }
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") {
    *out = false;
    return true;
  }
  return false;
}

std::string FormatBool(bool value) { return value ? "true" : "false"; }

constexpr int64_t kInt64Max = INT64_MAX;
constexpr int64_t kMinPipelineChunkBytes = 4096;
constexpr int64_t kMaxCacheCapacity = int64_t{1} << 20;
constexpr int64_t kMaxNcclStreams = 16;
constexpr int64_t kMaxAutotuneSamples = 1 << 20;
constexpr int64_t kMaxFlightRecorderEntries = 100000;  // about 56 MB of records

const Variable kVariables[] = {
    {config_names::kFusionThreshold,
     {"HOROVOD_FUSION_THRESHOLD", nullptr},
     "expected a non-negative integer number of bytes",
     "max bytes packed into one fused collective; 0 disables fusion",
     [](absl::string_view text, Config* c) {
       return ParseInt64(text, 0, kInt64Max, &c->fusion_threshold_bytes);
     },
     [](const Config& c) { return absl::StrCat(c.fusion_threshold_bytes); }},
    {config_names::kCycleTimeMs,
     {"HOROVOD_CYCLE_TIME", nullptr},
     "expected a positive number of milliseconds",
     "batching window of the background loop while work is pending (ends once local "
     "submissions pause; checked after 50 us, then at doubling intervals)",
     [](absl::string_view text, Config* c) {
       return ParseDuration(text, absl::Milliseconds(1), /*allow_zero=*/false, &c->cycle_time);
     },
     [](const Config& c) { return ShortestDouble(absl::ToDoubleMilliseconds(c.cycle_time)); }},
    {config_names::kCacheCapacity,
     {"HOROVOD_CACHE_CAPACITY", nullptr},
     "expected an integer number of entries in [0, 1048576]",
     "response cache entries; 0 disables the cache",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 0, kMaxCacheCapacity, &c->cache_capacity);
     },
     [](const Config& c) { return absl::StrCat(c.cache_capacity); }},
    {"CHORUS_PIPELINE_CHUNK_BYTES",
     {nullptr, nullptr},
     "expected an integer number of bytes >= 4096",
     "a fused batch is reduced in pieces of this many bytes",
     [](absl::string_view text, Config* c) {
       return ParseInt64(text, kMinPipelineChunkBytes, kInt64Max, &c->pipeline_chunk_bytes);
     },
     [](const Config& c) { return absl::StrCat(c.pipeline_chunk_bytes); }},
    {"CHORUS_INPLACE_MIN_BYTES",
     {nullptr, nullptr},
     "expected a non-negative integer number of bytes",
     "tensors of at least this many bytes are reduced in place, not copied into the fusion buffer",
     [](absl::string_view text, Config* c) {
       return ParseInt64(text, 0, kInt64Max, &c->inplace_min_bytes);
     },
     [](const Config& c) { return absl::StrCat(c.inplace_min_bytes); }},
    {"CHORUS_HUGE_PAGES",
     {nullptr, nullptr},
     "expected a boolean (1/0, true/false, yes/no, on/off)",
     "put CPU tensors reduced in place (MADV_COLLAPSE) and the fusion buffer on huge pages",
     [](absl::string_view text, Config* c) { return ParseBool(text, &c->huge_pages); },
     [](const Config& c) { return FormatBool(c.huge_pages); }},
    {config_names::kNumNcclStreams,
     {"HOROVOD_NUM_NCCL_STREAMS", nullptr},
     "expected an integer number of streams in [1, 16]",
     "NCCL streams (each with its communicator and fusion buffer) per process set",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 1, kMaxNcclStreams, &c->num_nccl_streams);
     },
     [](const Config& c) { return absl::StrCat(c.num_nccl_streams); }},
    {config_names::kStallCheckTimeSeconds,
     {"HOROVOD_STALL_CHECK_TIME_SECONDS", nullptr},
     "expected a positive number of seconds",
     "seconds after which the coordinator warns about a tensor some ranks have not submitted",
     [](absl::string_view text, Config* c) {
       return ParseDuration(text, absl::Seconds(1), /*allow_zero=*/false, &c->stall_warning_time);
     },
     [](const Config& c) { return ShortestDouble(absl::ToDoubleSeconds(c.stall_warning_time)); }},
    {config_names::kStallShutdownTimeSeconds,
     {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", nullptr},
     "expected a non-negative number of seconds (0 = never)",
     "seconds after which stalled ops fail with DeadlineExceeded on every rank; 0 = never",
     [](absl::string_view text, Config* c) {
       return ParseDuration(text, absl::Seconds(1), /*allow_zero=*/true, &c->stall_shutdown_time);
     },
     [](const Config& c) { return ShortestDouble(absl::ToDoubleSeconds(c.stall_shutdown_time)); }},
    {config_names::kStallCheckDisable,
     {"HOROVOD_STALL_CHECK_DISABLE", nullptr},
     "expected a boolean (1/0, true/false, yes/no, on/off)",
     "disables the stall inspector",
     [](absl::string_view text, Config* c) { return ParseBool(text, &c->stall_check_disabled); },
     [](const Config& c) { return FormatBool(c.stall_check_disabled); }},
    {"CHORUS_FLIGHT_RECORDER_ENTRIES",
     {nullptr, nullptr},
     "expected an integer number of entries in [0, 100000]",
     "collectives (batches) each rank's flight recorder keeps for its dumps; 0 = none",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 0, kMaxFlightRecorderEntries, &c->flight_recorder_entries);
     },
     [](const Config& c) { return absl::StrCat(c.flight_recorder_entries); }},
    {"CHORUS_FLIGHT_RECORDER_DIR",
     {nullptr, nullptr},
     "expected a directory path",
     "where each rank writes its flight recorder dump (rank<N>.json); empty: chorus-flight under "
     "$TMPDIR or /tmp",
     [](absl::string_view text, Config* c) {
       c->flight_recorder_dir = std::string(text);
       return true;
     },
     [](const Config& c) { return c.flight_recorder_dir; }},
    {"CHORUS_METRICS_PORT",
     {nullptr, nullptr},
     "expected a port number in [0, 65535]",
     "serve Prometheus metrics on this port + the local rank (the Python package's "
     "chorus.metrics); 0 = none",
     [](absl::string_view text, Config* c) { return ParseInt32(text, 0, 65535, &c->metrics_port); },
     [](const Config& c) { return absl::StrCat(c.metrics_port); }},
    {"CHORUS_IDLE_CYCLE_MS",
     {nullptr, nullptr},
     "expected a positive number of milliseconds",
     "how long an idle background loop sleeps between cycles",
     [](absl::string_view text, Config* c) {
       return ParseDuration(text, absl::Milliseconds(1), /*allow_zero=*/false, &c->idle_cycle_time);
     },
     [](const Config& c) { return ShortestDouble(absl::ToDoubleMilliseconds(c.idle_cycle_time)); }},
    {config_names::kNoProgressTimeoutSeconds,
     {"HOROVOD_GLOO_TIMEOUT_SECONDS", nullptr},
     "expected a non-negative number of seconds (0 = no bound)",
     "seconds the background loop may wait on its peers without any call completing (MPI, UCX, "
     "a launched GPU batch) before they are presumed lost: MPI ends the job with MPI_Abort, UCX "
     "and the GPU path stop chorus on the rank; 0 = no bound",
     [](absl::string_view text, Config* c) {
       return ParseDuration(text, absl::Seconds(1), /*allow_zero=*/true, &c->no_progress_timeout);
     },
     [](const Config& c) { return ShortestDouble(absl::ToDoubleSeconds(c.no_progress_timeout)); }},
    {config_names::kHierarchicalAllreduce,
     {"HOROVOD_HIERARCHICAL_ALLREDUCE", nullptr},
     "expected a boolean (1/0, true/false, yes/no, on/off)",
     "allreduce as reduce-scatter within each host, allreduce across hosts, allgather within "
     "each host (process sets with the same number of ranks on every host)",
     [](absl::string_view text, Config* c) { return ParseBool(text, &c->hierarchical_allreduce); },
     [](const Config& c) { return FormatBool(c.hierarchical_allreduce); }},
    {config_names::kHierarchicalAllgather,
     {"HOROVOD_HIERARCHICAL_ALLGATHER", nullptr},
     "expected a boolean (1/0, true/false, yes/no, on/off)",
     "CPU allgather as gather within each host, exchange across hosts, broadcast within each "
     "host (process sets with the same number of ranks on every host)",
     [](absl::string_view text, Config* c) { return ParseBool(text, &c->hierarchical_allgather); },
     [](const Config& c) { return FormatBool(c.hierarchical_allgather); }},
    {config_names::kAutotune,
     {"HOROVOD_AUTOTUNE", nullptr},
     "expected a boolean (1/0, true/false, yes/no, on/off)",
     "rank 0 tunes the fusion threshold, pipeline chunk, in-place minimum and cycle time",
     [](absl::string_view text, Config* c) { return ParseBool(text, &c->autotune); },
     [](const Config& c) { return FormatBool(c.autotune); }},
    {config_names::kAutotuneLog,
     {"HOROVOD_AUTOTUNE_LOG", nullptr},
     "expected a file path",
     "CSV file rank 0 appends one line per autotune sample to; empty: none",
     [](absl::string_view text, Config* c) {
       c->autotune_log = std::string(text);
       return true;
     },
     [](const Config& c) { return c.autotune_log; }},
    {config_names::kAutotuneWarmupSamples,
     {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", nullptr},
     "expected a non-negative integer number of samples",
     "autotune samples discarded before the search",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 0, kMaxAutotuneSamples, &c->autotune_warmup_samples);
     },
     [](const Config& c) { return absl::StrCat(c.autotune_warmup_samples); }},
    {config_names::kAutotuneStepsPerSample,
     {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", nullptr},
     "expected a positive integer number of steps",
     "training steps per autotune sample",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 1, kMaxAutotuneSamples, &c->autotune_steps_per_sample);
     },
     [](const Config& c) { return absl::StrCat(c.autotune_steps_per_sample); }},
    {config_names::kAutotuneBayesOptMaxSamples,
     {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", nullptr},
     "expected a positive integer number of samples",
     "samples of autotune's Bayesian optimisation; then the best is kept",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 1, kMaxAutotuneSamples, &c->autotune_bayes_opt_max_samples);
     },
     [](const Config& c) { return absl::StrCat(c.autotune_bayes_opt_max_samples); }},
    {config_names::kAutotuneGaussianProcessNoise,
     {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", nullptr},
     "expected a number in [0, 1]",
     "noise of autotune's Gaussian process, relative to the variance of the scores",
     [](absl::string_view text, Config* c) {
       double value = 0;
       if (!ParseDouble(text, /*allow_zero=*/true, &value) || value > 1) return false;
       c->autotune_gaussian_process_noise = value;
       return true;
     },
     [](const Config& c) { return ShortestDouble(c.autotune_gaussian_process_noise); }},
    {config_names::kLogLevel,
     {"HOROVOD_LOG_LEVEL", nullptr},
     "expected one of trace, debug, info, warning, error",
     "log level; Horovod's \"fatal\" is read as error",
     [](absl::string_view text, Config* c) {
       std::string lower = absl::AsciiStrToLower(text);
       if (lower == "fatal") lower = "error";
       if (lower != "trace" && lower != "debug" && lower != "info" && lower != "warning" &&
           lower != "error") {
         return false;
       }
       c->log_level = std::move(lower);
       return true;
     },
     [](const Config& c) { return c.log_level; }},
    {config_names::kLogHideTime,
     {"HOROVOD_LOG_HIDE_TIME", nullptr},
     "expected a boolean (1/0, true/false, yes/no, on/off)",
     "log lines without a timestamp",
     [](absl::string_view text, Config* c) { return ParseBool(text, &c->log_hide_time); },
     [](const Config& c) { return FormatBool(c.log_hide_time); }},
    {config_names::kThreadAffinity,
     {"HOROVOD_THREAD_AFFINITY", nullptr},
     "expected a comma-separated list of core ids (non-negative integers)",
     "the core of each local rank's background thread (one per local rank); empty: not pinned",
     [](absl::string_view text, Config* c) {
       std::vector<int> cores;
       for (absl::string_view item : absl::StrSplit(text, ',')) {
         int64_t core = 0;
         if (!ParseInt64(absl::StripAsciiWhitespace(item), 0, 1 << 20, &core)) return false;
         cores.push_back(static_cast<int>(core));
       }
       c->thread_affinity = std::move(cores);
       return true;
     },
     [](const Config& c) { return absl::StrJoin(c.thread_affinity, ","); }},
    {"CHORUS_PRINT_CONFIG",
     {nullptr, nullptr},
     "expected a boolean (1/0, true/false, yes/no, on/off)",
     "rank 0 logs the effective configuration at init",
     [](absl::string_view text, Config* c) { return ParseBool(text, &c->print_config); },
     [](const Config& c) { return FormatBool(c.print_config); }},
    {config_names::kTimeline,
     {"HOROVOD_TIMELINE", nullptr},
     "expected a file path or DYNAMIC",
     "timeline file recorded from init (DYNAMIC: only start_timeline() records); empty: none",
     [](absl::string_view text, Config* c) {
       c->timeline = std::string(text);
       return true;
     },
     [](const Config& c) { return c.timeline; }},
    {config_names::kTimelineMarkCycles,
     {"HOROVOD_TIMELINE_MARK_CYCLES", nullptr},
     "expected a boolean (1/0, true/false, yes/no, on/off)",
     "a CYCLE_START mark per background cycle in the timeline",
     [](absl::string_view text, Config* c) { return ParseBool(text, &c->timeline_mark_cycles); },
     [](const Config& c) { return FormatBool(c.timeline_mark_cycles); }},
    {"CHORUS_TIMELINE_ALL_RANKS",
     {nullptr, nullptr},
     "expected a boolean (1/0, true/false, yes/no, on/off)",
     "every rank records its own timeline file (default: rank 0 only)",
     [](absl::string_view text, Config* c) { return ParseBool(text, &c->timeline_all_ranks); },
     [](const Config& c) { return FormatBool(c.timeline_all_ranks); }},
    {"CHORUS_TIMELINE_MAX_MB",
     {nullptr, nullptr},
     "expected a non-negative number of MiB (0 = no cap)",
     "size cap of a timeline file in MiB; 0 = no cap",
     [](absl::string_view text, Config* c) {
       double mb = 0;
       if (!ParseDouble(text, /*allow_zero=*/true, &mb) || mb > 1e9) return false;
       c->timeline_max_bytes = static_cast<int64_t>(mb * 1048576.0);
       return true;
     },
     [](const Config& c) {
       return ShortestDouble(static_cast<double>(c.timeline_max_bytes) / 1048576.0);
     }},
    {"CHORUS_TIMELINE_QUEUE_EVENTS",
     {nullptr, nullptr},
     "expected a positive integer number of events",
     "timeline events waiting for the writer thread before more are dropped",
     [](absl::string_view text, Config* c) {
       return ParseInt64(text, 1, kInt64Max, &c->timeline_queue_events);
     },
     [](const Config& c) { return absl::StrCat(c.timeline_queue_events); }},
    {"CHORUS_TIMELINE_START_CYCLE",
     {nullptr, nullptr},
     "expected a non-negative integer cycle number",
     "the timeline records background cycles from this one on",
     [](absl::string_view text, Config* c) {
       return ParseInt64(text, 0, kInt64Max, &c->timeline_start_cycle);
     },
     [](const Config& c) { return absl::StrCat(c.timeline_start_cycle); }},
    {"CHORUS_TIMELINE_STOP_CYCLE",
     {nullptr, nullptr},
     "expected a non-negative integer cycle number (0 = no end)",
     "the timeline file is completed at this background cycle; 0 = at shutdown",
     [](absl::string_view text, Config* c) {
       return ParseInt64(text, 0, kInt64Max, &c->timeline_stop_cycle);
     },
     [](const Config& c) { return absl::StrCat(c.timeline_stop_cycle); }},
    {"CHORUS_CONTROLLER",
     {nullptr, nullptr},
     "expected auto, mpi or ucx",
     "control and data plane: auto (UCX when started by chorusrun --gloo, else MPI), mpi, ucx",
     [](absl::string_view text, Config* c) {
       std::string lower = absl::AsciiStrToLower(text);
       if (lower != "auto" && lower != "mpi" && lower != "ucx") return false;
       c->controller = std::move(lower);
       return true;
     },
     [](const Config& c) { return c.controller; }},
    {config_names::kRendezvousAddr,
     {nullptr, nullptr},
     "expected host:port",
     "rendezvous service of an MPI-less launch (set by chorusrun --gloo)",
     [](absl::string_view text, Config* c) {
       const size_t colon = text.rfind(':');
       int64_t port = 0;
       if (colon == absl::string_view::npos || colon == 0 ||
           !ParseInt64(text.substr(colon + 1), 1, 65535, &port)) {
         return false;
       }
       c->rendezvous_addr = std::string(text);
       return true;
     },
     [](const Config& c) { return c.rendezvous_addr; }},
    {config_names::kRendezvousSecret,
     {nullptr, nullptr},
     "expected the job's secret",
     "secret of the rendezvous service (set by chorusrun --gloo)",
     [](absl::string_view text, Config* c) {
       c->rendezvous_secret = std::string(text);
       return true;
     },
     [](const Config& c) { return std::string(c.rendezvous_secret.empty() ? "" : "(set)"); }},
    {config_names::kRendezvousScope,
     {nullptr, nullptr},
     "expected a non-empty scope name",
     "rendezvous scope of this world's keys",
     [](absl::string_view text, Config* c) {
       if (text.empty()) return false;
       c->rendezvous_scope = std::string(text);
       return true;
     },
     [](const Config& c) { return c.rendezvous_scope; }},
    {config_names::kStartTimeoutSeconds,
     {"HOROVOD_START_TIMEOUT", nullptr},
     "expected a positive number of seconds",
     "how long an MPI-less launch waits for every rank to join",
     [](absl::string_view text, Config* c) {
       return ParseDuration(text, absl::Seconds(1), /*allow_zero=*/false, &c->start_timeout);
     },
     [](const Config& c) { return ShortestDouble(absl::ToDoubleSeconds(c.start_timeout)); }},
    {config_names::kElasticWorkerId,
     {nullptr, nullptr},
     "expected a non-empty worker id",
     "this worker's id in an elastic job (set by chorusrun; enables the membership watcher)",
     [](absl::string_view text, Config* c) {
       if (text.empty()) return false;
       c->elastic_worker_id = std::string(text);
       return true;
     },
     [](const Config& c) { return c.elastic_worker_id; }},
    {config_names::kElasticGeneration,
     {nullptr, nullptr},
     "expected an integer >= -1",
     "the generation this worker's world belongs to, -1 while it joins (set by chorusrun)",
     [](absl::string_view text, Config* c) {
       return ParseInt64(text, -1, kInt64Max, &c->elastic_generation);
     },
     [](const Config& c) { return absl::StrCat(c.elastic_generation); }},
    {config_names::kElastic,
     {nullptr, nullptr},
     "expected a boolean",
     "whether this worker belongs to an elastic job (set by chorusrun)",
     [](absl::string_view text, Config* c) { return ParseBool(text, &c->elastic); },
     [](const Config& c) { return FormatBool(c.elastic); }},
    {config_names::kElasticTimeout,
     {"HOROVOD_ELASTIC_TIMEOUT", nullptr},
     "expected a positive number of seconds",
     "how long an elastic worker waits for chorusrun's next generation",
     [](absl::string_view text, Config* c) {
       return ParseDuration(text, absl::Seconds(1), /*allow_zero=*/false, &c->elastic_timeout);
     },
     [](const Config& c) { return ShortestDouble(absl::ToDoubleSeconds(c.elastic_timeout)); }},
    {config_names::kRank,
     {"HOROVOD_RANK", nullptr},
     "expected a non-negative integer",
     "this worker's rank in an MPI-less launch",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 0, INT32_MAX, &c->launch_rank);
     },
     [](const Config& c) {
       return c.launch_rank < 0 ? std::string() : absl::StrCat(c.launch_rank);
     }},
    {config_names::kSize,
     {"HOROVOD_SIZE", nullptr},
     "expected a non-negative integer",
     "ranks of an MPI-less launch",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 0, INT32_MAX, &c->launch_size);
     },
     [](const Config& c) {
       return c.launch_size < 0 ? std::string() : absl::StrCat(c.launch_size);
     }},
    {config_names::kLocalRank,
     {"HOROVOD_LOCAL_RANK", nullptr},
     "expected a non-negative integer",
     "rank among the workers on this host",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 0, INT32_MAX, &c->launch_local_rank);
     },
     [](const Config& c) {
       return c.launch_local_rank < 0 ? std::string() : absl::StrCat(c.launch_local_rank);
     }},
    {config_names::kLocalSize,
     {"HOROVOD_LOCAL_SIZE", nullptr},
     "expected a non-negative integer",
     "workers on this host",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 0, INT32_MAX, &c->launch_local_size);
     },
     [](const Config& c) {
       return c.launch_local_size < 0 ? std::string() : absl::StrCat(c.launch_local_size);
     }},
    {config_names::kCrossRank,
     {"HOROVOD_CROSS_RANK", nullptr},
     "expected a non-negative integer",
     "index of this host among the hosts with this local rank",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 0, INT32_MAX, &c->launch_cross_rank);
     },
     [](const Config& c) {
       return c.launch_cross_rank < 0 ? std::string() : absl::StrCat(c.launch_cross_rank);
     }},
    {config_names::kCrossSize,
     {"HOROVOD_CROSS_SIZE", nullptr},
     "expected a non-negative integer",
     "hosts with this local rank",
     [](absl::string_view text, Config* c) {
       return ParseInt32(text, 0, INT32_MAX, &c->launch_cross_size);
     },
     [](const Config& c) {
       return c.launch_cross_size < 0 ? std::string() : absl::StrCat(c.launch_cross_size);
     }},
};

// A peer with nothing to do runs a cycle (and so answers its peers' negotiation) only once
// per idle cycle time, or cycle time while some rank has ops pending: a no-progress bound
// below twice that would end healthy jobs. `read_as` maps a variable's CHORUS_* name to the name
// its value was read under (a Horovod alias, when only that was set): the message names what the
// user set.
absl::Status CheckNoProgressTimeout(const Config& c,
                                    const std::map<absl::string_view, const char*>& read_as) {
  const auto name = [&read_as](const char* canonical) {
    auto it = read_as.find(canonical);
    return it == read_as.end() ? canonical : it->second;
  };
  if (c.no_progress_timeout == absl::ZeroDuration()) return absl::OkStatus();
  const absl::Duration cycle = std::max(c.idle_cycle_time, c.cycle_time);
  if (c.no_progress_timeout > 2 * cycle) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      name("CHORUS_NO_PROGRESS_TIMEOUT_SECONDS"), "=",
      ShortestDouble(absl::ToDoubleSeconds(c.no_progress_timeout)), " must exceed twice ",
      name(c.idle_cycle_time >= c.cycle_time ? "CHORUS_IDLE_CYCLE_MS" : config_names::kCycleTimeMs),
      " (", ShortestDouble(absl::ToDoubleMilliseconds(cycle)),
      " ms): a peer with nothing to do answers only once per cycle; raise it, or set it to 0 to "
      "disable the bound"));
}

}  // namespace

absl::Status Config::Adopt(const std::map<std::string, std::string>& place) {
  for (const Variable& var : kVariables) {
    auto it = place.find(var.name);
    if (it == place.end()) continue;
    if (!var.parse(absl::StripAsciiWhitespace(it->second), this)) {
      return absl::InvalidArgumentError(
          absl::StrCat(var.name, "=\"", it->second, "\" (from chorusrun): ", var.expected));
    }
  }
  return absl::OkStatus();
}

namespace {

// Reads every variable set into `config` (`read_as`: the name each was read under). Error: the
// first one that does not parse; the others are read all the same.
absl::Status ReadVariables(const Config::Lookup& lookup, Config* config,
                           std::map<absl::string_view, const char*>* read_as) {
  const Config::Lookup get =
      lookup ? lookup : Config::Lookup([](const char* name) { return ::getenv(name); });
  absl::Status first_error;
  for (const Variable& var : kVariables) {
    const char* read_name = var.name;
    const char* value = get(var.name);
    for (const char* alias : var.aliases) {
      if (value != nullptr || alias == nullptr) break;
      read_name = alias;
      value = get(alias);
    }
    if (value == nullptr) continue;
    (*read_as)[var.name] = read_name;
    if (!var.parse(absl::StripAsciiWhitespace(value), config) && first_error.ok()) {
      first_error =
          absl::InvalidArgumentError(absl::StrCat(read_name, "=\"", value, "\": ", var.expected));
    }
  }
  // Retired: one bound for every transport (Note [No-progress bound]).
  if (first_error.ok() && get("CHORUS_GPU_OP_TIMEOUT_SECONDS") != nullptr) {
    first_error = absl::InvalidArgumentError(
        "CHORUS_GPU_OP_TIMEOUT_SECONDS is replaced by CHORUS_NO_PROGRESS_TIMEOUT_SECONDS, which "
        "bounds GPU batches as it bounds MPI and UCX calls: set that instead");
  }
  return first_error;
}

}  // namespace

absl::StatusOr<Config> Config::FromEnvironment(const Lookup& lookup) {
  Config config;
  std::map<absl::string_view, const char*> read_as;
  CHORUS_RETURN_IF_ERROR(ReadVariables(lookup, &config, &read_as));
  CHORUS_RETURN_IF_ERROR(CheckNoProgressTimeout(config, read_as));
  return config;
}

Config Config::FromEnvironmentLenient(const Lookup& lookup) {
  Config config;
  std::map<absl::string_view, const char*> read_as;
  ReadVariables(lookup, &config, &read_as).IgnoreError();
  return config;
}

bool Config::Reads(const std::string& name) {
  for (const Variable& var : kVariables) {
    if (name == var.name) return true;
    for (const char* alias : var.aliases) {
      if (alias != nullptr && name == alias) return true;
    }
  }
  return false;
}

std::vector<std::string> Config::UnreadVariables() {
  // Set for the workers' programs or for chorusrun itself, not for the runtime.
  static const char* const kNotForTheRuntime[] = {
      "HOROVOD_HOSTNAME", "CHORUS_ELASTIC_DISCOVERY_INTERVAL", "HOROVOD_ELASTIC_TIMEOUT",
      "HOROVOD_START_TIMEOUT"};
  std::vector<std::string> unread;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const absl::string_view entry = *e;
    const std::string name(entry.substr(0, entry.find('=')));
    if (!absl::StartsWith(name, "CHORUS_") && !absl::StartsWith(name, "HOROVOD_")) continue;
    if (absl::StartsWith(name, "CHORUS_TEST_") || Reads(name)) continue;
    if (std::find(std::begin(config_names::kInformational), std::end(config_names::kInformational),
                  name) != std::end(config_names::kInformational) ||
        std::find(std::begin(kNotForTheRuntime), std::end(kNotForTheRuntime), name) !=
            std::end(kNotForTheRuntime)) {
      continue;
    }
    unread.push_back(name);
  }
  std::sort(unread.begin(), unread.end());
  return unread;
}

std::vector<Config::VariableInfo> Config::Variables() {
  const Config defaults;
  std::vector<VariableInfo> out;
  out.reserve(std::size(kVariables));
  for (const Variable& var : kVariables) {
    VariableInfo info{var.name, {}, var.help, var.format(defaults)};
    for (const char* alias : var.aliases) {
      if (alias != nullptr) info.aliases.emplace_back(alias);
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<std::string> Config::Describe() const {
  std::vector<std::string> lines;
  lines.reserve(std::size(kVariables));
  for (const Variable& var : kVariables) {
    lines.push_back(absl::StrCat(var.name, "=", var.format(*this)));
  }
  return lines;
}

}  // namespace chorus::runtime
