#include "launcher/worker_env.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
    b.Set("CHORUS_FUSION_THRESHOLD", absl::StrCat(*o.fusion_threshold_mb * 1024 * 1024));
  }
  b.Add("CHORUS_CYCLE_TIME_MS", o.cycle_time_ms);
  b.Add("CHORUS_CACHE_CAPACITY", o.cache_capacity);
  b.Add("CHORUS_HIERARCHICAL_ALLREDUCE", o.hierarchical_allreduce);
  b.Add("CHORUS_HIERARCHICAL_ALLGATHER", o.hierarchical_allgather);

  // As horovodrun: the autotune details only travel when autotuning is on.
  if (o.autotune.value_or(false)) {
    b.Add("CHORUS_AUTOTUNE", o.autotune);
    b.Add("CHORUS_AUTOTUNE_LOG", o.autotune_log_file);
    b.Add("CHORUS_AUTOTUNE_WARMUP_SAMPLES", o.autotune_warmup_samples);
    b.Add("CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", o.autotune_steps_per_sample);
    b.Add("CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", o.autotune_bayes_opt_max_samples);
    b.Add("CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", o.autotune_gaussian_process_noise);
  }
  // The timeline details only travel with a timeline file.
  if (o.timeline_filename) {
    b.Add("CHORUS_TIMELINE", o.timeline_filename);
    b.Add("CHORUS_TIMELINE_MARK_CYCLES", o.timeline_mark_cycles);
  }

  b.Add("CHORUS_STALL_CHECK_DISABLE", o.no_stall_check);
  b.Add("CHORUS_STALL_CHECK_TIME_SECONDS", o.stall_check_warning_time_seconds);
  b.Add("CHORUS_STALL_SHUTDOWN_TIME_SECONDS", o.stall_check_shutdown_time_seconds);

  b.Add("CHORUS_MPI_THREADS_DISABLE", o.mpi_threads_disable);
  b.Add("CHORUS_NUM_NCCL_STREAMS", o.num_nccl_streams);
  if (o.tcp) b.Set("NCCL_IB_DISABLE", "1");
  if (!o.network_interfaces.empty()) {
    b.Set("NCCL_SOCKET_IFNAME", absl::StrJoin(o.network_interfaces, ","));
  }
  b.Add("CHORUS_THREAD_AFFINITY", o.thread_affinity);
  b.Add("CHORUS_GLOO_TIMEOUT_SECONDS", o.gloo_timeout_seconds);

  b.Add("CHORUS_LOG_LEVEL", o.log_level);
  // Horovod's HOROVOD_LOG_HIDE_TIME is the inverse of --log-with-timestamp.
  if (o.log_with_timestamp) b.Set("CHORUS_LOG_HIDE_TIME", Bool(!*o.log_with_timestamp));
  return b.Take();
}

}  // namespace chorus::launcher
