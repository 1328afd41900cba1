// File: launcher/mpi/mpirun_verdict.h
//
// How an MPI-mode job ended, as chorusrun reports it: its exit status and its last stderr line.
// Pure functions.
//
//   mpirun ended by itself       mpirun's status; "chorusrun: job failed (mpirun exit status
//                                S): CAUSE" when it is not 0, CAUSE being what the ranks'
//                                no-progress reports imply (launcher/mpi/no_progress_report.h)
//                                when some rank reported, else what mpirun said
//                                (FailureScanner, launcher/mpi/mpirun_output.h)
//   chorusrun stopped mpirun     the reports' exit code (75, EX_TEMPFAIL, what the ranks'
//   after no-progress reports    MPI_Abort asked for and mpirun would have returned), 1 if they
//                                name none; "chorusrun: job failed (exit status 75, mpirun
//                                stopped): CAUSE"
//   chorusrun received a signal  128 + the signal; "chorusrun: job stopped: chorusrun received
//   and had to kill mpirun       signal 15 (Terminated); mpirun had not ended 3s later and was
//                                killed"
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_MPI_MPIRUN_VERDICT_H_
#define CHORUS_LAUNCHER_MPI_MPIRUN_VERDICT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "launcher/mpi/no_progress_report.h"
#include "launcher/process/child_process.h"
#include "launcher/process/failure_report.h"

namespace chorus::launcher {

// What chorusrun knows when mpirun has ended.
struct MpirunJobEnd {
  ChildEnd child;                              // mpirun's end (launcher/process/child_process.h)
  std::optional<std::string> mpirun_cause;     // FailureScanner::Cause()
  std::vector<NoProgressReport> reports;       // in the order they arrived
  std::vector<FailureReport> failure_reports;  // by MPI_COMM_WORLD rank, in order
  std::optional<std::vector<std::string>> host_of_rank;  // MpirunRankHosts
  absl::Duration grace;                                  // ChildOptions::grace
};

struct MpirunVerdict {
  int status = 0;
  std::optional<std::string> line;  // chorusrun's last stderr line; nullopt: none (success)
};

MpirunVerdict JudgeMpirunJob(const MpirunJobEnd& end);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_MPI_MPIRUN_VERDICT_H_
