// The failure report line (launcher/failure_report.h): parsing, and its collection from the
// workers' output streams.
#include "launcher/failure_report.h"

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
  CHECK(recorder->text ==
        "2e:Traceback\nchorus: rank 0 failed (uncau"
        "1o:chorus: rank 1 failed (uncaught exception): E\n"
        "2e:ght exception): RuntimeError: x\n"
        "0e:chorus: rank 0 failed (uncaught exception): Custom|closed");
}

}  // namespace
}  // namespace chorus::launcher
