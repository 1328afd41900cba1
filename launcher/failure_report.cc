#include "launcher/failure_report.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace chorus::launcher {
namespace {

constexpr absl::string_view kPrefix = "chorus: rank ";
constexpr absl::string_view kMiddle = " failed (uncaught exception): ";

}  // namespace

std::optional<FailureReport> ParseFailureReport(absl::string_view line) {
  if (!absl::ConsumePrefix(&line, kPrefix)) return std::nullopt;
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
  if (std::optional<FailureReport> report = ParseFailureReport(line)) {
    report->rank = index;
    reports_->push_back(*std::move(report));
  }
}

}  // namespace chorus::launcher
