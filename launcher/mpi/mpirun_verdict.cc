#include "launcher/mpi/mpirun_verdict.h"

#include "absl/strings/str_cat.h"

#include "elastic/worker_exit.h"

namespace chorus::launcher {

MpirunVerdict JudgeMpirunJob(const MpirunJobEnd& end) {
  const ChildEnd& child = end.child;
  MpirunVerdict verdict;
  if (child.signal && child.killed) {
    verdict.status = 128 + *child.signal;
    verdict.line = absl::StrCat("chorusrun: job stopped: chorusrun received signal ",
                                elastic::SignalName(*child.signal), "; mpirun had not ended ",
                                absl::FormatDuration(end.grace), " later and was killed");
    return verdict;
  }
  if (child.signal && child.status != 0) {
    // mpirun obeyed the signal chorusrun passed on: stopped as in --gloo mode (130 for Ctrl-C),
    // not a failure whose cause mpirun never reports.
    verdict.status = 128 + *child.signal;
    verdict.line = absl::StrCat("chorusrun: job stopped: chorusrun received signal ",
                                elastic::SignalName(*child.signal));
    return verdict;
  }
  const bool stopped = child.stopped || child.killed;
  std::optional<std::string> cause = end.mpirun_cause;
  if (!end.reports.empty()) {
    const LostRanks lost = JudgeNoProgress(end.reports);
    cause = DescribeLostRanks(lost, end.host_of_rank);
    if (stopped) {
      verdict.status = lost.exit_code.value_or(1);
      verdict.line = absl::StrCat("chorusrun: job failed (exit status ", verdict.status,
                                  ", mpirun stopped): ", *cause);
      return verdict;
    }
  }
  if (!stopped && end.reports.empty() && !end.failure_reports.empty()) {
    // A rank that died of an exception (or that the others name as having shut chorus down):
    // the cause, whichever rank mpirun saw exit first.
    std::optional<FailureReport> chosen;
    for (const FailureReport& report : end.failure_reports) ChooseFailureReport(&chosen, report);
    const bool placed =
        end.host_of_rank && chosen->rank < static_cast<int>(end.host_of_rank->size());
    cause = DescribeFailureReport(*chosen, placed ? (*end.host_of_rank)[chosen->rank] : "");
  }
  verdict.status = child.status;
  if (child.status != 0) {
    verdict.line = absl::StrCat("chorusrun: job failed (mpirun exit status ", child.status,
                                "): ", cause.value_or("mpirun reported no cause"));
  }
  return verdict;
}

}  // namespace chorus::launcher
