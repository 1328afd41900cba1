// Fuzzes chorusrun's --config-file reader (launcher/cli/config_file.h): horovodrun's YAML layout,
// parsed by yaml-cpp, which reports problems by throwing.
//
// Input: the file's contents. ApplyConfigYaml runs twice: on options with nothing set, and on
// options with every field already set (as if given on the command line), which it must leave
// as they are.
//
// Properties: no crash and no exception out of ApplyConfigYaml; errors are InvalidArgument naming
// the file, in one line; a value already set is never overwritten.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"

#include "launcher/cli/config_file.h"
#include "test/fuzz/fuzz_check.h"

namespace chorus::launcher {
namespace {

LaunchOptions AllSet() {
  LaunchOptions o;
  o.fusion_threshold_mb = 7;
  o.cycle_time_ms = 2.5;
  o.cache_capacity = 9;
  o.hierarchical_allreduce = false;
  o.hierarchical_allgather = true;
  o.autotune = false;
  o.autotune_log_file = "given.csv";
  o.autotune_warmup_samples = 1;
  o.autotune_steps_per_sample = 2;
  o.autotune_bayes_opt_max_samples = 3;
  o.autotune_gaussian_process_noise = 0.25;
  o.timeline_filename = "given.json";
  o.timeline_mark_cycles = false;
  o.no_stall_check = true;
  o.stall_check_warning_time_seconds = 4;
  o.stall_check_shutdown_time_seconds = 5;
  o.mpi_threads_disable = false;
  o.num_nccl_streams = 6;
  o.gloo_timeout_seconds = 8;
  o.log_level = "debug";
  o.log_with_timestamp = true;
  return o;
}

// The fields a config file may fill, as one comparable tuple.
auto Fields(const LaunchOptions& o) {
  return std::make_tuple(
      o.fusion_threshold_mb, o.cycle_time_ms, o.cache_capacity, o.hierarchical_allreduce,
      o.hierarchical_allgather, o.autotune, o.autotune_log_file, o.autotune_warmup_samples,
      o.autotune_steps_per_sample, o.autotune_bayes_opt_max_samples,
      o.autotune_gaussian_process_noise, o.timeline_filename, o.timeline_mark_cycles,
      o.no_stall_check, o.stall_check_warning_time_seconds, o.stall_check_shutdown_time_seconds,
      o.mpi_threads_disable, o.num_nccl_streams, o.gloo_timeout_seconds, o.log_level,
      o.log_with_timestamp);
}

void CheckError(const absl::Status& s) {
  FUZZ_CHECK(absl::IsInvalidArgument(s)) << s;
  FUZZ_CHECK(absl::StartsWith(s.message(), "fuzz.yaml")) << "the error names no file: " << s;
  FUZZ_CHECK(s.message().find('\n') == absl::string_view::npos)
      << "a message of several lines: " << s;
}

}  // namespace
}  // namespace chorus::launcher

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::launcher;
  const std::string text(reinterpret_cast<const char*>(data), size);

  LaunchOptions empty;
  const absl::Status filled = ApplyConfigYaml(text, "fuzz.yaml", &empty);
  if (!filled.ok()) CheckError(filled);

  LaunchOptions given = AllSet();
  const absl::Status kept = ApplyConfigYaml(text, "fuzz.yaml", &given);
  if (!kept.ok()) CheckError(kept);
  FUZZ_CHECK(Fields(given) == Fields(AllSet())) << "the config file overwrote a given value";
  return 0;
}
