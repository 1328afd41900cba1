// The runtime's parameters as chorusrun takes them (launcher/cli/tunables.h): every row's flag and
// every one of its config-file keys fill the same field, a value out of range is refused with
// the flag named whichever way it came, and the row's variable carries it to the workers.
#include "launcher/cli/tunables.h"

#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "launcher/cli/args.h"
#include "launcher/cli/config_file.h"
#include "launcher/cli/worker_env.h"

namespace chorus::launcher {
namespace {

// A value of the row's type its checks accept, as text.
std::string Sample(const Tunable& t) {
  if (std::string(t.flag) == "--thread-affinity") return "0,1";
  if (std::string(t.flag) == "--log-level") return "debug";
  return std::visit(
      [](auto member) -> std::string {
        using T = typename std::decay_t<decltype(LaunchOptions().*member)>::value_type;
        if constexpr (std::is_same_v<T, std::string>) return "/tmp/value";
        if constexpr (std::is_same_v<T, double>) return "0.5";
        return "3";
      },
      t.field);
}

// The row's field in `o`, as text ("-" when unset).
std::string FieldText(const Tunable& t, const LaunchOptions& o) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& value = o.*member;
        if (!value.has_value()) return "-";
        return absl::StrCat(*value);
      },
      t.field);
}

bool IsBool(const Tunable& t) {
  return std::holds_alternative<std::optional<bool> LaunchOptions::*>(t.field);
}

TEST_CASE("every parameter's flag and config-file keys fill the same field",
          "[launcher][tunables]") {
  for (const Tunable& t : Tunables()) {
    INFO(t.flag);
    // A boolean is given as false where true is refused, else as true.
    const bool value = t.refused_when_true == nullptr;
    std::vector<std::string> args = {"-np", "1"};
    if (IsBool(t)) {
      REQUIRE(t.off_flag != nullptr);
      args.push_back(value ? t.flag : t.off_flag);
    } else {
      args.push_back(t.flag);
      args.push_back(Sample(t));
    }
    args.push_back("prog");
    absl::StatusOr<CommandLine> from_flag = ParseCommandLine(args);
    REQUIRE(from_flag.ok());
    const std::string expected = FieldText(t, from_flag->options);
    CHECK(expected != "-");
    REQUIRE_FALSE(t.config_keys.empty());
    for (const Tunable::ConfigKey& key : t.config_keys) {
      INFO(key.section << "." << key.key);
      const std::string text = IsBool(t) ? (value != key.inverted ? "true" : "false") : Sample(t);
      LaunchOptions from_file;
      REQUIRE(ApplyConfigYaml(absl::StrCat(key.section, ":\n  ", key.key, ": '", text, "'\n"),
                              "c.yaml", &from_file)
                  .ok());
      // The file's value passes the same checks (which normalise --log-level's case).
      REQUIRE(CheckTunables(&from_file).ok());
      CHECK(FieldText(t, from_file) == expected);
    }
  }
}

TEST_CASE("a value out of range is refused naming the flag, from the command line or the file",
          "[launcher][tunables]") {
  int checked = 0;
  for (const Tunable& t : Tunables()) {
    if (!t.range.has_value()) continue;
    INFO(t.flag);
    const std::string bad = absl::StrCat(t.range->low - 1);
    absl::StatusOr<CommandLine> cl = ParseCommandLine({"-np", "1", t.flag, bad, "prog"});
    REQUIRE_FALSE(cl.ok());
    CHECK(cl.status().message() ==
          absl::StrCat(t.flag, "=", bad, " is out of range: expected ", t.range->accepted));
    LaunchOptions from_file;
    const Tunable::ConfigKey& key = t.config_keys.front();
    REQUIRE(ApplyConfigYaml(absl::StrCat(key.section, ":\n  ", key.key, ": ", bad, "\n"), "c.yaml",
                            &from_file)
                .ok());
    CHECK(CheckTunables(&from_file).message() == cl.status().message());
    ++checked;
  }
  CHECK(checked >= 10);
}

TEST_CASE("a parameter not given sets no variable; given, its variable carries it",
          "[launcher][tunables]") {
  LaunchOptions none;
  CHECK(WorkerEnvironment(none).empty());
  absl::StatusOr<CommandLine> cl =
      ParseCommandLine({"-np", "1", "--fusion-threshold-mb", "64", "--log-with-timestamp",
                        "--timeline-mark-cycles", "--gloo-timeout-seconds", "7", "prog"});
  REQUIRE(cl.ok());
  // MB -> bytes; the timestamp flag is the inverse of the variable; the cycle marks travel only
  // with a timeline file; --gloo-timeout-seconds is the no-progress bound.
  CHECK(WorkerEnvironment(cl->options) ==
        std::vector<EnvVar>{{"CHORUS_FUSION_THRESHOLD", "67108864"},
                            {"CHORUS_NO_PROGRESS_TIMEOUT_SECONDS", "7"},
                            {"CHORUS_LOG_HIDE_TIME", "0"}});
}

}  // namespace
}  // namespace chorus::launcher
