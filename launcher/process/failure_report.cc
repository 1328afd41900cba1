#include "launcher/process/failure_report.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace chorus::launcher {
namespace {

constexpr absl::string_view kPrefix = "chorus: rank ";
constexpr absl::string_view kMiddle = " failed (uncaught exception): ";
// A failed op's message where one rank's shutdown stopped it (runtime/loop/cycle_policy.h's
// DescribeShutdown): "chorus was shut down by rank 2 on n3 before this op completed (...)".
constexpr absl::string_view kShutDownBy = "chorus was shut down by rank ";
// A failed init's message on the ranks that were fine (runtime/controller.h's AgreeNoProblem):
// "chorus init failed on rank 1 (rank 0 is fine): ...".
constexpr absl::string_view kInitFailedOn = "chorus init failed on rank ";

// The rank a line names after `marker`, if it names one rank.
std::optional<FailureReport> ParseNamedRank(absl::string_view line, absl::string_view marker) {
  const size_t at = line.find(marker);
  if (at == absl::string_view::npos) return std::nullopt;
  line.remove_prefix(at + marker.size());
  const size_t digits = line.find_first_not_of("0123456789");
  FailureReport report;
  report.named_by_other = true;
  report.in_init = marker == kInitFailedOn;
  if (digits == 0 || !absl::SimpleAtoi(line.substr(0, digits), &report.rank)) return std::nullopt;
  // "rank 2 on n3 before ...", "rank 2 before ...", "rank 2 (...)": not "ranks 0, 3".
  const absl::string_view rest = line.substr(std::min(digits, line.size()));
  if (!rest.empty() && rest.front() != ' ') return std::nullopt;
  return report;
}

}  // namespace

std::optional<FailureReport> ParseFailureReport(absl::string_view line) {
  if (!absl::StartsWith(line, kPrefix)) {
    std::optional<FailureReport> named = ParseNamedRank(line, kShutDownBy);
    return named ? named : ParseNamedRank(line, kInitFailedOn);
  }
  absl::ConsumePrefix(&line, kPrefix);
  const size_t middle = line.find(kMiddle);
  if (middle == absl::string_view::npos) return std::nullopt;
  FailureReport report;
  if (!absl::SimpleAtoi(line.substr(0, middle), &report.rank) || report.rank < 0) {
    return std::nullopt;
  }
  report.exception = std::string(line.substr(middle + kMiddle.size()));
  if (report.exception.empty()) return std::nullopt;
  return report;
}

std::optional<FailureReport> ParseWorkerFailureReport(absl::string_view line, int writer) {
  std::optional<FailureReport> report = ParseFailureReport(line);
  if (report && !report->named_by_other) report->rank = writer;
  return report;
}

void FailureReportSink::Write(int index, OutputStream stream, absl::string_view bytes) {
  inner_->Write(index, stream, bytes);
  if (stream != OutputStream::kStderr) return;
  stderr_lines_[index].Append(bytes, [&](absl::string_view line) { Scan(index, line); });
}

void FailureReportSink::Close(int index, OutputStream stream) {
  if (stream == OutputStream::kStderr) {
    auto it = stderr_lines_.find(index);
    if (it != stderr_lines_.end()) {
      it->second.Finish([&](absl::string_view line) { Scan(index, line); });
      stderr_lines_.erase(it);
    }
  }
  inner_->Close(index, stream);
}

void FailureReportSink::Scan(int index, absl::string_view line) {
  if (std::optional<FailureReport> report = ParseWorkerFailureReport(line, index)) {
    reports_->push_back(*std::move(report));
  }
}

}  // namespace chorus::launcher
