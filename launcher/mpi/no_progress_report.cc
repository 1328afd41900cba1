#include "launcher/mpi/no_progress_report.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace chorus::launcher {
namespace {

constexpr absl::string_view kMarker = ": no progress for ";
constexpr absl::string_view kRank = "rank ";
constexpr absl::string_view kWaitsOn = "; it waits on rank";
constexpr absl::string_view kCannotTell = "; it cannot tell which ranks it waits on";
constexpr absl::string_view kAbort = "(MPI_Abort, exit code ";
constexpr size_t kMaxNamedSuspects = 8;

bool IsDigit(char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }

// Reads a decimal number at text[*i], advancing *i past it.
std::optional<int> ReadNumber(absl::string_view text, size_t* i) {
  const size_t start = *i;
  while (*i < text.size() && IsDigit(text[*i])) ++*i;
  int value = 0;
  if (*i == start || !absl::SimpleAtoi(text.substr(start, *i - start), &value)) return std::nullopt;
  return value;
}

// "rank R" ending at `at`, at the start of `text` or after a character that is not part of a
// word: R, else nullopt.
std::optional<int> RankBefore(absl::string_view text, size_t at) {
  size_t digits = at;
  while (digits > 0 && IsDigit(text[digits - 1])) --digits;
  if (digits == at || digits < kRank.size()) return std::nullopt;
  const size_t begin = digits - kRank.size();
  if (text.substr(begin, kRank.size()) != kRank) return std::nullopt;
  if (begin > 0 && absl::ascii_isalnum(static_cast<unsigned char>(text[begin - 1]))) {
    return std::nullopt;
  }
  size_t i = digits;
  return ReadNumber(text, &i);
}

// PEERS, looked for from the end of `rest` (WORK before it is free text). Returns false when
// `rest` has none.
bool ParsePeers(absl::string_view rest, std::optional<std::vector<int>>* peers) {
  const size_t waits = rest.rfind(kWaitsOn);
  const size_t cannot = rest.rfind(kCannotTell);
  if (cannot != absl::string_view::npos && (waits == absl::string_view::npos || cannot > waits)) {
    *peers = std::nullopt;
    return true;
  }
  if (waits == absl::string_view::npos) return false;
  absl::string_view list = rest.substr(waits + kWaitsOn.size());
  const bool several = absl::ConsumePrefix(&list, "s ");
  if (!several && !absl::ConsumePrefix(&list, " ")) return false;
  std::vector<int> ranks;
  size_t i = 0;
  while (true) {
    std::optional<int> r = ReadNumber(list, &i);
    if (!r) return false;
    ranks.push_back(*r);
    if (!several || !absl::StartsWith(list.substr(i), ", ")) break;
    i += 2;
  }
  *peers = std::move(ranks);
  return true;
}

std::optional<int> ParseExitCode(absl::string_view rest) {
  absl::string_view tail = absl::StripTrailingAsciiWhitespace(rest);
  const size_t at = tail.rfind(kAbort);
  if (at == absl::string_view::npos) return std::nullopt;
  size_t i = at + kAbort.size();
  std::optional<int> code = ReadNumber(tail, &i);
  if (!code || tail.substr(i) != ")") return std::nullopt;
  return code;
}

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

}  // namespace

std::optional<NoProgressReport> ParseNoProgressReport(absl::string_view text) {
  for (size_t at = text.find(kMarker); at != absl::string_view::npos;
       at = text.find(kMarker, at + 1)) {
    std::optional<int> rank = RankBefore(text, at);
    if (!rank) continue;
    const absl::string_view rest = text.substr(at + kMarker.size());
    const size_t end = rest.find_first_of(" :");
    NoProgressReport report;
    report.rank = *rank;
    if (end == absl::string_view::npos ||
        !absl::ParseDuration(rest.substr(0, end), &report.bound) ||
        !ParsePeers(rest, &report.peers)) {
      continue;
    }
    report.exit_code = ParseExitCode(rest);
    return report;
  }
  return std::nullopt;
}

LostRanks JudgeNoProgress(const std::vector<NoProgressReport>& reports) {
  LostRanks lost;
  std::set<int> reporters, waited_on;
  for (const NoProgressReport& r : reports) {
    reporters.insert(r.rank);
    if (r.peers) {
      waited_on.insert(r.peers->begin(), r.peers->end());
    } else {
      lost.some_peers_unknown = true;
    }
    if (!lost.exit_code) lost.exit_code = r.exit_code;
  }
  if (!reports.empty()) lost.bound = reports.front().bound;
  lost.reporters.assign(reporters.begin(), reporters.end());
  std::set_difference(waited_on.begin(), waited_on.end(), reporters.begin(), reporters.end(),
                      std::back_inserter(lost.suspects));
  return lost;
}

std::string DescribeLostRanks(const LostRanks& lost,
                              const std::optional<std::vector<std::string>>& host_of_rank) {
  const std::string saw = absl::StrCat(RankList(lost.reporters), " saw no progress for ",
                                       absl::FormatDuration(lost.bound));
  const std::string variable = absl::StrCat(" (", kNoProgressTimeoutVar, ")");
  if (lost.suspects.empty()) {
    if (lost.some_peers_unknown) {
      return absl::StrCat(saw, " and could not tell which ranks ",
                          lost.reporters.size() == 1 ? "it" : "they", " waited on", variable);
    }
    return absl::StrCat(saw, variable,
                        "; every rank waited on reported too: none is presumed lost (all may be "
                        "stuck, or only slow)");
  }
  std::vector<std::string> named;
  for (size_t i = 0; i < std::min(lost.suspects.size(), kMaxNamedSuspects); ++i) {
    const int r = lost.suspects[i];
    const bool known = host_of_rank && r >= 0 && static_cast<size_t>(r) < host_of_rank->size();
    named.push_back(
        absl::StrCat("rank ", r, known ? absl::StrCat(" on ", (*host_of_rank)[r]) : ""));
  }
  std::string suspects;
  if (lost.suspects.size() > kMaxNamedSuspects) {
    suspects = absl::StrCat(absl::StrJoin(named, ", "), " or ",
                            lost.suspects.size() - kMaxNamedSuspects, " more ranks");
  } else if (named.size() > 1) {
    const std::string last = named.back();
    named.pop_back();
    suspects = absl::StrCat(absl::StrJoin(named, ", "), " or ", last);
  } else {
    suspects = named.front();
  }
  return absl::StrCat(suspects, " presumed lost: ", saw, " waiting on ",
                      lost.suspects.size() == 1 ? "it" : "them", variable);
}

}  // namespace chorus::launcher
