#include "elastic/driver_settings.h"

#include <catch2/catch.hpp>

namespace chorus::elastic {
namespace {

launcher::LaunchOptions Elastic(int np) {
  launcher::LaunchOptions o;
  o.num_proc = np;
  o.is_elastic = true;
  o.gloo = true;
  return o;
}

TEST_CASE("ResolveDriverSettings: defaults", "[elastic][settings]") {
  auto s = ResolveDriverSettings(Elastic(3), {});
  REQUIRE(s.ok());
  CHECK(s->limits.min_np == 3);
  CHECK_FALSE(s->limits.max_np.has_value());
  CHECK(s->slots_per_host == 1);
  CHECK(s->elastic_timeout == absl::Seconds(600));
  CHECK(s->discovery_interval == absl::Seconds(1));
  CHECK_FALSE(s->reset_limit.has_value());
  CHECK_FALSE(s->cooldown.has_value());
}

TEST_CASE("ResolveDriverSettings: flags, then the environment", "[elastic][settings]") {
  launcher::LaunchOptions o = Elastic(4);
  o.elastic.min_np = 2;
  o.elastic.max_np = 8;
  o.elastic.slots_per_host = 4;
  o.elastic.reset_limit = 0;
  o.elastic.blacklist_cooldown_s = std::make_pair(5, 50);
  const launcher::Environment env = {{"HOROVOD_ELASTIC_TIMEOUT", "30"},
                                     {"CHORUS_ELASTIC_DISCOVERY_INTERVAL", "0.05"}};
  auto s = ResolveDriverSettings(o, env);
  REQUIRE(s.ok());
  CHECK(s->limits.min_np == 2);
  CHECK(s->limits.max_np == 8);
  CHECK(s->slots_per_host == 4);
  CHECK(s->reset_limit == 0);
  CHECK(s->elastic_timeout == absl::Seconds(30));
  CHECK(s->discovery_interval == absl::Milliseconds(50));
  REQUIRE(s->cooldown.has_value());
  CHECK(s->cooldown->min == absl::Seconds(5));
  CHECK(s->cooldown->max == absl::Seconds(50));

  o.elastic.elastic_timeout_s = 7;  // the flag wins over HOROVOD_ELASTIC_TIMEOUT
  CHECK(ResolveDriverSettings(o, env)->elastic_timeout == absl::Seconds(7));
}

TEST_CASE("ResolveDriverSettings: malformed variables name themselves", "[elastic][settings]") {
  auto [name, value] = GENERATE(table<std::string, std::string>({
      {"HOROVOD_ELASTIC_TIMEOUT", "0"},
      {"HOROVOD_ELASTIC_TIMEOUT", "soon"},
      {"CHORUS_ELASTIC_DISCOVERY_INTERVAL", "0"},
      {"CHORUS_ELASTIC_DISCOVERY_INTERVAL", "-1"},
      {"CHORUS_ELASTIC_DISCOVERY_INTERVAL", "nan"},
      {"CHORUS_ELASTIC_DISCOVERY_INTERVAL", "1e9"},
  }));
  auto s = ResolveDriverSettings(Elastic(1), {{name, value}});
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.status().message()), Catch::StartsWith(name + "=" + value));
}

}  // namespace
}  // namespace chorus::elastic
