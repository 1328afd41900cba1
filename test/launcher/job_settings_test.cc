#include "launcher/engine/job_settings.h"

#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

LaunchOptions Elastic(int np) {
  LaunchOptions o;
  o.num_proc = np;
  o.is_elastic = true;
  o.gloo = true;
  return o;
}

TEST_CASE("ResolveJobSettings: elastic defaults", "[launcher][settings]") {
  auto s = ResolveJobSettings(Elastic(3), {});
  REQUIRE(s.ok());
  CHECK_FALSE(s->rules.fixed);
  CHECK(s->rules.limits.min_np == 3);
  CHECK_FALSE(s->rules.limits.max_np.has_value());
  CHECK(s->slots_per_host == 1);
  CHECK(s->rules.elastic_timeout == absl::Seconds(600));
  CHECK(s->discovery_interval == absl::Seconds(1));
  CHECK(s->start_timeout == absl::Seconds(30));
  CHECK_FALSE(s->rules.reset_limit.has_value());
  CHECK_FALSE(s->cooldown.has_value());
  CHECK_FALSE(s->rules.blacklist_cooldown);
}

TEST_CASE("ResolveJobSettings: a fixed-size job is min = max = np without resets",
          "[launcher][settings]") {
  LaunchOptions o;
  o.num_proc = 4;
  o.gloo = true;
  auto s = ResolveJobSettings(o, {{"HOROVOD_START_TIMEOUT", "12"}});
  REQUIRE(s.ok());
  CHECK(s->rules.fixed);
  CHECK(s->rules.limits.min_np == 4);
  CHECK(s->rules.limits.max_np == 4);
  CHECK(s->rules.elastic_timeout == absl::InfiniteDuration());
  CHECK(s->start_timeout == absl::Seconds(12));
  o.start_timeout_s = 5;  // the flag wins
  CHECK(ResolveJobSettings(o, {{"HOROVOD_START_TIMEOUT", "12"}})->start_timeout ==
        absl::Seconds(5));
}

TEST_CASE("ResolveJobSettings: flags, then the environment", "[launcher][settings]") {
  LaunchOptions o = Elastic(4);
  o.elastic.min_np = 2;
  o.elastic.max_np = 8;
  o.elastic.slots_per_host = 4;
  o.elastic.reset_limit = 0;
  o.elastic.blacklist_cooldown_s = std::make_pair(5, 50);
  const Environment env = {{"HOROVOD_ELASTIC_TIMEOUT", "30"},
                           {"CHORUS_ELASTIC_DISCOVERY_INTERVAL", "0.05"}};
  auto s = ResolveJobSettings(o, env);
  REQUIRE(s.ok());
  CHECK(s->rules.limits.min_np == 2);
  CHECK(s->rules.limits.max_np == 8);
  CHECK(s->slots_per_host == 4);
  CHECK(s->rules.reset_limit == 0);
  CHECK(s->rules.elastic_timeout == absl::Seconds(30));
  CHECK(s->discovery_interval == absl::Milliseconds(50));
  REQUIRE(s->cooldown.has_value());
  CHECK(s->cooldown->min == absl::Seconds(5));
  CHECK(s->cooldown->max == absl::Seconds(50));
  CHECK(s->rules.blacklist_cooldown);

  o.elastic.elastic_timeout_s = 7;  // the flag wins over HOROVOD_ELASTIC_TIMEOUT
  CHECK(ResolveJobSettings(o, env)->rules.elastic_timeout == absl::Seconds(7));
}

TEST_CASE("ResolveJobSettings: malformed variables name themselves", "[launcher][settings]") {
  auto [name, value] = GENERATE(table<std::string, std::string>({
      {"HOROVOD_ELASTIC_TIMEOUT", "0"},
      {"HOROVOD_ELASTIC_TIMEOUT", "soon"},
      {"HOROVOD_START_TIMEOUT", "-3"},
      {"CHORUS_ELASTIC_DISCOVERY_INTERVAL", "0"},
      {"CHORUS_ELASTIC_DISCOVERY_INTERVAL", "-1"},
      {"CHORUS_ELASTIC_DISCOVERY_INTERVAL", "nan"},
      {"CHORUS_ELASTIC_DISCOVERY_INTERVAL", "1e9"},
  }));
  auto s = ResolveJobSettings(Elastic(1), {{name, value}});
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.status().message()), Catch::StartsWith(name + "=" + value));
}

}  // namespace
}  // namespace chorus::launcher
