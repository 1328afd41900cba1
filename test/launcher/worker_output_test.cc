#include "launcher/process/worker_output.h"

#include <signal.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace chorus::launcher
