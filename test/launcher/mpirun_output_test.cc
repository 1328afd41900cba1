#include "launcher/mpirun_output.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

TEST_CASE("Rank tags are rewritten to horovodrun's form", "[launcher][output]") {
  auto [line, text, rank, is_stdout] = GENERATE(table<std::string, std::string, int, bool>({
      {"[1,0]<stdout>:rank=0", "[0]<stdout>:rank=0", 0, true},
      {"[22100,12]<stderr>:oops", "[12]<stderr>:oops", 12, false},
      {"[1,3]<stddiag>:diag", "[3]<stddiag>:diag", 3, false},
      {"[1,1]<stdout>:", "[1]<stdout>:", 1, true},
      {"[1,0]<stdout>:[1,5]<stdout>:inner", "[0]<stdout>:[1,5]<stdout>:inner", 0, true},
      // A line written in two chunks: mpirun tags the second one too.
      {"[1,0]<stdout>:Loss: 2.29[1,0]<stdout>:", "[0]<stdout>:Loss: 2.29", 0, true},
      {"[7,2]<stderr>:a[7,2]<stderr>:b[7,2]<stderr>:c", "[2]<stderr>:abc", 2, false},
      {"Tue Dec  1 06:35:27 2026[1,0]<stdout>:hi", "Tue Dec  1 06:35:27 2026[0]<stdout>:hi", 0,
       true},
  }));
  std::optional<TaggedLine> tagged = RewriteRankTag(line);
  REQUIRE(tagged);
  CHECK(tagged->text == text);
  CHECK(tagged->rank == rank);
  CHECK(tagged->is_stdout == is_stdout);
}

TEST_CASE("Lines without a tag are left alone", "[launcher][output]") {
  const std::string line =
      GENERATE(as<std::string>{}, "", "plain", "[0]<stdout>:x", "[1,0]<stdin>:x", "[1,x]<stdout>:x",
               "[,0]<stdout>:x", "  Process name: [[22100,1],1]",
               std::string(70, 'a') + "[1,0]<stdout>:late");
  CHECK_FALSE(RewriteRankTag(line));
}

std::optional<std::string> CauseOf(const std::vector<std::string>& lines) {
  FailureScanner scanner;
  for (const std::string& line : lines) scanner.Feed(line);
  return scanner.Cause();
}

const std::string kRule(74, '-');

TEST_CASE("A worker's non-zero exit is named", "[launcher][output]") {
  CHECK(
      CauseOf({kRule, "Primary job  terminated normally, but 1 process returned",
               "a non-zero exit code. Per user-direction, the job has been aborted.", kRule, kRule,
               "mpirun detected that one or more processes exited with non-zero status, thus "
               "causing",
               "the job to be terminated. The first process to do so was:", "",
               "  Process name: [[22100,1],1]", "  Exit code:    3", kRule}) ==
      "rank 1 exited with code 3");
}

TEST_CASE("A worker killed by a signal is named", "[launcher][output]") {
  CHECK(
      CauseOf({kRule, "Primary job  terminated normally, but 1 process returned",
               "a non-zero exit code. Per user-direction, the job has been aborted.", kRule, kRule,
               "mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 9 "
               "(Killed).",
               kRule}) == "rank 2 with PID 0 on node vm exited on signal 9 (Killed)");
}

TEST_CASE("Without a named rank, mpirun's notice is the cause", "[launcher][output]") {
  CHECK(CauseOf({kRule, "Primary job  terminated normally, but 1 process returned",
                 "a non-zero exit code. Per user-direction, the job has been aborted.", kRule}) ==
        "1 process returned a non-zero exit code (mpirun did not name the rank)");
}

TEST_CASE("Otherwise mpirun's first message is the cause", "[launcher][output]") {
  CHECK(CauseOf({kRule, "There are not enough slots available in the system to satisfy the 3",
                 "slots that were requested by the application:", "", "  true", "", "Either",
                 kRule}) ==
        "There are not enough slots available in the system to satisfy the 3 slots that were "
        "requested by the application:");
  CHECK(CauseOf({"unrelated", "lines"}) == std::nullopt);
}

}  // namespace
}  // namespace chorus::launcher
