#include "launcher/mpi/mpirun_output.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include "launcher/process/worker_output.h"

namespace chorus::launcher {
namespace {

bool IsRule(absl::string_view line) {
  return line.size() >= 10 && line.find_first_not_of('-') == absl::string_view::npos;
}

using Stream = MpirunOutputParser::Stream;

// kNeedMore: the text ends where a match could still complete.
enum class Match { kYes, kNo, kNeedMore };

struct Tag {
  size_t size = 0;  // bytes of the timestamp and the tag
  absl::string_view timestamp;
  int rank = 0;
  Stream stream = Stream::kStdout;
};

// Matches `literal` at text[*i], advancing *i.
Match ExpectLiteral(absl::string_view text, size_t* i, absl::string_view literal) {
  for (char c : literal) {
    if (*i == text.size()) return Match::kNeedMore;
    if (text[(*i)++] != c) return Match::kNo;
  }
  return Match::kYes;
}

// Matches 1 to `max_digits` decimal digits at text[*i], advancing *i past them.
Match ExpectNumber(absl::string_view text, size_t* i, size_t max_digits, int64_t* value) {
  const size_t start = *i;
  while (*i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[*i]))) {
    if (++*i - start > max_digits) return Match::kNo;
  }
  if (*i == text.size()) return Match::kNeedMore;
  if (*i == start || !absl::SimpleAtoi(text.substr(start, *i - start), value)) return Match::kNo;
  return Match::kYes;
}

// ctime()'s form, which --timestamp-output prints: "Fri Dec  4 14:02:52 2026".
constexpr absl::string_view kTimestampPattern = "Aaa Aaa Dd dd:dd:dd dddd";

Match MatchTimestamp(absl::string_view text) {
  for (size_t i = 0; i < kTimestampPattern.size(); ++i) {
    if (i == text.size()) return Match::kNeedMore;
    const auto c = static_cast<unsigned char>(text[i]);
    bool ok = false;
    switch (kTimestampPattern[i]) {
      case 'A':
        ok = absl::ascii_isupper(c);
        break;
      case 'a':
        ok = absl::ascii_islower(c);
        break;
      case 'd':
        ok = absl::ascii_isdigit(c);
        break;
      case 'D':
        ok = absl::ascii_isdigit(c) || c == ' ';
        break;
      default:
        ok = c == static_cast<unsigned char>(kTimestampPattern[i]);
    }
    if (!ok) return Match::kNo;
  }
  return Match::kYes;
}

// "[J,R]<stdout>:", "[J,R]<stderr>:" or "[J,R]<stddiag>:" at the start of `text`, or the same
// after a timestamp.
Match MatchTag(absl::string_view text, Tag* tag) {
  const auto bare = [tag](absl::string_view t, size_t offset) {
    size_t i = 0;
    int64_t job = 0, rank = 0;
    if (Match m = ExpectLiteral(t, &i, "["); m != Match::kYes) return m;
    if (Match m = ExpectNumber(t, &i, 10, &job); m != Match::kYes) return m;
    if (Match m = ExpectLiteral(t, &i, ","); m != Match::kYes) return m;
    if (Match m = ExpectNumber(t, &i, 9, &rank); m != Match::kYes) return m;
    tag->rank = static_cast<int>(rank);
    if (Match m = ExpectLiteral(t, &i, "]<"); m != Match::kYes) return m;
    const absl::string_view rest = t.substr(i);
    bool could_be = false;
    const std::pair<absl::string_view, Stream> streams[] = {{"stdout>:", Stream::kStdout},
                                                            {"stderr>:", Stream::kStderr},
                                                            {"stddiag>:", Stream::kStddiag}};
    for (const auto& [name, stream] : streams) {
      if (absl::StartsWith(rest, name)) {
        tag->stream = stream;
        tag->size = offset + i + name.size();
        return Match::kYes;
      }
      could_be = could_be || absl::StartsWith(name, rest);
    }
    return could_be ? Match::kNeedMore : Match::kNo;
  };
  const Match plain = bare(text, 0);
  if (plain == Match::kYes) {
    tag->timestamp = {};
    return plain;
  }
  const Match timestamp = MatchTimestamp(text);
  if (timestamp == Match::kYes) {
    const Match after = bare(text.substr(kTimestampPattern.size()), kTimestampPattern.size());
    if (after == Match::kYes) tag->timestamp = text.substr(0, kTimestampPattern.size());
    return after;
  }
  return plain == Match::kNeedMore || timestamp == Match::kNeedMore ? Match::kNeedMore : Match::kNo;
}

}  // namespace

MpirunOutputParser::MpirunOutputParser(Emit emit) : emit_(std::move(emit)) {}

void MpirunOutputParser::Feed(absl::string_view bytes) {
  pending_.append(bytes.data(), bytes.size());
  Parse(/*at_end=*/false);
}

void MpirunOutputParser::Finish() {
  Parse(/*at_end=*/true);
  std::vector<std::pair<uint64_t, Key>> open;
  for (const auto& [key, partial] : partial_) open.emplace_back(partial.order, key);
  std::sort(open.begin(), open.end());
  for (const auto& [order, key] : open) EndLine(key);
  if (state_ == State::kUntagged) EmitUntagged();
  state_ = State::kRecordStart;
}

void MpirunOutputParser::Parse(bool at_end) {
  const absl::string_view all = pending_;
  size_t pos = 0;
  bool wait = false;
  while (pos < all.size() && !wait) {
    const absl::string_view rest = all.substr(pos);
    switch (state_) {
      case State::kRecordStart: {
        Tag tag;
        const Match m = MatchTag(rest, &tag);
        if (m == Match::kNeedMore && !at_end) {
          wait = true;
        } else if (m == Match::kYes) {
          current_ = {tag.rank, tag.stream};
          current_timestamp_ = std::string(tag.timestamp);
          pos += tag.size;
          state_ = State::kRecord;
        } else {
          state_ = State::kUntagged;
        }
        break;
      }
      case State::kUntagged: {
        const size_t nl = rest.find('\n');
        AppendUntagged(rest.substr(0, nl));
        if (nl == absl::string_view::npos) {
          pos = all.size();
        } else {
          EmitUntagged();
          pos += nl + 1;
          state_ = State::kRecordStart;
        }
        break;
      }
      case State::kRecord: {
        // The record runs to its newline, or to where the next tag begins (a tag starts with
        // '[', or with its timestamp's capital letter).
        size_t end = 0;
        for (; end < rest.size() && rest[end] != '\n'; ++end) {
          const char c = rest[end];
          if (c != '[' && !absl::ascii_isupper(static_cast<unsigned char>(c))) continue;
          Tag tag;
          const Match m = MatchTag(rest.substr(end), &tag);
          if (m == Match::kYes) break;
          if (m == Match::kNeedMore && !at_end) {
            wait = true;
            break;
          }
        }
        AppendToRecord(rest.substr(0, end));
        pos += end;
        if (end < rest.size() && rest[end] == '\n') {
          EndLine(current_);
          ++pos;
          state_ = State::kRecordStart;
        } else if (end < rest.size() && !wait) {
          state_ = State::kRecordStart;  // the next record's tag
        }
        break;
      }
    }
  }
  pending_.erase(0, pos);
}

void MpirunOutputParser::AppendToRecord(absl::string_view bytes) {
  if (bytes.empty()) return;
  auto [it, begun] = partial_.try_emplace(current_);
  Partial& p = it->second;
  if (begun) {
    p.timestamp = current_timestamp_;
    p.order = next_order_++;
  }
  p.text.append(bytes.data(), bytes.size());
  while (p.text.size() > kMaxLineBytes) {
    EmitRankLine(current_, p.timestamp, absl::string_view(p.text).substr(0, kMaxLineBytes));
    p.text.erase(0, kMaxLineBytes);
    p.timestamp = current_timestamp_;
  }
}

void MpirunOutputParser::EndLine(const Key& key) {
  const auto it = partial_.find(key);
  if (it == partial_.end()) {
    EmitRankLine(key, current_timestamp_, "");  // a record that was only a newline
    return;
  }
  EmitRankLine(key, it->second.timestamp, it->second.text);
  partial_.erase(it);
}

void MpirunOutputParser::EmitRankLine(const Key& key, absl::string_view timestamp,
                                      absl::string_view text) {
  static constexpr absl::string_view kTags[] = {"]<stdout>:", "]<stderr>:", "]<stddiag>:"};
  OutputLine line;
  line.rank = key.first;
  line.is_stdout = key.second == Stream::kStdout;
  line.text = absl::StrCat(timestamp, "[", key.first, kTags[static_cast<int>(key.second)], text);
  line.body = line.text.size() - text.size();
  emit_(line);
}

void MpirunOutputParser::AppendUntagged(absl::string_view bytes) {
  untagged_.append(bytes.data(), bytes.size());
  while (untagged_.size() > kMaxLineBytes) {
    emit_(OutputLine{untagged_.substr(0, kMaxLineBytes), std::nullopt, false});
    untagged_.erase(0, kMaxLineBytes);
  }
}

void MpirunOutputParser::EmitUntagged() {
  emit_(OutputLine{std::move(untagged_), std::nullopt, false});
  untagged_.clear();
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
