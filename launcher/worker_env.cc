#include "launcher/worker_env.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "base/config_names.h"

namespace chorus::launcher {
namespace {

std::string Bool(bool b) { return b ? "1" : "0"; }

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

class Builder {
 public:
  template <typename T>
  void Add(const char* name, const std::optional<T>& value) {
    if (value) vars_.emplace_back(name, Format(*value));
  }
  void Set(const char* name, std::string value) { vars_.emplace_back(name, std::move(value)); }
  std::vector<EnvVar> Take() { return std::move(vars_); }

 private:
  static std::string Format(bool v) { return Bool(v); }
  static std::string Format(double v) { return Decimal(v); }
  static std::string Format(const std::string& v) { return v; }
  template <typename T>
  static std::string Format(T v) {
    return absl::StrCat(v);
  }

  std::vector<EnvVar> vars_;
};

}  // namespace

std::vector<EnvVar> WorkerEnvironment(const LaunchOptions& o) {
  Builder b;
  if (o.fusion_threshold_mb) {
    b.Set(config_names::kFusionThreshold, absl::StrCat(*o.fusion_threshold_mb * 1024 * 1024));
  }
  b.Add(config_names::kCycleTimeMs, o.cycle_time_ms);
  b.Add(config_names::kCacheCapacity, o.cache_capacity);
  // Both forms travel: --no-hierarchical-* overrides a variable the caller's environment has.
  b.Add(config_names::kHierarchicalAllreduce, o.hierarchical_allreduce);
  b.Add(config_names::kHierarchicalAllgather, o.hierarchical_allgather);
  b.Add(config_names::kAutotune, o.autotune);
  b.Add(config_names::kAutotuneLog, o.autotune_log_file);
  b.Add(config_names::kAutotuneWarmupSamples, o.autotune_warmup_samples);
  b.Add(config_names::kAutotuneStepsPerSample, o.autotune_steps_per_sample);
  b.Add(config_names::kAutotuneBayesOptMaxSamples, o.autotune_bayes_opt_max_samples);
  b.Add(config_names::kAutotuneGaussianProcessNoise, o.autotune_gaussian_process_noise);
  // --mpi-threads-disable is refused (launcher/args.cc).
  // The timeline details only travel with a timeline file.
  if (o.timeline_filename) {
    b.Add(config_names::kTimeline, o.timeline_filename);
    b.Add(config_names::kTimelineMarkCycles, o.timeline_mark_cycles);
  }

  b.Add(config_names::kStallCheckDisable, o.no_stall_check);
  b.Add(config_names::kStallCheckTimeSeconds, o.stall_check_warning_time_seconds);
  b.Add(config_names::kStallShutdownTimeSeconds, o.stall_check_shutdown_time_seconds);

  b.Add(config_names::kNumNcclStreams, o.num_nccl_streams);
  if (o.tcp) {
    // Only TCP: NCCL without InfiniBand; UCX (--gloo's controller and data plane, the UCX data
    // plane in MPI mode) on its TCP transport alone, no shared memory or RDMA. MPI mode also
    // passes mpirun its TCP options (launcher/mpirun_command.cc).
    b.Set("NCCL_IB_DISABLE", "1");
    b.Set("UCX_TLS", "tcp");
  }
  if (!o.network_interfaces.empty()) {
    const std::string interfaces = absl::StrJoin(o.network_interfaces, ",");
    b.Set("NCCL_SOCKET_IFNAME", interfaces);
    // --gloo: UCX carries the controller and the CPU data plane, as Gloo does in horovodrun,
    // where the flag names the interface Gloo's connections use: UCX's network devices are
    // those interfaces (shared memory within a host is not a network device and stays). MPI
    // mode restricts Open MPI's TCP transport instead (launcher/mpirun_command.cc), as
    // horovodrun does.
    if (o.gloo) b.Set("UCX_NET_DEVICES", interfaces);
  }
  b.Add(config_names::kThreadAffinity, o.thread_affinity);
  // horovodrun's timeout for Gloo's operations is chorus's no-progress bound (both modes).
  b.Add(config_names::kNoProgressTimeoutSeconds, o.gloo_timeout_seconds);

  b.Add(config_names::kLogLevel, o.log_level);
  // Horovod's HOROVOD_LOG_HIDE_TIME is the inverse of --log-with-timestamp.
  if (o.log_with_timestamp) b.Set(config_names::kLogHideTime, Bool(!*o.log_with_timestamp));
  return b.Take();
}

}  // namespace chorus::launcher
