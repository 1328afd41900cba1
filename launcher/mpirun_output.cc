#include "launcher/mpirun_output.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace chorus::launcher {
namespace {

// Consumes a run of decimal digits from the front of `text`.
bool ConsumeDigits(absl::string_view* text, absl::string_view* digits) {
  size_t n = 0;
  while (n < text->size() && absl::ascii_isdigit(static_cast<unsigned char>((*text)[n]))) ++n;
  if (n == 0) return false;
  *digits = text->substr(0, n);
  text->remove_prefix(n);
  return true;
}

bool IsRule(absl::string_view line) {
  return line.size() >= 10 && line.find_first_not_of('-') == absl::string_view::npos;
}

}  // namespace

std::optional<TaggedLine> RewriteRankTag(absl::string_view line) {
  constexpr size_t kSearchWindow = 64;
  for (size_t start = line.find('['); start != absl::string_view::npos && start < kSearchWindow;
       start = line.find('[', start + 1)) {
    absl::string_view rest = line.substr(start + 1);
    absl::string_view job, rank;
    if (!ConsumeDigits(&rest, &job) || !absl::ConsumePrefix(&rest, ",") ||
        !ConsumeDigits(&rest, &rank) || !absl::ConsumePrefix(&rest, "]<")) {
      continue;
    }
    for (absl::string_view stream : {"stdout>:", "stderr>:", "stddiag>:"}) {
      if (absl::StartsWith(rest, stream)) {
        TaggedLine tagged;
        // mpirun tags every chunk a worker writes, so a line written in two pieces carries the
        // same tag again where the second piece starts: drop the repeats.
        const absl::string_view tag = line.substr(
            start, static_cast<size_t>(rest.data() - line.data()) - start + stream.size());
        const std::string body = absl::StrReplaceAll(rest.substr(stream.size()), {{tag, ""}});
        tagged.text = absl::StrCat(line.substr(0, start), "[", rank, "]<", stream, body);
        tagged.is_stdout = stream == absl::string_view("stdout>:");
        if (!absl::SimpleAtoi(rank, &tagged.rank)) return std::nullopt;
        return tagged;
      }
    }
  }
  return std::nullopt;
}

void FailureScanner::Feed(absl::string_view line) {
  absl::string_view text = absl::StripAsciiWhitespace(line);
  if (IsRule(text)) {
    if (box_ == Box::kNone) {
      box_ = Box::kInFirst;
    } else if (box_ == Box::kInFirst) {
      // "Primary job terminated normally, but 1 process returned a non-zero exit code" only
      // announces the report that follows it.
      const bool preamble =
          !first_message_.empty() && absl::StartsWith(first_message_[0], "Primary job");
      box_ = preamble ? Box::kNone : Box::kDone;
      if (preamble) {
        if (preamble_.empty()) preamble_ = absl::StrJoin(first_message_, " ");
        first_message_.clear();
      }
    }
    return;
  }
  if (box_ == Box::kInFirst) {
    if (text.empty()) {
      if (!first_message_.empty() && !absl::StartsWith(first_message_[0], "Primary job")) {
        box_ = Box::kDone;
      }
    } else {
      first_message_.push_back(absl::StrJoin(absl::StrSplit(text, ' ', absl::SkipEmpty()), " "));
    }
  }
  if (absl::ConsumePrefix(&text, "Process name:")) {
    // "[[22100,1],1]": the rank follows the last ','.
    text = absl::StripAsciiWhitespace(text);
    const size_t comma = text.rfind(',');
    int rank = 0;
    if (comma != absl::string_view::npos && absl::EndsWith(text, "]") &&
        absl::SimpleAtoi(text.substr(comma + 1, text.size() - comma - 2), &rank)) {
      process_rank_ = rank;
    }
  } else if (absl::ConsumePrefix(&text, "Exit code:")) {
    exit_code_ = std::string(absl::StripAsciiWhitespace(text));
  } else if (absl::StartsWith(text, "mpirun noticed that process rank")) {
    // "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."
    absl::string_view report = text;
    absl::ConsumePrefix(&report, "mpirun noticed that process ");
    absl::ConsumeSuffix(&report, ".");
    if (!signal_report_) signal_report_ = std::string(report);
  }
}

std::optional<std::string> FailureScanner::Cause() const {
  if (process_rank_ && exit_code_) {
    return absl::StrCat("rank ", *process_rank_, " exited with code ", *exit_code_);
  }
  if (signal_report_) return *signal_report_;
  if (!first_message_.empty()) return absl::StrJoin(first_message_, " ");
  if (!preamble_.empty()) {
    // "Primary job terminated normally, but 1 process returned a non-zero exit code. Per ..."
    const size_t but = preamble_.find("but ");
    const size_t end = preamble_.find(" exit code");
    if (but != std::string::npos && end != std::string::npos && but < end) {
      return absl::StrCat(preamble_.substr(but + 4, end + 10 - but - 4),
                          " (mpirun did not name the rank)");
    }
    return preamble_;
  }
  return std::nullopt;
}

}  // namespace chorus::launcher
