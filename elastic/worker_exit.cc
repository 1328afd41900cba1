#include "elastic/worker_exit.h"

#include <signal.h>
#include <string.h>

#include "absl/strings/str_cat.h"

namespace chorus::elastic {
namespace {

// The highest signal number a shell's 128 + N status can carry.
constexpr int kMaxSignal = 64;

}  // namespace

std::string DescribeFailureReport(const FailureReport& report, const std::string& host) {
  const std::string who =
      absl::StrCat("rank ", report.rank, host.empty() ? "" : absl::StrCat(" on ", host));
  if (report.in_init) {
    return absl::StrCat(who,
                        " failed chorus init (the other ranks' init failed because of it; its "
                        "error says why)");
  }
  if (report.named_by_other) {
    return absl::StrCat(who,
                        " ended while the other ranks ran ops (their ops failed: chorus was shut "
                        "down by it)");
  }
  return absl::StrCat(who, " raised ", report.exception);
}

void ChooseFailureReport(std::optional<FailureReport>* chosen, const FailureReport& next) {
  if (!chosen->has_value() || ((*chosen)->named_by_other && !next.named_by_other)) *chosen = next;
}

std::string SignalName(int sig) {
  const char* name = ::sigdescr_np(sig);
  return absl::StrCat(sig, " (", name != nullptr ? name : "unknown signal", ")");
}

std::string SignalAbbrev(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
}

std::string DescribeExit(const WorkerExit& exit) {
  if (!exit.signaled) return absl::StrCat("exited with code ", exit.code);
  return absl::StrCat("killed by ", SignalAbbrev(exit.code));
}

ExitVerdict ClassifyExit(const WorkerExit& exit, bool remote) {
  if (exit.ok()) return {ExitKind::kSucceeded, "exited with code 0"};
  const bool sigterm = exit.signaled ? exit.code == SIGTERM : remote && exit.code == 128 + SIGTERM;
  if (sigterm) return {ExitKind::kLeft, "left after SIGTERM"};
  std::string description = DescribeExit(exit);
  if (remote && !exit.signaled && exit.code == 255) {
    absl::StrAppend(&description, " (ssh's own failure: host unreachable or connection lost)");
  } else if (remote && !exit.signaled && exit.code > 128 && exit.code <= 128 + kMaxSignal) {
    absl::StrAppend(&description, " (the remote shell's code for ", SignalAbbrev(exit.code - 128),
                    ")");
  }
  return {ExitKind::kFailed, std::move(description)};
}

}  // namespace chorus::elastic
