#include "runtime/loop/cycle_policy.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace chorus::runtime {

StallPolicy StallPolicyFor(const Config& config) {
  StallPolicy policy;
  policy.enabled = !config.stall_check_disabled;
  const bool shutdown = config.stall_shutdown_time > absl::ZeroDuration();
  absl::Duration limit = config.stall_warning_time;
  if (shutdown) limit = std::min(limit, config.stall_shutdown_time);
  policy.cache_wait_limit = limit / 2;
  policy.check_every = std::min(absl::Seconds(1), config.stall_warning_time / 4);
  if (shutdown) policy.check_every = std::min(policy.check_every, config.stall_shutdown_time / 4);
  policy.shutdown_rounds = shutdown;
  return policy;
}

std::string DescribeStall(const StallReport& report, const Config& config) {
  std::string line = absl::StrCat(
      "stalled ", OpTypeName(report.type), " of tensor '", report.name, "' (process set ",
      report.process_set_id, "): waited ",
      absl::FormatDuration(absl::Trunc(report.waited, absl::Milliseconds(100))),
      "; submitted by ranks [", absl::StrJoin(report.submitted_ranks, ", "), "], missing ranks [",
      absl::StrJoin(report.missing_ranks, ", "), "]; warning ", report.report_number,
      ", repeated every ", absl::FormatDuration(config.stall_warning_time), " while it waits");
  if (config.stall_shutdown_time > absl::ZeroDuration()) {
    absl::StrAppend(&line, "; it fails on every rank once it has waited ",
                    absl::FormatDuration(config.stall_shutdown_time));
  } else {
    absl::StrAppend(&line,
                    "; if a rank never submits it the job is deadlocked: "
                    "CHORUS_STALL_SHUTDOWN_TIME_SECONDS=N fails stalled ops on every rank "
                    "(and ends the job) after N seconds");
  }
  return line;
}

std::string DescribeShutdown(bool requested_here, const std::vector<int>& ranks,
                             const std::vector<std::string>& host_names,
                             const std::vector<std::string>& causes, absl::string_view suffix) {
  if (requested_here) return absl::StrCat("chorus was shut down", suffix);
  const auto known = [](const std::vector<std::string>& by_rank, int r) {
    return r >= 0 && static_cast<size_t>(r) < by_rank.size() && !by_rank[r].empty();
  };
  const auto rank_on_host = [&](std::string* out, int r) {
    absl::StrAppend(out, r);
    if (known(host_names, r)) absl::StrAppend(out, " on ", host_names[r]);
    if (known(causes, r)) absl::StrAppend(out, " (", causes[r], ")");
  };
  const std::string who = ranks.empty() ? "another rank"
                                        : absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ",
                                                       absl::StrJoin(ranks, ", ", rank_on_host));
  return absl::StrCat("chorus was shut down by ", who, suffix,
                      " (a rank whose process ends, by an exception or an exit, shuts chorus "
                      "down on every rank; chorusrun's last line names the rank that failed "
                      "first)");
}

std::string ShutdownPart(bool requested, absl::string_view cause) {
  if (!requested) return "-";
  std::string part = absl::StrCat("+", cause.substr(0, kMaxShutdownCause));
  std::replace(part.begin(), part.end(), '\0', ' ');
  return part;
}

std::string JoinShutdownParts(const std::vector<std::string>& parts) {
  return absl::StrJoin(parts, absl::string_view("\0", 1));
}

bool ParseShutdownParts(absl::string_view joined, int size, std::vector<int>* ranks,
                        std::vector<std::string>* causes) {
  const std::vector<absl::string_view> parts = absl::StrSplit(joined, absl::ByChar('\0'));
  if (size <= 0 || parts.size() != static_cast<size_t>(size)) return false;
  std::vector<int> asked;
  std::vector<std::string> why(parts.size());
  for (size_t r = 0; r < parts.size(); ++r) {
    if (parts[r] == "-") continue;
    if (parts[r].empty() || parts[r][0] != '+') return false;
    asked.push_back(static_cast<int>(r));
    why[r] = std::string(parts[r].substr(1));
  }
  *ranks = std::move(asked);
  *causes = std::move(why);
  return true;
}

void WaitForNextCycle(const Config& config, absl::Time cycle_start, bool pending_here,
                      bool pending_after, SubmissionQueue* queue) {
  const absl::Duration left = cycle_start + config.cycle_time - absl::Now();
  if (pending_here) {
    if (left > absl::ZeroDuration()) queue->WaitForQuiet(kBurstQuiet, left);
    return;
  }
  const bool woke = queue->WaitForWork(pending_after ? std::max(left, absl::ZeroDuration())
                                                     : config.idle_cycle_time);
  if (woke) queue->WaitForQuiet(kBurstQuiet, std::max(config.cycle_time, kBurstMaxWait));
}

}  // namespace chorus::runtime
