// CHORUS_NO_PROGRESS_TIMEOUT_SECONDS (Config::no_progress_timeout): default, parsing, and the
// check against the cycle times (Note [No-progress bound] in runtime/progress/progress_watchdog.h).
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

#include "runtime/config.h"

namespace chorus::runtime {
namespace {

absl::StatusOr<Config> Read(const std::map<std::string, std::string>& env) {
  return Config::FromEnvironment([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST_CASE("The no-progress bound defaults to 30 s and reads seconds, 0 disabling it",
          "[config][no_progress]") {
  auto config = Read({});
  REQUIRE(config.ok());
  CHECK(config->no_progress_timeout == absl::Seconds(30));
  for (const auto& [text, want] :
       std::map<std::string, absl::Duration>{{"3", absl::Seconds(3)},
                                             {" 0.5 ", absl::Milliseconds(500)},
                                             {"0", absl::ZeroDuration()},
                                             {"600", absl::Seconds(600)}}) {
    auto parsed = Read({{"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS", text}});
    INFO(text << ": " << parsed.status());
    REQUIRE(parsed.ok());
    CHECK(parsed->no_progress_timeout == want);
  }
  bool described = false;
  for (const std::string& line : config->Describe()) {
    described = described || line == "CHORUS_NO_PROGRESS_TIMEOUT_SECONDS=30";
  }
  CHECK(described);
}

TEST_CASE("A malformed no-progress bound is an error naming the variable",
          "[config][no_progress]") {
  for (const char* bad : {"-1", "abc", "inf", "nan", "", "3s"}) {
    auto parsed = Read({{"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS", bad}});
    INFO(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(absl::IsInvalidArgument(parsed.status()));
    CHECK(absl::StrContains(parsed.status().message(), "CHORUS_NO_PROGRESS_TIMEOUT_SECONDS=\""));
    CHECK(absl::StrContains(parsed.status().message(), "non-negative number of seconds"));
  }
}

TEST_CASE("The no-progress bound must exceed twice the cycle a quiet peer answers in",
          "[config][no_progress]") {
  // An idle cycle of 5 s: a peer with nothing to do answers every 5 s.
  auto parsed =
      Read({{"CHORUS_IDLE_CYCLE_MS", "5000"}, {"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS", "8"}});
  REQUIRE_FALSE(parsed.ok());
  INFO(parsed.status());
  CHECK(absl::IsInvalidArgument(parsed.status()));
  CHECK(absl::StrContains(parsed.status().message(),
                          "CHORUS_NO_PROGRESS_TIMEOUT_SECONDS=8 must exceed twice "
                          "CHORUS_IDLE_CYCLE_MS (5000 ms)"));
  CHECK(absl::StrContains(parsed.status().message(), "set it to 0"));
  // The default bound too.
  CHECK_FALSE(Read({{"CHORUS_IDLE_CYCLE_MS", "20000"}}).ok());
  // A long cycle time counts as well.
  parsed = Read({{"CHORUS_CYCLE_TIME_MS", "2000"}, {"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS", "4"}});
  REQUIRE_FALSE(parsed.ok());
  CHECK(absl::StrContains(parsed.status().message(), "twice CHORUS_CYCLE_TIME_MS (2000 ms)"));
  // Enough room, or no bound at all.
  CHECK(Read({{"CHORUS_IDLE_CYCLE_MS", "5000"}, {"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS", "10.5"}})
            .ok());
  CHECK(
      Read({{"CHORUS_IDLE_CYCLE_MS", "600000"}, {"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS", "0"}}).ok());
}

}  // namespace
}  // namespace chorus::runtime
