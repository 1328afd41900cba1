#include "launcher/cli/worker_env.h"

#include <catch2/catch.hpp>

#include "launcher/cli/args.h"

namespace chorus::launcher {
namespace {

std::vector<EnvVar> EnvFor(std::vector<std::string> flags) {
  flags.insert(flags.begin(), {"-np", "2"});
  flags.push_back("prog");
  absl::StatusOr<CommandLine> cl = ParseCommandLine(flags);
  INFO(cl.status().ToString());
  REQUIRE(cl.ok());
  return WorkerEnvironment(cl->options);
}

TEST_CASE("No flags set no variables", "[launcher][env]") { CHECK(EnvFor({}).empty()); }

TEST_CASE("Flags map to the runtime's CHORUS_* variables", "[launcher][env]") {
  auto [flags, expected] = GENERATE(table<std::vector<std::string>, std::vector<EnvVar>>({
      {{"--fusion-threshold-mb", "64"}, {{"CHORUS_FUSION_THRESHOLD", "67108864"}}},
      {{"--fusion-threshold-mb", "0"}, {{"CHORUS_FUSION_THRESHOLD", "0"}}},
      {{"--fusion-threshold-mb", "8192"}, {{"CHORUS_FUSION_THRESHOLD", "8589934592"}}},
      {{"--cycle-time-ms", "2.5"}, {{"CHORUS_CYCLE_TIME_MS", "2.5"}}},
      {{"--cycle-time-ms", "0.1"}, {{"CHORUS_CYCLE_TIME_MS", "0.1"}}},
      {{"--cycle-time-ms", "5"}, {{"CHORUS_CYCLE_TIME_MS", "5"}}},
      {{"--cache-capacity", "2048"}, {{"CHORUS_CACHE_CAPACITY", "2048"}}},
      {{"--hierarchical-allreduce"}, {{"CHORUS_HIERARCHICAL_ALLREDUCE", "1"}}},
      {{"--hierarchical-allgather"}, {{"CHORUS_HIERARCHICAL_ALLGATHER", "1"}}},
      // Explicitly off: overrides the variable should the caller's environment set it.
      {{"--no-hierarchical-allreduce"}, {{"CHORUS_HIERARCHICAL_ALLREDUCE", "0"}}},
      {{"--no-hierarchical-allgather"}, {{"CHORUS_HIERARCHICAL_ALLGATHER", "0"}}},
      // The default restated: accepted, nothing to pass on.
      {{"--no-mpi-threads-disable"}, {}},
      {{"--no-stall-check"}, {{"CHORUS_STALL_CHECK_DISABLE", "1"}}},
      {{"--stall-check"}, {{"CHORUS_STALL_CHECK_DISABLE", "0"}}},
      {{"--stall-check-warning-time-seconds", "30"}, {{"CHORUS_STALL_CHECK_TIME_SECONDS", "30"}}},
      {{"--stall-check-shutdown-time-seconds", "90"},
       {{"CHORUS_STALL_SHUTDOWN_TIME_SECONDS", "90"}}},
      {{"--log-level", "TRACE"}, {{"CHORUS_LOG_LEVEL", "trace"}}},
      {{"--log-level", "fatal"}, {{"CHORUS_LOG_LEVEL", "fatal"}}},
      {{"--log-without-timestamp"}, {{"CHORUS_LOG_HIDE_TIME", "1"}}},
      {{"--log-with-timestamp"}, {{"CHORUS_LOG_HIDE_TIME", "0"}}},
      {{"--tcp"}, {{"NCCL_IB_DISABLE", "1"}, {"UCX_TLS", "tcp"}}},
      {{"--network-interfaces", "eth0,eth1"}, {{"NCCL_SOCKET_IFNAME", "eth0,eth1"}}},
      // --gloo: UCX's connections, as Gloo's in horovodrun, use the named interfaces.
      {{"--gloo", "--network-interfaces", "eth0,eth1"},
       {{"NCCL_SOCKET_IFNAME", "eth0,eth1"}, {"UCX_NET_DEVICES", "eth0,eth1"}}},
      {{"--num-nccl-streams", "2"}, {{"CHORUS_NUM_NCCL_STREAMS", "2"}}},
      {{"--thread-affinity", "3"}, {{"CHORUS_THREAD_AFFINITY", "3"}}},
      {{"--thread-affinity", "1,0"}, {{"CHORUS_THREAD_AFFINITY", "1,0"}}},
      // horovodrun's timeout for Gloo's operations: chorus's no-progress bound.
      {{"--gloo-timeout-seconds", "45"}, {{"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS", "45"}}},
      {{"--autotune"}, {{"CHORUS_AUTOTUNE", "1"}}},
      {{"--no-autotune"}, {{"CHORUS_AUTOTUNE", "0"}}},
      {{"--autotune-log-file", "/tmp/at.csv"}, {{"CHORUS_AUTOTUNE_LOG", "/tmp/at.csv"}}},
      {{"--autotune-warmup-samples", "0"}, {{"CHORUS_AUTOTUNE_WARMUP_SAMPLES", "0"}}},
      {{"--autotune-steps-per-sample", "5"}, {{"CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "5"}}},
      {{"--autotune-bayes-opt-max-samples", "12"},
       {{"CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "12"}}},
      {{"--autotune-gaussian-process-noise", "0.25"},
       {{"CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.25"}}},
      // Timeline details travel only with their enabling flag.
      {{"--timeline-mark-cycles"}, {}},
      {{"--timeline-filename", "/t.json", "--timeline-mark-cycles"},
       {{"CHORUS_TIMELINE", "/t.json"}, {"CHORUS_TIMELINE_MARK_CYCLES", "1"}}},
  }));
  INFO("first flag: " << flags[0]);
  CHECK(EnvFor(flags) == expected);
}

TEST_CASE("--autotune and its settings travel together", "[launcher][env]") {
  CHECK(EnvFor({"--autotune-gaussian-process-noise", "0.5", "--autotune", "--autotune-log-file",
                "at.csv", "--autotune-bayes-opt-max-samples", "8"}) ==
        std::vector<EnvVar>{{"CHORUS_AUTOTUNE", "1"},
                            {"CHORUS_AUTOTUNE_LOG", "at.csv"},
                            {"CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "8"},
                            {"CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.5"}});
}

TEST_CASE("Several flags keep a fixed order", "[launcher][env]") {
  CHECK(EnvFor({"--log-level", "info", "--cache-capacity", "7", "--fusion-threshold-mb", "1"}) ==
        std::vector<EnvVar>{{"CHORUS_FUSION_THRESHOLD", "1048576"},
                            {"CHORUS_CACHE_CAPACITY", "7"},
                            {"CHORUS_LOG_LEVEL", "info"}});
}

}  // namespace
}  // namespace chorus::launcher
