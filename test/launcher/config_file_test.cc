#include "launcher/cli/config_file.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "launcher/cli/args.h"
#include "launcher/cli/worker_env.h"

namespace chorus::launcher {
namespace {

// Horovod's example config file (docs), with chorus's supported controller.
constexpr char kHorovodExample[] = R"(
controller: mpi

params:
  fusion_threshold_mb: 32
  cycle_time_ms: 10
  cache_capacity: 2048
  hierarchical_allreduce: true
  hierarchical_allgather: true

autotune:
  enabled: true
  log_file: 'horovod_autotune_log.txt'
  warmup_samples: 5
  steps_per_sample: 20
  bayes_opt_max_samples: 50
  gaussian_process_noise: 0.9

timeline:
  filename: 'horovod_timeline.json'
  mark_cycles: true

stall_check:
  enabled: true
  warning_time_seconds: 120
  shutdown_time_seconds: 240

library_options:
  mpi_threads_disable: true
  num_nccl_streams: 2
  thread_affinity: 1
  gloo_timeout_seconds: 60

logging:
  level: INFO
  hide_timestamp: true
)";

TEST_CASE("Horovod's example config file fills every field", "[launcher][config]") {
  LaunchOptions o;
  REQUIRE(ApplyConfigYaml(kHorovodExample, "c.yaml", &o).ok());
  CHECK(o.fusion_threshold_mb == 32);
  CHECK(o.cycle_time_ms == 10.0);
  CHECK(o.cache_capacity == 2048);
  CHECK(o.hierarchical_allreduce == true);
  CHECK(o.hierarchical_allgather == true);
  CHECK(o.autotune == true);
  CHECK(o.autotune_log_file == "horovod_autotune_log.txt");
  CHECK(o.autotune_warmup_samples == 5);
  CHECK(o.autotune_steps_per_sample == 20);
  CHECK(o.autotune_bayes_opt_max_samples == 50);
  CHECK(o.autotune_gaussian_process_noise == 0.9);
  CHECK(o.timeline_filename == "horovod_timeline.json");
  CHECK(o.timeline_mark_cycles == true);
  CHECK(o.no_stall_check == false);
  CHECK(o.stall_check_warning_time_seconds == 120);
  CHECK(o.stall_check_shutdown_time_seconds == 240);
  CHECK(o.mpi_threads_disable == true);
  CHECK(o.num_nccl_streams == 2);
  CHECK(o.thread_affinity == "1");
  CHECK(o.gloo_timeout_seconds == 60);
  CHECK(o.log_level == "INFO");
  CHECK(o.log_with_timestamp == false);
}

TEST_CASE("ccl_bgt_affinity, thread_affinity's name before Horovod 0.21, is an error naming it",
          "[launcher][config]") {
  LaunchOptions o;
  const absl::Status s = ApplyConfigYaml("library_options:\n  ccl_bgt_affinity: 1\n", "c.yaml", &o);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(
      std::string(s.message()),
      Catch::StartsWith("c.yaml: library_options.ccl_bgt_affinity: renamed thread_affinity"));
}

TEST_CASE("thread_affinity from the file reaches the workers and is checked like the flag",
          "[launcher][config]") {
  const std::string path = "/tmp/chorus_launcher_config_affinity_test.yaml";
  for (const auto& [value, ok] :
       std::vector<std::pair<std::string, bool>>{{"1", true}, {"2,0", true}, {"-1", false}}) {
    {
      std::ofstream out(path);
      out << "library_options:\n  thread_affinity: " << value << "\n";
    }
    auto cl = ParseCommandLine({"-np", "2", "--config-file", path, "prog"});
    INFO(value << ": " << cl.status().ToString());
    REQUIRE(cl.ok() == ok);
    if (ok) {
      CHECK(WorkerEnvironment(cl->options) ==
            std::vector<EnvVar>{{"CHORUS_THREAD_AFFINITY", value}});
    } else {
      CHECK_THAT(std::string(cl.status().message()), Catch::Contains("--thread-affinity"));
    }
  }
  std::remove(path.c_str());
}

TEST_CASE("Flags on the command line win over the file", "[launcher][config]") {
  const std::string path = "/tmp/chorus_launcher_config_test.yaml";
  {
    std::ofstream out(path);
    out << "params:\n  fusion_threshold_mb: 32\n  cache_capacity: 10\n"
           "stall_check:\n  enabled: false\nlogging:\n  level: DEBUG\n";
  }
  // The flag comes after --config-file here and before it below: either way the flag wins.
  for (bool flag_first : {false, true}) {
    std::vector<std::string> args = {"-np", "2"};
    std::vector<std::string> flag = {"--fusion-threshold-mb", "8"};
    std::vector<std::string> config = {"--config-file", path};
    if (flag_first) std::swap(flag, config);
    args.insert(args.end(), flag.begin(), flag.end());
    args.insert(args.end(), config.begin(), config.end());
    args.push_back("prog");
    auto cl = ParseCommandLine(args);
    INFO(cl.status().ToString());
    REQUIRE(cl.ok());
    CHECK(WorkerEnvironment(cl->options) ==
          std::vector<EnvVar>{{"CHORUS_FUSION_THRESHOLD", "8388608"},
                              {"CHORUS_CACHE_CAPACITY", "10"},
                              {"CHORUS_STALL_CHECK_DISABLE", "1"},
                              {"CHORUS_LOG_LEVEL", "debug"}});
  }
  std::remove(path.c_str());
}

TEST_CASE("controller: gloo selects the MPI-less mode unless --mpi is given",
          "[launcher][config]") {
  const std::string path = "/tmp/chorus_launcher_config_gloo_test.yaml";
  {
    std::ofstream out(path);
    out << "controller: gloo\n";
  }
  auto gloo = ParseCommandLine({"-np", "2", "--config-file", path, "prog"});
  REQUIRE(gloo.ok());
  CHECK(gloo->options.gloo);
  auto mpi = ParseCommandLine({"-np", "2", "--mpi", "--config-file", path, "prog"});
  REQUIRE(mpi.ok());
  CHECK_FALSE(mpi->options.gloo);
  std::remove(path.c_str());
}

TEST_CASE("Bad config files are errors naming file and key", "[launcher][config]") {
  auto [text, code, expected] = GENERATE(table<std::string, absl::StatusCode, std::string>({
      {"params:\n  fusion_threshold_mb: lots\n", absl::StatusCode::kInvalidArgument,
       "c.yaml: params.fusion_threshold_mb: cannot read 'lots'"},
      {"params:\n  fusion_threshold: 3\n", absl::StatusCode::kInvalidArgument,
       "c.yaml: params.fusion_threshold: unknown key"},
      {"paramz:\n  x: 1\n", absl::StatusCode::kInvalidArgument,
       "c.yaml: paramz: unknown section (expected one of controller, autotune, library_options, "
       "logging, params, stall_check, timeline)"},
      {"fusion_threshold_mb: 32\n", absl::StatusCode::kInvalidArgument,
       "c.yaml: fusion_threshold_mb: unknown section; horovodrun's config file layout puts this "
       "key under 'params:' (params: {fusion_threshold_mb: ...})"},
      {"params: [1, 2]\n", absl::StatusCode::kInvalidArgument, "c.yaml: params: expected a map"},
      {"params:\n  cycle_time_ms: [1]\n", absl::StatusCode::kInvalidArgument,
       "params.cycle_time_ms: expected a single value"},
      {"controller: smoke\n", absl::StatusCode::kInvalidArgument, "no such controller 'smoke'"},
      {"params: {a: 1\n", absl::StatusCode::kInvalidArgument, "c.yaml: not valid YAML"},
      {"- 1\n- 2\n", absl::StatusCode::kInvalidArgument, "c.yaml: expected a map"},
      // The file's own text on one line, with C escapes.
      {"params: {cycle_time_ms: \"a\\nb\"}\n", absl::StatusCode::kInvalidArgument,
       "params.cycle_time_ms: cannot read 'a\\nb'"},
      {"params: {\"x\\ny\": 1}\n", absl::StatusCode::kInvalidArgument,
       "c.yaml: params.x\\ny: unknown key"},
  }));
  LaunchOptions o;
  absl::Status s = ApplyConfigYaml(text, "c.yaml", &o);
  CHECK(s.code() == code);
  CHECK_THAT(std::string(s.message()), Catch::Contains(expected));
  CHECK(s.message().find('\n') == absl::string_view::npos);
}

TEST_CASE("Config values pass the flags' range checks", "[launcher][config]") {
  const std::string path = "/tmp/chorus_launcher_config_range.yaml";
  {
    std::ofstream out(path);
    out << "params:\n  cache_capacity: -4\n";
  }
  auto cl = ParseCommandLine({"-np", "2", "--config-file", path, "prog"});
  std::remove(path.c_str());
  REQUIRE_FALSE(cl.ok());
  CHECK_THAT(std::string(cl.status().message()), Catch::Contains("--cache-capacity=-4"));
  auto missing = ParseCommandLine({"-np", "2", "--config-file", "/nonexistent.yaml", "prog"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("An empty config file changes nothing", "[launcher][config]") {
  LaunchOptions o;
  REQUIRE(ApplyConfigYaml("", "c.yaml", &o).ok());
  REQUIRE(ApplyConfigYaml("# nothing\n", "c.yaml", &o).ok());
  CHECK(WorkerEnvironment(o).empty());
}

}  // namespace
}  // namespace chorus::launcher
