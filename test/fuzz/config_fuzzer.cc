// Fuzzes the runtime's configuration (runtime/config.h): Config::FromEnvironment over a lookup
// fed from the input, i.e. whatever CHORUS_* and HOROVOD_* variables a user (or chorusrun) set.
//
// Input (FuzzedDataProvider): variables until the input ends, each a name (mostly one the runtime
// reads, sometimes any bytes) and a value (any bytes up to the first NUL, as the environment
// holds them).
//
// Properties: no crash; an error is InvalidArgument and names a variable that is set; an accepted
// configuration has its values in the documented ranges, and Describe() renders every value in a
// form its variable accepts.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "runtime/config.h"
#include "test/fuzz/fuzz_check.h"

namespace chorus::runtime {
namespace {

// Every variable the runtime reads (runtime/config.cc), with the Horovod aliases.
const char* const kNames[] = {
    "CHORUS_FUZZION_THRESHOLD",  // not read: an unknown variable is ignored
    "CHORUS_FUSION_THRESHOLD",
    "HOROVOD_FUSION_THRESHOLD",
    "CHORUS_CYCLE_TIME_MS",
    "HOROVOD_CYCLE_TIME",
    "CHORUS_CACHE_CAPACITY",
    "HOROVOD_CACHE_CAPACITY",
    "CHORUS_PIPELINE_CHUNK_BYTES",
    "CHORUS_INPLACE_MIN_BYTES",
    "CHORUS_HUGE_PAGES",
    "CHORUS_NUM_NCCL_STREAMS",
    "HOROVOD_NUM_NCCL_STREAMS",
    "CHORUS_GPU_OP_TIMEOUT_SECONDS",
    "CHORUS_STALL_CHECK_TIME_SECONDS",
    "HOROVOD_STALL_CHECK_TIME_SECONDS",
    "CHORUS_STALL_SHUTDOWN_TIME_SECONDS",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
    "CHORUS_STALL_CHECK_DISABLE",
    "HOROVOD_STALL_CHECK_DISABLE",
    "CHORUS_IDLE_CYCLE_MS",
    "CHORUS_NO_PROGRESS_TIMEOUT_SECONDS",
    "CHORUS_LOG_LEVEL",
    "HOROVOD_LOG_LEVEL",
    "CHORUS_PRINT_CONFIG",
    "CHORUS_TIMELINE",
    "HOROVOD_TIMELINE",
    "CHORUS_TIMELINE_MARK_CYCLES",
    "HOROVOD_TIMELINE_MARK_CYCLES",
    "CHORUS_TIMELINE_ALL_RANKS",
    "CHORUS_TIMELINE_MAX_MB",
    "CHORUS_TIMELINE_QUEUE_EVENTS",
    "CHORUS_TIMELINE_START_CYCLE",
    "CHORUS_TIMELINE_STOP_CYCLE",
    "CHORUS_CONTROLLER",
    "CHORUS_RENDEZVOUS_ADDR",
    "CHORUS_RENDEZVOUS_SECRET",
    "CHORUS_RENDEZVOUS_SCOPE",
    "CHORUS_START_TIMEOUT_SECONDS",
    "HOROVOD_START_TIMEOUT",
    "CHORUS_ELASTIC_WORKER_ID",
    "CHORUS_ELASTIC_GENERATION",
    "CHORUS_ELASTIC",
    "CHORUS_ELASTIC_TIMEOUT",
    "HOROVOD_ELASTIC_TIMEOUT",
    "CHORUS_RANK",
    "HOROVOD_RANK",
    "CHORUS_SIZE",
    "HOROVOD_SIZE",
    "CHORUS_LOCAL_RANK",
    "HOROVOD_LOCAL_RANK",
    "CHORUS_LOCAL_SIZE",
    "HOROVOD_LOCAL_SIZE",
    "CHORUS_CROSS_RANK",
    "HOROVOD_CROSS_RANK",
    "CHORUS_CROSS_SIZE",
    "HOROVOD_CROSS_SIZE",
};

using Env = std::map<std::string, std::string>;

absl::StatusOr<Config> Read(const Env& env) {
  return Config::FromEnvironment([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

void CheckRanges(const Config& c) {
  FUZZ_CHECK(c.fusion_threshold_bytes >= 0) << c.fusion_threshold_bytes;
  FUZZ_CHECK(c.cycle_time > absl::ZeroDuration()) << c.cycle_time;
  FUZZ_CHECK(c.cache_capacity >= 0 && c.cache_capacity <= (1 << 20)) << c.cache_capacity;
  FUZZ_CHECK(c.pipeline_chunk_bytes >= 4096) << c.pipeline_chunk_bytes;
  FUZZ_CHECK(c.inplace_min_bytes >= 0) << c.inplace_min_bytes;
  FUZZ_CHECK(c.num_nccl_streams >= 1 && c.num_nccl_streams <= 16) << c.num_nccl_streams;
  FUZZ_CHECK(c.stall_warning_time > absl::ZeroDuration()) << c.stall_warning_time;
  FUZZ_CHECK(c.stall_shutdown_time >= absl::ZeroDuration()) << c.stall_shutdown_time;
  FUZZ_CHECK(c.idle_cycle_time > absl::ZeroDuration()) << c.idle_cycle_time;
  FUZZ_CHECK(c.no_progress_timeout >= absl::ZeroDuration()) << c.no_progress_timeout;
  FUZZ_CHECK(c.no_progress_timeout == absl::ZeroDuration() ||
             c.no_progress_timeout > 2 * std::max(c.cycle_time, c.idle_cycle_time))
      << c.no_progress_timeout;
  FUZZ_CHECK(c.timeline_max_bytes >= 0) << c.timeline_max_bytes;
  FUZZ_CHECK(c.timeline_queue_events >= 1) << c.timeline_queue_events;
  FUZZ_CHECK(c.timeline_start_cycle >= 0 && c.timeline_stop_cycle >= 0);
  FUZZ_CHECK(c.start_timeout > absl::ZeroDuration()) << c.start_timeout;
  FUZZ_CHECK(c.elastic_generation >= -1) << c.elastic_generation;
  FUZZ_CHECK(c.elastic_timeout > absl::ZeroDuration()) << c.elastic_timeout;
  FUZZ_CHECK(!c.rendezvous_scope.empty());
  for (int32_t v : {c.launch_rank, c.launch_size, c.launch_local_rank, c.launch_local_size,
                    c.launch_cross_rank, c.launch_cross_size}) {
    FUZZ_CHECK(v >= -1) << v;
  }
}

}  // namespace
}  // namespace chorus::runtime

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::runtime;
  FuzzedDataProvider in(data, size);
  Env env;
  while (in.remaining_bytes() > 0) {
    std::string name = in.ConsumeBool()
                           ? kNames[in.ConsumeIntegralInRange<size_t>(0, std::size(kNames) - 1)]
                           : in.ConsumeRandomLengthString(40);
    std::string value = in.ConsumeRandomLengthString(64);
    value.resize(std::strlen(value.c_str()));  // an environment value ends at its first NUL
    env[name] = value;
  }

  absl::StatusOr<Config> config = Read(env);
  if (!config.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(config.status())) << config.status();
    bool named = false;
    for (const auto& [name, value] : env) {
      named = named ||
              (!name.empty() && config.status().message().find(name) != absl::string_view::npos);
    }
    FUZZ_CHECK(named) << "the error names no variable that is set: " << config.status();
    return 0;
  }
  CheckRanges(*config);

  // Describe() renders each field in a form its variable reads back (the secret is shown as
  // "(set)", and an unset rank or address as empty: those are left out).
  Env described;
  for (const std::string& line : config->Describe()) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits('=', 1));
    FUZZ_CHECK(parts.size() == 2) << line;
    if (parts[0] == "CHORUS_RENDEZVOUS_SECRET" || parts[1].empty()) continue;
    described[parts[0]] = parts[1];
  }
  absl::StatusOr<Config> again = Read(described);
  FUZZ_CHECK(again.ok()) << "Describe() renders a value that does not read back: "
                         << again.status();
  // Not necessarily the same value: a Duration has quarter-nanosecond steps, which a double of
  // seconds near 10^10 no longer tells apart.
  return 0;
}
