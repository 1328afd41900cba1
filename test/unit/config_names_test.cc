// The names that cross from chorusrun to its workers (base/config_names.h): every CHORUS_*
// variable the launcher writes is one the runtime reads, or one written for the workers'
// programs only.
#include "base/config_names.h"

#include <stdlib.h>

#include <algorithm>
#include <map>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/cli/args.h"
#include "launcher/cli/tunables.h"
#include "launcher/cli/worker_env.h"
#include "launcher/engine/generation_notice.h"
#include "launcher/engine/rank_env.h"
#include "runtime/config.h"

namespace chorus {
namespace {

bool Informational(const std::string& name) {
  return std::find(std::begin(config_names::kInformational), std::end(config_names::kInformational),
                   name) != std::end(config_names::kInformational);
}

// A value of each parameter's type that its checks accept (some chosen for the checks below).
std::string SampleValue(const launcher::Tunable& t) {
  const std::map<std::string, std::string> chosen = {
      {"--thread-affinity", "0,1"},
      {"--gloo-timeout-seconds", "40"},
      {"--log-level", "info"},
      {"--autotune-log-file", "/tmp/at.csv"},
      {"--autotune-warmup-samples", "1"},
      {"--autotune-steps-per-sample", "2"},
      {"--autotune-bayes-opt-max-samples", "3"},
      {"--autotune-gaussian-process-noise", "0.5"},
  };
  if (auto it = chosen.find(t.flag); it != chosen.end()) return it->second;
  return std::visit(
      [](auto member) -> std::string {
        using T = typename std::decay_t<decltype(launcher::LaunchOptions().*member)>::value_type;
        if constexpr (std::is_same_v<T, std::string>) return "/tmp/value";
        return "2";
      },
      t.field);
}

// Every flag of chorusrun that passes something to the workers, set: each parameter of
// launcher/cli/tunables.h with a variable, and the network's flags.
std::vector<launcher::EnvVar> EveryFlag() {
  std::vector<std::string> args = {"-np", "2"};
  for (const launcher::Tunable& t : launcher::Tunables()) {
    if (t.variable == nullptr) continue;
    args.push_back(t.flag);
    if (t.off_flag == nullptr) args.push_back(SampleValue(t));
  }
  for (const char* arg : {"--tcp", "--network-interface", "eth0", "prog"}) args.push_back(arg);
  absl::StatusOr<launcher::CommandLine> cl = launcher::ParseCommandLine(args);
  REQUIRE(cl.ok());
  std::vector<launcher::EnvVar> written = launcher::WorkerEnvironment(cl->options);
  for (const launcher::Tunable& t : launcher::Tunables()) {
    if (t.variable == nullptr) continue;
    INFO(t.flag);
    CHECK(std::count_if(written.begin(), written.end(),
                        [&](const launcher::EnvVar& v) { return v.first == t.variable; }) == 1);
  }
  return written;
}

TEST_CASE("Every CHORUS_* variable chorusrun writes is one the runtime reads",
          "[config][config_names]") {
  std::vector<launcher::EnvVar> written = EveryFlag();
  elastic::RankPlacement p{"hostA", 1, 2, 1, 2, 0, 1};
  launcher::RendezvousInfo rendezvous{"127.0.0.1:1", std::string(64, 'a'), 30, "world/0"};
  for (auto vars :
       {launcher::RankEnvironment(p, rendezvous), launcher::JoiningEnvironment("hostA", rendezvous),
        launcher::GenerationVariables(p, 3)}) {
    written.insert(written.end(), vars.begin(), vars.end());
  }
  written.emplace_back(config_names::kElasticWorkerId, "w0");
  written.emplace_back(config_names::kElastic, "1");
  written.emplace_back(config_names::kElasticTimeout, "600");
  int checked = 0;
  for (const auto& [name, value] : written) {
    if (name.rfind("CHORUS_", 0) != 0) continue;
    INFO(name << "=" << value);
    CHECK((runtime::Config::Reads(name) || Informational(name)));
    ++checked;
  }
  CHECK(checked > 25);
  // And the values parse: the runtime accepts what the launcher writes.
  std::map<std::string, std::string> place;
  for (const auto& [name, value] : written) {
    if (runtime::Config::Reads(name)) place[name] = value;
  }
  runtime::Config config;
  CHECK(config.Adopt(place).ok());
  CHECK(config.thread_affinity == std::vector<int>{0, 1});
  CHECK(config.no_progress_timeout == absl::Seconds(40));
  CHECK_FALSE(config.log_hide_time);
  CHECK(config.autotune);
  CHECK(config.autotune_log == "/tmp/at.csv");
  CHECK(config.autotune_warmup_samples == 1);
  CHECK(config.autotune_steps_per_sample == 2);
  CHECK(config.autotune_bayes_opt_max_samples == 3);
  CHECK(config.autotune_gaussian_process_noise == 0.5);
}

TEST_CASE("Variables chorus does not read are listed; its own and aliases are not",
          "[config][config_names]") {
  setenv("HOROVOD_BATCH_D2D_MEMCOPIES", "1", 1);
  setenv("CHORUS_FUSION_TRESHOLD", "1", 1);  // misspelt
  setenv("HOROVOD_FUSION_THRESHOLD", "1", 1);
  setenv("HOROVOD_HOSTNAME", "h", 1);
  setenv("CHORUS_TEST_SOMETHING", "1", 1);
  const std::vector<std::string> unread = runtime::Config::UnreadVariables();
  CHECK(std::find(unread.begin(), unread.end(), "HOROVOD_BATCH_D2D_MEMCOPIES") != unread.end());
  CHECK(std::find(unread.begin(), unread.end(), "CHORUS_FUSION_TRESHOLD") != unread.end());
  CHECK(std::find(unread.begin(), unread.end(), "HOROVOD_FUSION_THRESHOLD") == unread.end());
  CHECK(std::find(unread.begin(), unread.end(), "HOROVOD_HOSTNAME") == unread.end());
  CHECK(std::find(unread.begin(), unread.end(), "CHORUS_TEST_SOMETHING") == unread.end());
  CHECK(std::is_sorted(unread.begin(), unread.end()));
  for (const char* name :
       {"HOROVOD_BATCH_D2D_MEMCOPIES", "CHORUS_FUSION_TRESHOLD", "HOROVOD_FUSION_THRESHOLD",
        "HOROVOD_HOSTNAME", "CHORUS_TEST_SOMETHING"}) {
    unsetenv(name);
  }
}

}  // namespace
}  // namespace chorus
