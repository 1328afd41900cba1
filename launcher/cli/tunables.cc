#include "launcher/cli/tunables.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "base/config_names.h"

namespace chorus::launcher {
namespace {

using Range = Tunable::Range;
constexpr Range kNonNegative = {0, DBL_MAX, false, "a value >= 0"};
constexpr Range kPositive = {1, DBL_MAX, false, "a value >= 1"};
// The largest threshold whose bytes fit an int64.
static_assert((INT64_MAX >> 20) == 8796093022207);
constexpr Range kFusionMebibytes = {0, static_cast<double>(INT64_MAX >> 20), false,
                                    "[0, 8796093022207]"};

// Lower-cases --log-level and checks it against horovodrun's choices.
absl::Status CheckLogLevel(const char* flag, std::string* value) {
  const std::string lower = absl::AsciiStrToLower(*value);
  for (const char* known : {"trace", "debug", "info", "warning", "error", "fatal"}) {
    if (lower == known) {
      *value = lower;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(flag, "=", *value, " is not one of TRACE, DEBUG, INFO, WARNING, ERROR, FATAL"));
}

absl::Status CheckCoreList(const char* flag, std::string* value) {
  for (absl::string_view core : absl::StrSplit(*value, ',')) {
    int id = 0;
    if (!absl::SimpleAtoi(core, &id) || id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, "=", *value, " is not a comma-separated list of core ids (integers >= 0)"));
    }
  }
  return absl::OkStatus();
}

std::vector<Tunable> MakeTunables() {
  namespace n = config_names;
  using O = LaunchOptions;
  using E = Tunable::Export;
  return {
      // horovodrun's tunable parameters.
      {.field = &O::fusion_threshold_mb,
       .flag = "--fusion-threshold-mb",
       .help = "Fusion buffer threshold in MB; 0 disables tensor fusion (default: 128).",
       .config_keys = {{"params", "fusion_threshold_mb"}},
       .variable = n::kFusionThreshold,
       .export_as = E::kMebibytesToBytes,
       .range = kFusionMebibytes},
      {.field = &O::cycle_time_ms,
       .flag = "--cycle-time-ms",
       .help = "Cycle time in ms between tensor fusion cycles (default: 1).",
       .config_keys = {{"params", "cycle_time_ms"}},
       .variable = n::kCycleTimeMs,
       .range = Range{0, DBL_MAX, true, "a number of milliseconds > 0"}},
      {.field = &O::cache_capacity,
       .flag = "--cache-capacity",
       .help = "Maximum number of tensor names cached (default: 4096).",
       .config_keys = {{"params", "cache_capacity"}},
       .variable = n::kCacheCapacity,
       .range = Range{0, 1 << 20, false, "[0, 1048576]"}},
      {.field = &O::hierarchical_allreduce,
       .flag = "--hierarchical-allreduce",
       .off_flag = "--no-hierarchical-allreduce",
       .help = "Perform hierarchical allreduce.",
       .config_keys = {{"params", "hierarchical_allreduce"}},
       .variable = n::kHierarchicalAllreduce},
      {.field = &O::hierarchical_allgather,
       .flag = "--hierarchical-allgather",
       .off_flag = "--no-hierarchical-allgather",
       .help = "Perform hierarchical allgather.",
       .config_keys = {{"params", "hierarchical_allgather"}},
       .variable = n::kHierarchicalAllgather},

      // Autotune.
      {.field = &O::autotune,
       .flag = "--autotune",
       .off_flag = "--no-autotune",
       .help = "Autotune the fusion threshold, pipeline chunk size, in-place minimum and cycle "
               "time for the most bytes reduced per second; the values above are the start.",
       .config_keys = {{"autotune", "enabled"}},
       .variable = n::kAutotune},
      {.field = &O::autotune_log_file,
       .flag = "--autotune-log-file",
       .help = "CSV file rank 0 writes one line per autotune sample to.",
       .config_keys = {{"autotune", "log_file"}},
       .variable = n::kAutotuneLog},
      {.field = &O::autotune_warmup_samples,
       .flag = "--autotune-warmup-samples",
       .help = "Samples discarded before autotuning (default: 3).",
       .config_keys = {{"autotune", "warmup_samples"}},
       .variable = n::kAutotuneWarmupSamples,
       .range = kNonNegative},
      {.field = &O::autotune_steps_per_sample,
       .flag = "--autotune-steps-per-sample",
       .help = "Training steps per autotune sample (default: 10).",
       .config_keys = {{"autotune", "steps_per_sample"}},
       .variable = n::kAutotuneStepsPerSample,
       .range = kPositive},
      {.field = &O::autotune_bayes_opt_max_samples,
       .flag = "--autotune-bayes-opt-max-samples",
       .help = "Samples of the Bayesian optimization, the start included; then the best is kept "
               "(default: 20).",
       .config_keys = {{"autotune", "bayes_opt_max_samples"}},
       .variable = n::kAutotuneBayesOptMaxSamples,
       .range = kPositive},
      {.field = &O::autotune_gaussian_process_noise,
       .flag = "--autotune-gaussian-process-noise",
       .help = "Largest noise of the Gaussian process, relative to the variance of the scores, "
               "in [0, 1] (default: 0.8).",
       .config_keys = {{"autotune", "gaussian_process_noise"}},
       .variable = n::kAutotuneGaussianProcessNoise,
       .range = Range{0, 1, false, "[0, 1]"}},

      // Timeline.
      {.field = &O::timeline_filename,
       .flag = "--timeline-filename",
       .help = "JSON timeline file, recorded by rank 0; a {rank} in the name makes every rank "
               "record its own (docs/timeline.md).",
       .config_keys = {{"timeline", "filename"}},
       .variable = n::kTimeline},
      {.field = &O::timeline_mark_cycles,
       .flag = "--timeline-mark-cycles",
       .off_flag = "--no-timeline-mark-cycles",
       .help = "Mark cycles on the timeline.",
       .config_keys = {{"timeline", "mark_cycles"}},
       .variable = n::kTimelineMarkCycles,
       .export_as = E::kWithTimeline},

      // Stall check. --no-stall-check sets no_stall_check; --stall-check clears it.
      {.field = &O::no_stall_check,
       .flag = "--no-stall-check",
       .off_flag = "--stall-check",
       .help = "Disable the stall check.",
       .config_keys = {{"stall_check", "enabled", /*inverted=*/true}},
       .variable = n::kStallCheckDisable},
      {.field = &O::stall_check_warning_time_seconds,
       .flag = "--stall-check-warning-time-seconds",
       .help = "Seconds until the stall warning is logged (default: 60).",
       .config_keys = {{"stall_check", "warning_time_seconds"}},
       .variable = n::kStallCheckTimeSeconds,
       .range = kNonNegative},
      {.field = &O::stall_check_shutdown_time_seconds,
       .flag = "--stall-check-shutdown-time-seconds",
       .help = "Seconds until a stall shuts the job down; 0 = never (default: 0).",
       .config_keys = {{"stall_check", "shutdown_time_seconds"}},
       .variable = n::kStallShutdownTimeSeconds,
       .range = kNonNegative},

      // Library options.
      {.field = &O::mpi_threads_disable,
       .flag = "--mpi-threads-disable",
       .off_flag = "--no-mpi-threads-disable",
       .help = "Disable MPI threading support.",
       .config_keys = {{"library_options", "mpi_threads_disable"}},
       .refused_when_true =
           "chorus calls MPI from its background thread and its progress watchdog, not only "
           "from the thread that initialised MPI, so it needs MPI_THREAD_MULTIPLE"},
      {.field = &O::num_nccl_streams,
       .flag = "--num-nccl-streams",
       .help = "Number of NCCL streams.",
       .config_keys = {{"library_options", "num_nccl_streams"}},
       .variable = n::kNumNcclStreams,
       .range = kNonNegative},
      {.field = &O::thread_affinity,
       .flag = "--thread-affinity",
       .help = "Background thread affinity: the core of each local rank's background thread, a "
               "comma-separated list of core ids, one per local rank.",
       .config_keys = {{"library_options", "thread_affinity"}},
       .variable = n::kThreadAffinity,
       .check_text = CheckCoreList},
      // horovodrun's timeout for Gloo's operations is chorus's no-progress bound (both modes).
      {.field = &O::gloo_timeout_seconds,
       .flag = "--gloo-timeout-seconds",
       .help = "Seconds a collective may go without progress before its job ends "
               "(CHORUS_NO_PROGRESS_TIMEOUT_SECONDS; both modes; 0: no bound).",
       .config_keys = {{"library_options", "gloo_timeout_seconds"}},
       .variable = n::kNoProgressTimeoutSeconds,
       .range = kNonNegative},

      // Logging.
      {.field = &O::log_level,
       .flag = "--log-level",
       .help = "TRACE, DEBUG, INFO, WARNING, ERROR or FATAL (default: WARNING).",
       .config_keys = {{"logging", "level"}},
       .variable = n::kLogLevel,
       .check_text = CheckLogLevel},
      // Horovod's HOROVOD_LOG_HIDE_TIME is the inverse of --log-with-timestamp.
      {.field = &O::log_with_timestamp,
       .flag = "--log-with-timestamp",
       .off_flag = "--log-without-timestamp",
       .help = "Timestamp chorus's own log lines.",
       .config_keys = {{"logging", "with_timestamp"},
                       {"logging", "hide_timestamp", /*inverted=*/true}},
       .variable = n::kLogHideTime,
       .export_as = E::kInverted},
  };
}

// The shortest decimal that reads back as `value` (so 0.5 -> "0.5", not "0.500000").
std::string Decimal(double value) {
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    double back = 0;
    if (std::sscanf(buffer, "%lf", &back) == 1 && back == value) break;
  }
  return buffer;
}

std::string Format(bool v) { return v ? "1" : "0"; }
std::string Format(double v) { return Decimal(v); }
std::string Format(const std::string& v) { return v; }
template <typename T>
std::string Format(T v) {
  return absl::StrCat(v);
}

template <typename T>
absl::Status Check(const Tunable& t, std::optional<T>* value) {
  if (!value->has_value()) return absl::OkStatus();
  if constexpr (std::is_same_v<T, bool>) {
    if (t.refused_when_true != nullptr && **value) {
      return absl::InvalidArgumentError(
          absl::StrCat(t.flag, " is not supported: ", t.refused_when_true));
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (t.check_text != nullptr) return t.check_text(t.flag, &**value);
  } else {
    if (t.range.has_value()) {
      const double v = static_cast<double>(**value);
      const Range& r = *t.range;
      const bool ok = (r.low_open ? v > r.low : v >= r.low) && v <= r.high;  // false for NaN
      return CheckRange(ok, t.flag, absl::StrCat(**value), r.accepted);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRange(bool ok, absl::string_view flag, absl::string_view value,
                        absl::string_view accepted) {
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, "=", value, " is out of range: expected ", accepted));
}

const std::vector<Tunable>& Tunables() {
  static const auto* tunables = new std::vector<Tunable>(MakeTunables());
  return *tunables;
}

absl::Status CheckTunables(LaunchOptions* options) {
  for (const Tunable& t : Tunables()) {
    absl::Status status =
        std::visit([&](auto field) { return Check(t, &(options->*field)); }, t.field);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> TunableVariables(const LaunchOptions& options) {
  std::vector<std::pair<std::string, std::string>> vars;
  for (const Tunable& t : Tunables()) {
    if (t.variable == nullptr) continue;
    if (t.export_as == Tunable::Export::kWithTimeline && !options.timeline_filename) continue;
    std::visit(
        [&](auto field) {
          const auto& value = options.*field;
          if (!value.has_value()) return;
          using T = std::decay_t<decltype(*value)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            if (t.export_as == Tunable::Export::kMebibytesToBytes) {
              vars.emplace_back(t.variable, absl::StrCat(*value * 1024 * 1024));
              return;
            }
          }
          if constexpr (std::is_same_v<T, bool>) {
            if (t.export_as == Tunable::Export::kInverted) {
              vars.emplace_back(t.variable, Format(!*value));
              return;
            }
          }
          vars.emplace_back(t.variable, Format(*value));
        },
        t.field);
  }
  return vars;
}

}  // namespace chorus::launcher
