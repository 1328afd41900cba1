#include "launcher/mpi/mpirun_output.h"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/process/worker_output.h"

namespace chorus::launcher {
namespace {

struct Line {
  std::string text;
  std::optional<int> rank;
  bool is_stdout;
  bool operator==(const Line&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Line& l) {
  return os << "{" << (l.rank ? std::to_string(*l.rank) : "mpirun")
            << (l.is_stdout ? " out " : " err ") << "'" << l.text << "'}";
}

// What the parser emits for mpirun's output arriving in `chunks`.
std::vector<Line> Parse(const std::vector<std::string>& chunks) {
  std::vector<Line> lines;
  MpirunOutputParser parser([&lines](const OutputLine& l) {
    lines.push_back({l.text, l.rank, l.is_stdout});
  });
  for (const std::string& chunk : chunks) parser.Feed(chunk);
  parser.Finish();
  return lines;
}

// The same output in every 2-chunk cut and in 1-byte chunks must give the same lines.
void CheckEveryCut(const std::string& output, const std::vector<Line>& want) {
  CHECK(Parse({output}) == want);
  for (size_t cut = 0; cut <= output.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK(Parse({output.substr(0, cut), output.substr(cut)}) == want);
  }
  std::vector<std::string> bytes;
  for (char c : output) bytes.emplace_back(1, c);
  CHECK(Parse(bytes) == want);
}

Line Out(int rank, const std::string& text) {
  return {"[" + std::to_string(rank) + "]<stdout>:" + text, rank, true};
}
Line Err(int rank, const std::string& text) {
  return {"[" + std::to_string(rank) + "]<stderr>:" + text, rank, false};
}
Line Mpirun(const std::string& text) { return {text, std::nullopt, false}; }

TEST_CASE("Rank tags are rewritten to horovodrun's form", "[launcher][output]") {
  CheckEveryCut(
      "[1,0]<stdout>:rank=0\n[22100,12]<stderr>:oops\n[1,3]<stddiag>:diag\n"
      "[1,1]<stdout>:\n[4294967295,7]<stdout>:job\n",
      {Out(0, "rank=0"),
       Err(12, "oops"),
       {"[3]<stddiag>:diag", 3, false},
       Out(1, ""),
       Out(7, "job")});
}

TEST_CASE("Records of interleaved ranks are put back into whole lines", "[launcher][output]") {
  // What Open MPI 4.1 printed for 2 ranks each writing "line N " and "R\n" in two writes.
  CheckEveryCut(
      "[1,1]<stdout>:line 0 [1,0]<stdout>:line 0 [1,1]<stdout>:1\n"
      "[1,0]<stdout>:0\n"
      "[1,1]<stdout>:line 1 [1,0]<stdout>:line 1 [1,0]<stdout>:0\n"
      "[1,1]<stdout>:1\n",
      {Out(1, "line 0 1"), Out(0, "line 0 0"), Out(0, "line 1 0"), Out(1, "line 1 1")});
}

TEST_CASE("A rank's streams are separate lines", "[launcher][output]") {
  CheckEveryCut("[1,0]<stdout>:a[1,0]<stderr>:b\n[1,0]<stdout>:c\n[1,0]<stddiag>:d\n",
                {Err(0, "b"), Out(0, "ac"), {"[0]<stddiag>:d", 0, false}});
}

TEST_CASE("A chunk's records: one per line it holds", "[launcher][output]") {
  // A rank wrote "x\ny", then "z\n\n", then "\n".
  CheckEveryCut(
      "[1,0]<stdout>:x\n[1,0]<stdout>:y[1,0]<stdout>:z\n[1,0]<stdout>:\n"
      "[1,0]<stdout>:\n",
      {Out(0, "x"), Out(0, "yz"), Out(0, ""), Out(0, "")});
}

TEST_CASE("--timestamp-output: the line keeps its first record's timestamp", "[launcher][output]") {
  const std::string t1 = "Fri Dec  4 14:02:52 2026", t2 = "Sat Dec 12 09:00:01 2026";
  CheckEveryCut(t1 + "[1,0]<stdout>:y" + t2 + "[1,1]<stderr>:e\n" + t2 + "[1,0]<stdout>:z\n",
                {{t2 + "[1]<stderr>:e", 1, false}, {t1 + "[0]<stdout>:yz", 0, true}});
}

TEST_CASE("Unterminated lines are emitted when mpirun's output ends, in the order they began",
          "[launcher][output]") {
  CheckEveryCut("[1,1]<stderr>:no newline[1,0]<stdout>:tail[1,1]<stderr>: here",
                {Err(1, "no newline here"), Out(0, "tail")});
  CheckEveryCut("[1,0]<stdout>:a[1,1]<stdout>:b\nmpirun's own, cut",
                {Out(1, "b"), Out(0, "a"), Mpirun("mpirun's own, cut")});
  CheckEveryCut("[1,0]<stdout>:x\nFri Dec", {Out(0, "x"), Mpirun("Fri Dec")});
  CheckEveryCut("[1,0]<stdout>:x\n[1,", {Out(0, "x"), Mpirun("[1,")});
}

TEST_CASE("A line longer than mpirun's 4096-byte reads comes back whole", "[launcher][output]") {
  // Rank 0 wrote 10000 bytes and a newline at once; rank 1's line came between its records.
  const std::string a(4096, 'a'), b(1808, 'b');
  CheckEveryCut("[1,0]<stdout>:" + a + "[1,1]<stdout>:short\n[1,0]<stdout>:" + a +
                    "[1,0]<stdout>:" + b + "\n",
                {Out(1, "short"), Out(0, a + a + b)});
}

TEST_CASE("A line longer than kMaxLineBytes is emitted in pieces of that size",
          "[launcher][output]") {
  const std::string text(kMaxLineBytes * 2 + 5, 'x');
  std::string output;
  for (size_t at = 0; at < text.size(); at += 4096) {
    output += "[1,2]<stdout>:" + text.substr(at, 4096);
  }
  output += "[1,2]<stdout>:\n";
  const std::vector<Line> want = {Out(2, text.substr(0, kMaxLineBytes)),
                                  Out(2, text.substr(kMaxLineBytes, kMaxLineBytes)),
                                  Out(2, "xxxxx")};
  CHECK(Parse({output}) == want);
  std::vector<std::string> chunks;
  for (size_t at = 0; at < output.size(); at += 1000) chunks.push_back(output.substr(at, 1000));
  CHECK(Parse(chunks) == want);
}

TEST_CASE("mpirun's own lines pass unchanged", "[launcher][output]") {
  const std::string rule(74, '-');
  CheckEveryCut(rule +
                    "\nmpirun noticed that process rank 1 with PID 0 on node vm exited on "
                    "signal 9 (Killed).\n\nplain\n[0]<stdout>:x\n[1,0]<stdin>:x\n"
                    "[1,x]<stdout>:x\n[,0]<stdout>:x\n  Process name: [[22100,1],1]\n",
                {Mpirun(rule),
                 Mpirun("mpirun noticed that process rank 1 with PID 0 on node vm exited on "
                        "signal 9 (Killed)."),
                 Mpirun(""), Mpirun("plain"), Mpirun("[0]<stdout>:x"), Mpirun("[1,0]<stdin>:x"),
                 Mpirun("[1,x]<stdout>:x"), Mpirun("[,0]<stdout>:x"),
                 Mpirun("  Process name: [[22100,1],1]")});
}

TEST_CASE("Text that only resembles a tag stays in its line", "[launcher][output]") {
  CheckEveryCut(
      "[1,0]<stdout>:see [1,x] [2,3]<stdin>: [4,5]<std Fri Dec  4 [0]<stdout>: "
      "Mon Jan 10 10:00:00 2026 [1,2]\n",
      {Out(0,
           "see [1,x] [2,3]<stdin>: [4,5]<std Fri Dec  4 [0]<stdout>: "
           "Mon Jan 10 10:00:00 2026 [1,2]")});
}

TEST_CASE("Text that is exactly a tag is taken for one (the format cannot tell)",
          "[launcher][output]") {
  CheckEveryCut("[1,0]<stdout>:inner [1,5]<stdout>:text\n", {Out(5, "text"), Out(0, "inner ")});
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
