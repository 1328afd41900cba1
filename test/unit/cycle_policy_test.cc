#include "runtime/loop/cycle_policy.h"

#include <string>

#include <catch2/catch.hpp>

namespace chorus::runtime {
namespace {

Config WithStallTimes(absl::Duration warning, absl::Duration shutdown) {
  Config config;
  config.stall_warning_time = warning;
  config.stall_shutdown_time = shutdown;
  return config;
}

TEST_CASE("Cache waits expire at half the smaller stall time", "[cycle_policy]") {
  const StallPolicy warn_only =
      StallPolicyFor(WithStallTimes(absl::Seconds(60), absl::ZeroDuration()));
  CHECK(warn_only.enabled);
  CHECK(warn_only.cache_wait_limit == absl::Seconds(30));
  CHECK(warn_only.check_every == absl::Seconds(1));
  CHECK_FALSE(warn_only.shutdown_rounds);

  const StallPolicy both = StallPolicyFor(WithStallTimes(absl::Seconds(60), absl::Seconds(2)));
  CHECK(both.cache_wait_limit == absl::Seconds(1));
  CHECK(both.check_every == absl::Milliseconds(500));
  CHECK(both.shutdown_rounds);

  const StallPolicy short_warning =
      StallPolicyFor(WithStallTimes(absl::Milliseconds(400), absl::ZeroDuration()));
  CHECK(short_warning.check_every == absl::Milliseconds(100));
}

TEST_CASE("Disabling the stall check disables the policy", "[cycle_policy]") {
  Config config = WithStallTimes(absl::Seconds(60), absl::Seconds(10));
  config.stall_check_disabled = true;
  CHECK_FALSE(StallPolicyFor(config).enabled);
}

TEST_CASE("A stall report names the op, the wait and both rank lists", "[cycle_policy]") {
  StallReport report;
  report.name = "grad.fc1";
  report.type = OpType::kAllreduce;
  report.process_set_id = 2;
  report.submitted_ranks = {0, 2};
  report.missing_ranks = {1, 3};
  report.waited = absl::Seconds(61);
  report.report_number = 2;
  const std::string line =
      DescribeStall(report, WithStallTimes(absl::Seconds(60), absl::ZeroDuration()));
  CHECK(line.find("'grad.fc1'") != std::string::npos);
  CHECK(line.find("process set 2") != std::string::npos);
  CHECK(line.find("waited 1m1s;") != std::string::npos);
  CHECK(line.find("submitted by ranks [0, 2]") != std::string::npos);
  CHECK(line.find("missing ranks [1, 3]") != std::string::npos);
  CHECK(line.find("warning 2, repeated every 1m while it waits") != std::string::npos);
  CHECK(line.find("CHORUS_STALL_SHUTDOWN_TIME_SECONDS=N") != std::string::npos);
}

TEST_CASE("A stall report with a shutdown time says when the op fails", "[cycle_policy]") {
  StallReport report;
  report.name = "grad.fc1";
  report.missing_ranks = {1};
  report.waited = absl::Seconds(61);
  const std::string line =
      DescribeStall(report, WithStallTimes(absl::Seconds(60), absl::Seconds(300)));
  CHECK(line.find("warning 1, repeated every 1m while it waits") != std::string::npos);
  CHECK(line.find("it fails on every rank once it has waited 5m") != std::string::npos);
  CHECK(line.find("CHORUS_STALL_SHUTDOWN_TIME_SECONDS") == std::string::npos);
}

TEST_CASE("A shutdown names the ranks that asked for it, unless this rank did", "[cycle_policy]") {
  const std::vector<std::string> hosts = {"n1", "n1", "n2", ""};
  const std::vector<std::string> none;
  CHECK(DescribeShutdown(true, {1}, hosts, none, " before this op completed") ==
        "chorus was shut down before this op completed");
  const std::string by_one = DescribeShutdown(false, {2}, hosts, none, " before this op completed");
  CHECK(by_one.rfind("chorus was shut down by rank 2 on n2 before this op completed (a rank "
                     "whose process ends",
                     0) == 0);
  CHECK(by_one.find("chorusrun's last line names the rank that failed first)") !=
        std::string::npos);
  // A rank without a known host (or beyond the list) is named alone.
  CHECK(DescribeShutdown(false, {0, 3}, hosts, none, "")
            .rfind("chorus was shut down by ranks 0 on n1, 3 (", 0) == 0);
  CHECK(
      DescribeShutdown(false, {5}, hosts, none, "").rfind("chorus was shut down by rank 5 (", 0) ==
      0);
  CHECK(DescribeShutdown(false, {2}, {}, none, "").rfind("chorus was shut down by rank 2 (", 0) ==
        0);
  CHECK(DescribeShutdown(false, {}, hosts, none, "")
            .rfind("chorus was shut down by another rank (", 0) == 0);
}

TEST_CASE("A shutdown says the cause each rank gave", "[cycle_policy]") {
  const std::vector<std::string> hosts = {"n1", "n1", "n2"};
  const std::vector<std::string> causes = {"", "", "RuntimeError: boom"};
  CHECK(DescribeShutdown(false, {2}, hosts, causes, " before this op completed")
            .rfind("chorus was shut down by rank 2 on n2 (RuntimeError: boom) before this op "
                   "completed (a rank whose process ends",
                   0) == 0);
  CHECK(DescribeShutdown(false, {1, 2}, hosts, causes, "")
            .rfind("chorus was shut down by ranks 1 on n1, 2 on n2 (RuntimeError: boom) (", 0) ==
        0);
}

TEST_CASE("Shutdown parts go through rank 0 and back unchanged", "[cycle_policy]") {
  const std::string nul("a\0b", 3);
  const std::vector<std::string> parts = {ShutdownPart(false, "ignored"), ShutdownPart(true, ""),
                                          ShutdownPart(true, "ValueError: x; y"),
                                          ShutdownPart(true, nul)};
  CHECK(parts[0] == "-");
  std::vector<int> ranks;
  std::vector<std::string> causes;
  REQUIRE(ParseShutdownParts(JoinShutdownParts(parts), 4, &ranks, &causes));
  CHECK(ranks == std::vector<int>{1, 2, 3});
  CHECK(causes == std::vector<std::string>{"", "", "ValueError: x; y", "a b"});
  // Long causes are cut; ranks beyond the 32 the flags can name are named here.
  CHECK(ShutdownPart(true, std::string(5000, 'x')).size() == 1 + kMaxShutdownCause);
  std::vector<std::string> many(40, "-");
  many[37] = ShutdownPart(true, "late");
  REQUIRE(ParseShutdownParts(JoinShutdownParts(many), 40, &ranks, &causes));
  CHECK(ranks == std::vector<int>{37});
  CHECK(causes[37] == "late");
  // Another world size, or a part that is neither, is refused and leaves the outputs alone.
  CHECK(!ParseShutdownParts(JoinShutdownParts(parts), 3, &ranks, &causes));
  CHECK(!ParseShutdownParts(std::string("-\0?", 3), 2, &ranks, &causes));
  CHECK(ranks == std::vector<int>{37});
}

}  // namespace
}  // namespace chorus::runtime
