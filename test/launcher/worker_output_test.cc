#include "launcher/worker_output.h"

#include <signal.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/ucx_launch.h"

namespace chorus::launcher {
namespace {

using Lines = std::vector<std::string>;

TEST_CASE("Worker lines are tagged [rank]<stream>:", "[launcher][output]") {
  const absl::TimeZone utc = absl::UTCTimeZone();
  CHECK(FormatTaggedLine(0, OutputStream::kStdout, "hi", std::nullopt, utc) == "[0]<stdout>:hi");
  CHECK(FormatTaggedLine(12, OutputStream::kStderr, "", std::nullopt, utc) == "[12]<stderr>:");
  // mpirun's --timestamp-output form, before the tag.
  const absl::Time t = absl::FromCivil(absl::CivilSecond(2026, 12, 1, 6, 35, 27), utc);
  CHECK(FormatTaggedLine(1, OutputStream::kStdout, "x", t, utc) ==
        "Tue Dec  1 06:35:27 2026[1]<stdout>:x");
  const absl::Time t2 = absl::FromCivil(absl::CivilSecond(2026, 11, 24, 16, 5, 9), utc);
  CHECK(FormatTaggedLine(1, OutputStream::kStderr, "y", t2, utc) ==
        "Tue Nov 24 16:05:09 2026[1]<stderr>:y");
}

Lines Split(const std::vector<std::string>& chunks) {
  LineSplitter splitter;
  Lines lines;
  auto emit = [&](absl::string_view line) { lines.emplace_back(line); };
  for (const std::string& c : chunks) splitter.Append(c, emit);
  splitter.Finish(emit);
  return lines;
}

TEST_CASE("LineSplitter joins pieces and splits lines", "[launcher][output]") {
  CHECK(Split({"a\nb", "c\n", "\n", "tail"}) == Lines{"a", "bc", "", "tail"});
  CHECK(Split({"x\n"}) == Lines{"x"});
  CHECK(Split({""}).empty());
  const std::string huge(kMaxLineBytes * 2 + 5, 'z');
  CHECK(Split({huge, "\n"}) ==
        Lines{std::string(kMaxLineBytes, 'z'), std::string(kMaxLineBytes, 'z'), "zzzzz"});
}

TEST_CASE("The failure summary names the rank, the host and the cause", "[launcher][output]") {
  const RankPlacement p = {"localhost", 1, 2, 1, 2, 0, 1};
  CHECK(DescribeRankExit(p, false, {true, SIGKILL}) ==
        "rank 1 on localhost was killed by signal 9 (Killed)");
  CHECK(DescribeRankExit(p, false, {true, SIGSEGV}) ==
        "rank 1 on localhost was killed by signal 11 (Segmentation fault)");
  CHECK(DescribeRankExit(p, false, {false, 3}) == "rank 1 on localhost exited with code 3");
  CHECK(DescribeRankExit(p, false, {false, 255}) == "rank 1 on localhost exited with code 255");
  const RankPlacement q = {"node7", 4, 8, 0, 4, 1, 2};
  CHECK(DescribeRankExit(q, true, {false, 1}) == "rank 4 on node7 exited with code 1");
  CHECK(DescribeRankExit(q, true, {false, 255}) ==
        "rank 4 on node7 exited with code 255 (ssh's code for a failed connection)");
  CHECK(DescribeRankExit(q, true, {false, 137}) ==
        "rank 4 on node7 exited with code 137 (the remote shell's code for signal 9 (Killed))");
  CHECK(WorkerExit{true, 9}.shell_status() == 137);
  CHECK(WorkerExit{false, 3}.shell_status() == 3);
  CHECK_FALSE(WorkerExit{false, 3}.ok());
  CHECK(WorkerExit{false, 0}.ok());
}

}  // namespace
}  // namespace chorus::launcher
