// File: launcher/mpi/no_progress_report.h
//
// The runtime's no-progress report as chorusrun reads it in MPI mode, and which ranks the
// reports of a job imply were lost. Pure functions.
//
// Note [The no-progress report contract]
// When a rank's MPI calls have not completed for CHORUS_NO_PROGRESS_TIMEOUT_SECONDS, the runtime
// prints one line on the rank's stderr and calls MPI_Abort (runtime/progress/progress_watchdog.h,
// DescribeNoProgress; runtime/mpi/mpi_controller.cc, AbortJob). chorusrun does not link the
// runtime: the line's text is the interface, and this is its shape (after the log prefix,
// "[chorus 1/0 ERROR mpi_controller.cc:106] " today, which chorusrun does not read):
//
//   rank R: no progress for D[ (+A allowed for ...)]: CALL has not completed, running WORK;
//       PEERS. A peer that stopped answering ... (0 disables this check). (MPI_Abort, exit code C)
//
//   R      the reporting rank (its rank in the communicator chorus runs on: MPI_COMM_WORLD
//          unless the application gave chorus another one)
//   D      the bound, as absl::FormatDuration writes it ("5s", "1m30s", "500ms")
//   WORK   free text naming the ops and tensors: it may hold anything, which is why PEERS is
//          looked for from the end of the line
//   PEERS  "it waits on rank P", "it waits on ranks P, Q, ... (the transport ...)", or "it
//          cannot tell which ranks it waits on"
//   C      the process's exit status (75, EX_TEMPFAIL); only under MPI, which aborts the job
//
// One line, written with one write(): mpirun's tagged records put it back together
// (launcher/mpi/mpirun_output.h). Changing this shape means changing ParseNoProgressReport (and
// test/launcher/no_progress_report_test.cc, which holds a copy of a real report) with it.
//
// Which ranks are presumed lost: a rank that reported was alive (it was waiting); a rank some
// report waited on that never reported is a suspect. A stuck rank may be ended by the job's
// abort before its own report (the ranks' deadlines differ by up to a tenth of the bound, and
// the first MPI_Abort makes mpirun kill every rank it can reach), so the suspects can include
// ranks that were alive: the line then names them all.
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_MPI_NO_PROGRESS_REPORT_H_
#define CHORUS_LAUNCHER_MPI_NO_PROGRESS_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace chorus::launcher {

// The variable that sets the bound (runtime/config.h), for messages.
inline constexpr char kNoProgressTimeoutVar[] = "CHORUS_NO_PROGRESS_TIMEOUT_SECONDS";

struct NoProgressReport {
  int rank = 0;
  absl::Duration bound;
  std::optional<std::vector<int>> peers;  // nullopt: the rank could not tell
  std::optional<int> exit_code;           // "(MPI_Abort, exit code C)"

  friend bool operator==(const NoProgressReport&, const NoProgressReport&) = default;
};

// The report in `text` (a rank's line, without mpirun's tag), or nullopt when `text` is not
// one (Note [The no-progress report contract]).
std::optional<NoProgressReport> ParseNoProgressReport(absl::string_view text);

// What a job's reports say together.
struct LostRanks {
  std::vector<int> reporters;  // ranks that reported, ascending
  std::vector<int> suspects;   // ranks waited on that did not report, ascending
  bool some_peers_unknown = false;
  absl::Duration bound;          // the first report's
  std::optional<int> exit_code;  // the first report's that has one
};

// REQUIRES: !reports.empty().
LostRanks JudgeNoProgress(const std::vector<NoProgressReport>& reports);

// The cause for chorusrun's last line, e.g. "rank 2 on n3 presumed lost: ranks 0, 1 saw no
// progress for 5s waiting on it (CHORUS_NO_PROGRESS_TIMEOUT_SECONDS)". `host_of_rank`: where
// each rank runs (index: rank), or nullopt when chorusrun cannot tell (ranks are then named
// without hosts). At most 8 suspects are named, then how many more.
std::string DescribeLostRanks(const LostRanks& lost,
                              const std::optional<std::vector<std::string>>& host_of_rank);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_MPI_NO_PROGRESS_REPORT_H_
