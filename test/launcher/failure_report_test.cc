// The failure report line (launcher/process/failure_report.h): parsing, and its collection from the
// workers' output streams.
#include "launcher/process/failure_report.h"

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

TEST_CASE("A failure report line is parsed; anything else is not", "[launcher][failure_report]") {
  std::optional<FailureReport> r =
      ParseFailureReport("chorus: rank 12 failed (uncaught exception): ValueError: a: b");
  REQUIRE(r.has_value());
  CHECK(r->rank == 12);
  CHECK(r->exception == "ValueError: a: b");
  for (const char* line : {"chorus: rank x failed (uncaught exception): E",
                           "chorus: rank -1 failed (uncaught exception): E",
                           "chorus: rank 1 failed (uncaught exception): ",
                           "chorus: rank 1 failed: E", "rank 1 failed (uncaught exception): E",
                           " chorus: rank 1 failed (uncaught exception): E", ""}) {
    CHECK_FALSE(ParseFailureReport(line).has_value());
  }
  CHECK(elastic::DescribeFailureReport({3, "KeyError: 'k'"}, "n2") ==
        "rank 3 on n2 raised KeyError: 'k'");
  CHECK(elastic::DescribeFailureReport({3, "E"}, "") == "rank 3 raised E");
}

TEST_CASE("A rank named by another's failed op is a report named by another rank",
          "[launcher][failure_report]") {
  for (const char* line :
       {"chorus.common.exceptions.HorovodInternalError: allreduce of 'step' failed: chorus was "
        "shut down by rank 2 on n3 before this op completed (a rank whose process ends, ...)",
        "chorus was shut down by rank 2 before this op completed",
        "chorus was shut down by rank 2 on n3 (ValueError: bad (x)) before this op completed (a "
        "rank whose ...)",
        "ChorusError: chorus was shut down by rank 2 (a rank whose ...)",
        "chorus was shut down by rank 2"}) {
    std::optional<FailureReport> r = ParseFailureReport(line);
    INFO(line);
    REQUIRE(r.has_value());
    CHECK(r->rank == 2);
    CHECK(r->named_by_other);
    CHECK(r->exception.empty());
  }
  for (const char* line : {"chorus was shut down by ranks 0, 3 (a rank whose ...)",
                           "chorus was shut down by another rank (a rank whose ...)",
                           "chorus was shut down before this op completed",
                           "chorus was shut down by rank 2x", "chorus was shut down by rank "}) {
    INFO(line);
    CHECK_FALSE(ParseFailureReport(line).has_value());
  }
  // As read from worker 5's output: its own report is rank 5's, a named rank stays the line's.
  CHECK(ParseWorkerFailureReport("chorus was shut down by rank 2 on n3", 5)->rank == 2);
  CHECK(ParseWorkerFailureReport("chorus: rank 0 failed (uncaught exception): E: x", 5)->rank == 5);
  CHECK_FALSE(ParseWorkerFailureReport("chorus was shut down", 5).has_value());
  FailureReport named{2, "", true};
  CHECK(elastic::DescribeFailureReport(named, "n3") ==
        "rank 2 on n3 ended while the other ranks ran ops (their ops failed: chorus was shut "
        "down by it)");
}

TEST_CASE("A rank named by the others' failed init is a report named by another rank",
          "[launcher][failure_report]") {
  // As runtime/controller.h's AgreeNoProblem writes it on the ranks that were fine.
  std::optional<FailureReport> r = ParseFailureReport(
      "chorus._C.ChorusValueError: chorus init failed on rank 1 (rank 0 is fine): a "
      "CHORUS_*/HOROVOD_* variable there is invalid; see its error");
  REQUIRE(r.has_value());
  CHECK(r->rank == 1);
  CHECK(r->named_by_other);
  CHECK(r->in_init);
  CHECK(elastic::DescribeFailureReport(*r, "n2") ==
        "rank 1 on n2 failed chorus init (the other ranks' init failed because of it; its error "
        "says why)");
  // Several ranks: none is named (each of them reports its own error).
  CHECK_FALSE(
      ParseFailureReport("chorus init failed on ranks 1, 2 (rank 0 is fine): x").has_value());
  // A shutdown named by another is not an init failure.
  CHECK_FALSE(ParseFailureReport("chorus was shut down by rank 2")->in_init);
}

TEST_CASE("ChooseFailureReport keeps the first own report, else the first named one",
          "[launcher][failure_report]") {
  const FailureReport named1{1, "", true}, named2{2, "", true}, own0{0, "E: x"}, own2{2, "F"};
  std::optional<FailureReport> chosen;
  elastic::ChooseFailureReport(&chosen, named1);
  CHECK(chosen == named1);
  elastic::ChooseFailureReport(&chosen, named2);
  CHECK(chosen == named1);
  elastic::ChooseFailureReport(&chosen, own0);
  CHECK(chosen == own0);
  elastic::ChooseFailureReport(&chosen, own2);
  elastic::ChooseFailureReport(&chosen, named2);
  CHECK(chosen == own0);
}

class Recorder final : public OutputSink {
 public:
  void Write(int index, OutputStream stream, absl::string_view bytes) override {
    text += std::to_string(index) + (stream == OutputStream::kStderr ? "e:" : "o:");
    text.append(bytes.data(), bytes.size());
  }
  void Close(int index, OutputStream stream) override { text += "|closed"; }
  std::string text;
};

TEST_CASE("FailureReportSink passes every byte on and collects reports from stderr lines",
          "[launcher][failure_report]") {
  auto inner = std::make_unique<Recorder>();
  Recorder* recorder = inner.get();
  std::vector<FailureReport> reports;
  FailureReportSink sink(std::move(inner), &reports);
  // In pieces, interleaved between workers; the rank is the worker's index.
  sink.Write(2, OutputStream::kStderr, "Traceback\nchorus: rank 0 failed (uncau");
  sink.Write(1, OutputStream::kStdout, "chorus: rank 1 failed (uncaught exception): E\n");
  sink.Write(2, OutputStream::kStderr, "ght exception): RuntimeError: x\n");
  CHECK(reports == std::vector<FailureReport>{{2, "RuntimeError: x"}});
  // An unterminated last line counts at the stream's end.
  sink.Write(0, OutputStream::kStderr, "chorus: rank 0 failed (uncaught exception): Custom");
  CHECK(reports.size() == 1);
  sink.Close(0, OutputStream::kStderr);
  CHECK(reports == std::vector<FailureReport>{{2, "RuntimeError: x"}, {0, "Custom"}});
  // A line naming another rank keeps that rank.
  sink.Write(1, OutputStream::kStderr, "E: chorus was shut down by rank 0 on h before this\n");
  CHECK(reports.back() == FailureReport{0, "", true});
  CHECK(recorder->text.find("1e:E: chorus was shut down by rank 0 on h before this\n") !=
        std::string::npos);
  recorder->text.erase(recorder->text.find("1e:E: chorus was shut"));
  CHECK(recorder->text ==
        "2e:Traceback\nchorus: rank 0 failed (uncau"
        "1o:chorus: rank 1 failed (uncaught exception): E\n"
        "2e:ght exception): RuntimeError: x\n"
        "0e:chorus: rank 0 failed (uncaught exception): Custom|closed");
}

}  // namespace
}  // namespace chorus::launcher
