#include "runtime/config.h"

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

namespace chorus::runtime {
namespace {

// A fake environment: FromEnvironment reads only through this lookup.
Config::Lookup MapLookup(const std::map<std::string, std::string>& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

absl::StatusOr<Config> Read(const std::map<std::string, std::string>& env) {
  return Config::FromEnvironment(MapLookup(env));
}

TEST_CASE("An empty environment gives the defaults", "[config]") {
  const std::map<std::string, std::string> env;
  auto config = Read(env);
  REQUIRE(config.ok());
  CHECK(config->fusion_threshold_bytes == (int64_t{128} << 20));
  CHECK(config->cycle_time == absl::Milliseconds(1));
  CHECK(config->cache_capacity == 4096);
  CHECK(config->pipeline_chunk_bytes == (int64_t{4} << 20));
  CHECK(config->inplace_min_bytes == (int64_t{256} << 10));
  CHECK(config->huge_pages);
  CHECK(config->stall_warning_time == absl::Seconds(60));
  CHECK(config->stall_shutdown_time == absl::ZeroDuration());
  CHECK_FALSE(config->stall_check_disabled);
  CHECK(config->idle_cycle_time == absl::Milliseconds(20));
  CHECK(config->log_level == "warning");
  CHECK_FALSE(config->print_config);
  CHECK_FALSE(config->hierarchical_allreduce);
  CHECK_FALSE(config->hierarchical_allgather);
  CHECK_FALSE(config->autotune);
  CHECK(config->autotune_log.empty());
  CHECK(config->autotune_warmup_samples == 3);
  CHECK(config->autotune_steps_per_sample == 10);
  CHECK(config->autotune_bayes_opt_max_samples == 20);
  CHECK(config->autotune_gaussian_process_noise == 0.8);
}

TEST_CASE("Every CHORUS variable is read", "[config]") {
  const std::map<std::string, std::string> env = {
      {"CHORUS_FUSION_THRESHOLD", "1048576"},
      {"CHORUS_CYCLE_TIME_MS", "2.5"},
      {"CHORUS_CACHE_CAPACITY", "0"},
      {"CHORUS_PIPELINE_CHUNK_BYTES", "4096"},
      {"CHORUS_INPLACE_MIN_BYTES", "0"},
      {"CHORUS_HUGE_PAGES", "off"},
      {"CHORUS_STALL_CHECK_TIME_SECONDS", "7.5"},
      {"CHORUS_STALL_SHUTDOWN_TIME_SECONDS", "30"},
      {"CHORUS_STALL_CHECK_DISABLE", "yes"},
      {"CHORUS_IDLE_CYCLE_MS", "0.5"},
      {"CHORUS_LOG_LEVEL", "DEBUG"},
      {"CHORUS_PRINT_CONFIG", "On"},
      {"CHORUS_HIERARCHICAL_ALLREDUCE", "1"},
      {"CHORUS_HIERARCHICAL_ALLGATHER", "true"},
      {"CHORUS_AUTOTUNE", "1"},
      {"CHORUS_AUTOTUNE_LOG", "/tmp/at.csv"},
      {"CHORUS_AUTOTUNE_WARMUP_SAMPLES", "0"},
      {"CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "4"},
      {"CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "7"},
      {"CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.25"},
  };
  auto config = Read(env);
  REQUIRE(config.ok());
  CHECK(config->hierarchical_allreduce);
  CHECK(config->hierarchical_allgather);
  CHECK(config->autotune);
  CHECK(config->autotune_log == "/tmp/at.csv");
  CHECK(config->autotune_warmup_samples == 0);
  CHECK(config->autotune_steps_per_sample == 4);
  CHECK(config->autotune_bayes_opt_max_samples == 7);
  CHECK(config->autotune_gaussian_process_noise == 0.25);
  CHECK(config->fusion_threshold_bytes == 1048576);
  CHECK(config->cycle_time == absl::Microseconds(2500));
  CHECK(config->cache_capacity == 0);
  CHECK(config->pipeline_chunk_bytes == 4096);
  CHECK(config->inplace_min_bytes == 0);
  CHECK_FALSE(config->huge_pages);
  CHECK(config->stall_warning_time == absl::Milliseconds(7500));
  CHECK(config->stall_shutdown_time == absl::Seconds(30));
  CHECK(config->stall_check_disabled);
  CHECK(config->idle_cycle_time == absl::Microseconds(500));
  CHECK(config->log_level == "debug");
  CHECK(config->print_config);
}

TEST_CASE("Horovod aliases are read", "[config]") {
  const std::map<std::string, std::string> env = {
      {"HOROVOD_FUSION_THRESHOLD", "33554432"},
      {"HOROVOD_CYCLE_TIME", "5"},
      {"HOROVOD_CACHE_CAPACITY", "16"},
      {"HOROVOD_STALL_CHECK_TIME_SECONDS", "10"},
      {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "20"},
      {"HOROVOD_STALL_CHECK_DISABLE", "1"},
      {"HOROVOD_LOG_LEVEL", "fatal"},
      {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
      {"HOROVOD_HIERARCHICAL_ALLGATHER", "1"},
      {"HOROVOD_AUTOTUNE", "1"},
      {"HOROVOD_AUTOTUNE_LOG", "at.csv"},
      {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "5"},
      {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "20"},
      {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "50"},
      {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.9"},
  };
  auto config = Read(env);
  REQUIRE(config.ok());
  CHECK(config->hierarchical_allreduce);
  CHECK(config->hierarchical_allgather);
  CHECK(config->autotune);
  CHECK(config->autotune_log == "at.csv");
  CHECK(config->autotune_warmup_samples == 5);
  CHECK(config->autotune_steps_per_sample == 20);
  CHECK(config->autotune_bayes_opt_max_samples == 50);
  CHECK(config->autotune_gaussian_process_noise == 0.9);
  CHECK(config->fusion_threshold_bytes == 33554432);
  CHECK(config->cycle_time == absl::Milliseconds(5));
  CHECK(config->cache_capacity == 16);
  CHECK(config->stall_warning_time == absl::Seconds(10));
  CHECK(config->stall_shutdown_time == absl::Seconds(20));
  CHECK(config->stall_check_disabled);
  CHECK(config->log_level == "error");
}

TEST_CASE("CHORUS names win over their Horovod aliases", "[config]") {
  const std::map<std::string, std::string> env = {
      {"CHORUS_FUSION_THRESHOLD", "100"},
      {"HOROVOD_FUSION_THRESHOLD", "not a number"},
      {"CHORUS_LOG_LEVEL", "trace"},
      {"HOROVOD_LOG_LEVEL", "info"},
  };
  auto config = Read(env);
  REQUIRE(config.ok());
  CHECK(config->fusion_threshold_bytes == 100);
  CHECK(config->log_level == "trace");
}

TEST_CASE("Booleans accept the usual spellings", "[config]") {
  auto [text, expected] = GENERATE(table<std::string, bool>({
      {"1", true},
      {"true", true},
      {"TRUE", true},
      {"yes", true},
      {"on", true},
      {" On ", true},
      {"0", false},
      {"false", false},
      {"No", false},
      {"off", false},
  }));
  const std::map<std::string, std::string> env = {{"CHORUS_PRINT_CONFIG", text}};
  auto config = Read(env);
  REQUIRE(config.ok());
  CHECK(config->print_config == expected);
}

TEST_CASE("Surrounding whitespace is ignored", "[config]") {
  const std::map<std::string, std::string> env = {
      {"CHORUS_FUSION_THRESHOLD", "  64 "},
      {"CHORUS_CYCLE_TIME_MS", "\t3\n"},
      {"CHORUS_LOG_LEVEL", " Info "},
  };
  auto config = Read(env);
  REQUIRE(config.ok());
  CHECK(config->fusion_threshold_bytes == 64);
  CHECK(config->cycle_time == absl::Milliseconds(3));
  CHECK(config->log_level == "info");
}

TEST_CASE("Malformed or out-of-range values are errors naming the variable", "[config]") {
  auto [name, value] = GENERATE(table<std::string, std::string>({
      {"CHORUS_FUSION_THRESHOLD", "12x"},
      {"CHORUS_FUSION_THRESHOLD", "-1"},
      {"CHORUS_FUSION_THRESHOLD", ""},
      {"CHORUS_FUSION_THRESHOLD", "1.5"},
      {"CHORUS_FUSION_THRESHOLD", "99999999999999999999"},
      {"HOROVOD_FUSION_THRESHOLD", "abc"},
      {"CHORUS_CYCLE_TIME_MS", "0"},
      {"CHORUS_CYCLE_TIME_MS", "-2"},
      {"CHORUS_CYCLE_TIME_MS", "nan"},
      {"CHORUS_CYCLE_TIME_MS", "inf"},
      {"CHORUS_CYCLE_TIME_MS", "1ms"},
      {"HOROVOD_CYCLE_TIME", "fast"},
      {"CHORUS_CACHE_CAPACITY", "-1"},
      {"CHORUS_CACHE_CAPACITY", "1048577"},
      {"HOROVOD_CACHE_CAPACITY", "4294967296"},
      {"CHORUS_PIPELINE_CHUNK_BYTES", "4095"},
      {"CHORUS_PIPELINE_CHUNK_BYTES", "0"},
      {"CHORUS_INPLACE_MIN_BYTES", "-5"},
      {"CHORUS_HUGE_PAGES", "sometimes"},
      {"CHORUS_NUM_NCCL_STREAMS", "0"},
      {"CHORUS_NUM_NCCL_STREAMS", "17"},
      {"HOROVOD_NUM_NCCL_STREAMS", "two"},
      {"CHORUS_STALL_CHECK_TIME_SECONDS", "0"},
      {"HOROVOD_STALL_CHECK_TIME_SECONDS", "x"},
      {"CHORUS_STALL_SHUTDOWN_TIME_SECONDS", "-1"},
      {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "soon"},
      {"CHORUS_STALL_CHECK_DISABLE", "maybe"},
      {"HOROVOD_STALL_CHECK_DISABLE", "2"},
      {"CHORUS_IDLE_CYCLE_MS", "0"},
      {"CHORUS_LOG_LEVEL", "verbose"},
      {"HOROVOD_LOG_LEVEL", "warn"},
      {"CHORUS_PRINT_CONFIG", "y"},
      {"CHORUS_AUTOTUNE", "sure"},
      {"CHORUS_AUTOTUNE_WARMUP_SAMPLES", "-1"},
      {"CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "0"},
      {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "0"},
      {"CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "1.5"},
      {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "-0.1"},
  }));
  const std::map<std::string, std::string> env = {{name, value}};
  auto config = Read(env);
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string message(config.status().message());
  CHECK_THAT(message, Catch::StartsWith(name + "=\"" + value + "\": expected "));
}

TEST_CASE("The retired GPU op timeout names the one bound that replaced it", "[config]") {
  auto config = Read({{"CHORUS_GPU_OP_TIMEOUT_SECONDS", "600"}});
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().message() ==
        "CHORUS_GPU_OP_TIMEOUT_SECONDS is replaced by CHORUS_NO_PROGRESS_TIMEOUT_SECONDS, which "
        "bounds GPU batches as it bounds MPI and UCX calls: set that instead");
}

TEST_CASE("The fusion threshold error message is exact", "[config]") {
  const std::map<std::string, std::string> env = {{"CHORUS_FUSION_THRESHOLD", "12x"}};
  auto config = Read(env);
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().message() ==
        "CHORUS_FUSION_THRESHOLD=\"12x\": expected a non-negative integer number of bytes");
}

TEST_CASE("Boundary values are accepted", "[config]") {
  const std::map<std::string, std::string> env = {
      {"CHORUS_FUSION_THRESHOLD", "0"},
      {"CHORUS_CACHE_CAPACITY", "1048576"},
      {"CHORUS_PIPELINE_CHUNK_BYTES", "4096"},
      {"CHORUS_STALL_SHUTDOWN_TIME_SECONDS", "0"},
  };
  auto config = Read(env);
  REQUIRE(config.ok());
  CHECK(config->fusion_threshold_bytes == 0);
  CHECK(config->cache_capacity == 1048576);
  CHECK(config->pipeline_chunk_bytes == 4096);
  CHECK(config->stall_shutdown_time == absl::ZeroDuration());
}

TEST_CASE("Describe lists the defaults in a stable order", "[config]") {
  const std::vector<std::string> expected = {
      "CHORUS_FUSION_THRESHOLD=134217728",
      "CHORUS_CYCLE_TIME_MS=1",
      "CHORUS_CACHE_CAPACITY=4096",
      "CHORUS_PIPELINE_CHUNK_BYTES=4194304",
      "CHORUS_INPLACE_MIN_BYTES=262144",
      "CHORUS_HUGE_PAGES=true",
      "CHORUS_NUM_NCCL_STREAMS=1",
      "CHORUS_STALL_CHECK_TIME_SECONDS=60",
      "CHORUS_STALL_SHUTDOWN_TIME_SECONDS=0",
      "CHORUS_STALL_CHECK_DISABLE=false",
      "CHORUS_FLIGHT_RECORDER_ENTRIES=2048",
      "CHORUS_FLIGHT_RECORDER_DIR=",
      "CHORUS_METRICS_PORT=0",
      "CHORUS_IDLE_CYCLE_MS=20",
      "CHORUS_NO_PROGRESS_TIMEOUT_SECONDS=30",
      "CHORUS_HIERARCHICAL_ALLREDUCE=false",
      "CHORUS_HIERARCHICAL_ALLGATHER=false",
      "CHORUS_AUTOTUNE=false",
      "CHORUS_AUTOTUNE_LOG=",
      "CHORUS_AUTOTUNE_WARMUP_SAMPLES=3",
      "CHORUS_AUTOTUNE_STEPS_PER_SAMPLE=10",
      "CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES=20",
      "CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE=0.8",
      "CHORUS_LOG_LEVEL=warning",
      "CHORUS_LOG_HIDE_TIME=true",
      "CHORUS_THREAD_AFFINITY=",
      "CHORUS_PRINT_CONFIG=false",
      "CHORUS_TIMELINE=",
      "CHORUS_TIMELINE_MARK_CYCLES=false",
      "CHORUS_TIMELINE_ALL_RANKS=false",
      "CHORUS_TIMELINE_MAX_MB=0",
      "CHORUS_TIMELINE_QUEUE_EVENTS=262144",
      "CHORUS_TIMELINE_START_CYCLE=0",
      "CHORUS_TIMELINE_STOP_CYCLE=0",
      "CHORUS_CONTROLLER=auto",
      "CHORUS_RENDEZVOUS_ADDR=",
      "CHORUS_RENDEZVOUS_SECRET=",
      "CHORUS_RENDEZVOUS_SCOPE=world/0",
      "CHORUS_START_TIMEOUT_SECONDS=30",
      "CHORUS_ELASTIC_WORKER_ID=",
      "CHORUS_ELASTIC_GENERATION=0",
      "CHORUS_ELASTIC=false",
      "CHORUS_ELASTIC_TIMEOUT=600",
      "CHORUS_RANK=",
      "CHORUS_SIZE=",
      "CHORUS_LOCAL_RANK=",
      "CHORUS_LOCAL_SIZE=",
      "CHORUS_CROSS_RANK=",
      "CHORUS_CROSS_SIZE=",
  };
  CHECK(Config{}.Describe() == expected);
}

TEST_CASE("Describe output reads back as the same configuration", "[config]") {
  const std::map<std::string, std::string> env = {
      {"CHORUS_FUSION_THRESHOLD", "12345"},
      {"CHORUS_CYCLE_TIME_MS", "0.125"},
      {"CHORUS_CACHE_CAPACITY", "7"},
      {"CHORUS_PIPELINE_CHUNK_BYTES", "65536"},
      {"CHORUS_INPLACE_MIN_BYTES", "99"},
      {"CHORUS_NUM_NCCL_STREAMS", "4"},
      {"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS", "2.5"},
      {"CHORUS_STALL_CHECK_TIME_SECONDS", "1.75"},
      {"CHORUS_STALL_SHUTDOWN_TIME_SECONDS", "120"},
      {"CHORUS_STALL_CHECK_DISABLE", "on"},
      {"CHORUS_IDLE_CYCLE_MS", "3.3"},
      {"CHORUS_LOG_LEVEL", "info"},
      {"CHORUS_PRINT_CONFIG", "1"},
      {"CHORUS_TIMELINE", "/tmp/t.json"},
      {"CHORUS_TIMELINE_MARK_CYCLES", "yes"},
      {"CHORUS_TIMELINE_ALL_RANKS", "1"},
      {"CHORUS_TIMELINE_MAX_MB", "0.5"},
      {"CHORUS_TIMELINE_QUEUE_EVENTS", "16"},
      {"CHORUS_TIMELINE_START_CYCLE", "3"},
      {"CHORUS_TIMELINE_STOP_CYCLE", "9"},
      {"CHORUS_AUTOTUNE", "1"},
      {"CHORUS_AUTOTUNE_LOG", "/tmp/at.csv"},
      {"CHORUS_AUTOTUNE_WARMUP_SAMPLES", "2"},
      {"CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "5"},
      {"CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "12"},
      {"CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.3"},
  };
  auto first = Read(env);
  REQUIRE(first.ok());
  std::map<std::string, std::string> described;
  for (const std::string& line : first->Describe()) {
    const size_t eq = line.find('=');
    REQUIRE(eq != std::string::npos);
    if (eq + 1 < line.size()) described[line.substr(0, eq)] = line.substr(eq + 1);  // set ones
  }
  for (const auto& [name, value] : env) CHECK(described.count(name) == 1);
  CHECK(described["CHORUS_CYCLE_TIME_MS"] == "0.125");
  CHECK(described["CHORUS_IDLE_CYCLE_MS"] == "3.3");
  auto second = Read(described);
  REQUIRE(second.ok());
  CHECK(second->Describe() == first->Describe());
  CHECK(second->cycle_time == first->cycle_time);
  CHECK(second->idle_cycle_time == first->idle_cycle_time);
  CHECK(second->stall_warning_time == first->stall_warning_time);
  CHECK(second->num_nccl_streams == 4);
  CHECK(second->no_progress_timeout == absl::Seconds(2.5));
  CHECK(second->timeline == "/tmp/t.json");
  CHECK(second->timeline_max_bytes == 524288);
  CHECK(second->timeline_queue_events == 16);
  CHECK(second->timeline_start_cycle == 3);
  CHECK(second->timeline_stop_cycle == 9);
  CHECK(second->timeline_mark_cycles);
  CHECK(second->timeline_all_ranks);
}

TEST_CASE("MPI-less launch variables: controller, rendezvous, topology", "[config]") {
  auto config = Read({{"CHORUS_RENDEZVOUS_ADDR", "node1:4242"},
                      {"CHORUS_RENDEZVOUS_SECRET", "abc"},
                      {"CHORUS_RANK", "2"},
                      {"HOROVOD_SIZE", "3"},
                      {"CHORUS_LOCAL_RANK", "0"},
                      {"CHORUS_START_TIMEOUT_SECONDS", "5"}});
  REQUIRE(config.ok());
  CHECK(config->UsesUcx());
  CHECK(config->rendezvous_addr == "node1:4242");
  CHECK(config->launch_rank == 2);
  CHECK(config->launch_size == 3);
  CHECK(config->launch_local_rank == 0);
  CHECK(config->launch_cross_rank == -1);
  CHECK(config->start_timeout == absl::Seconds(5));
  CHECK_FALSE(Config{}.UsesUcx());
  auto mpi = Read({{"CHORUS_RENDEZVOUS_ADDR", "node1:4242"}, {"CHORUS_CONTROLLER", "mpi"}});
  REQUIRE(mpi.ok());
  CHECK_FALSE(mpi->UsesUcx());
  auto ucx = Read({{"CHORUS_CONTROLLER", "UCX"}});
  REQUIRE(ucx.ok());
  CHECK(ucx->UsesUcx());
  CHECK_FALSE(Read({{"CHORUS_CONTROLLER", "gloo"}}).ok());
  CHECK_FALSE(Read({{"CHORUS_RENDEZVOUS_ADDR", "node1"}}).ok());
  CHECK_FALSE(Read({{"CHORUS_RENDEZVOUS_ADDR", "node1:0"}}).ok());
  CHECK_FALSE(Read({{"CHORUS_RANK", "-1"}}).ok());
}

TEST_CASE("HOROVOD_TIMELINE and HOROVOD_TIMELINE_MARK_CYCLES are read as aliases", "[config]") {
  auto config = Read({{"HOROVOD_TIMELINE", "DYNAMIC"}, {"HOROVOD_TIMELINE_MARK_CYCLES", "1"}});
  REQUIRE(config.ok());
  CHECK(config->timeline == "DYNAMIC");
  CHECK(config->timeline_mark_cycles);
  CHECK_FALSE(Read({{"CHORUS_TIMELINE_MAX_MB", "-1"}}).ok());
  CHECK_FALSE(Read({{"CHORUS_TIMELINE_QUEUE_EVENTS", "0"}}).ok());
}

}  // namespace
}  // namespace chorus::runtime
