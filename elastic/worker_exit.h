// File: elastic/worker_exit.h
//
// How a worker's process ended, and what that end means for the job: one rule for every kind of
// MPI-less job (fixed-size or elastic).
//
//   exit 0                               succeeded
//   SIGTERM (remote: ssh's status 143)   left: a spot-instance notice, not the host's fault
//   anything else                        failed: its host is to blame (blacklisted when elastic)
//
// A worker started over ssh reaches chorusrun as ssh's exit status: the remote shell reports a
// signal N as 128 + N, and ssh uses 255 for its own failures (host unreachable, connection lost).
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_ELASTIC_WORKER_EXIT_H_
#define CHORUS_ELASTIC_WORKER_EXIT_H_

#include <optional>
#include <string>

namespace chorus::elastic {

// How one process ended.
struct WorkerExit {
  bool signaled = false;
  int code = 0;  // the exit code, or the signal number when `signaled`

  bool ok() const { return !signaled && code == 0; }
  // As a shell reports it: the code, or 128 + the signal number.
  int shell_status() const { return signaled ? 128 + code : code; }

  friend bool operator==(const WorkerExit&, const WorkerExit&) = default;
};

enum class ExitKind {
  kSucceeded,
  kLeft,    // SIGTERM from outside chorusrun: leaves gracefully
  kFailed,  // its host is to blame
};

struct ExitVerdict {
  ExitKind kind = ExitKind::kFailed;
  // "exited with code 3", "killed by SIGKILL", "left after SIGTERM", "exited with code 255
  // (ssh's own failure: host unreachable or connection lost)", "exited with code 137 (the
  // remote shell's code for SIGKILL)".
  std::string description;
};

// The verdict on `exit` of a worker started directly (`remote` false) or over ssh.
ExitVerdict ClassifyExit(const WorkerExit& exit, bool remote);

// "exited with code 3", "killed by SIGKILL".
std::string DescribeExit(const WorkerExit& exit);

// The cause of a job's failure, whichever worker exited first (launcher/process/failure_report.h
// reads it from the workers' output): a rank that reported dying of an uncaught exception, or,
// where no rank did, a rank that another rank's failed op named as having shut chorus down (it
// ended by an exit, a signal or a return while the others still ran ops).
struct FailureReport {
  int rank = 0;
  std::string exception;  // "ValueError: bad batch"; empty for a shutdown named by another rank
  // Named by another rank's failed op ("chorus was shut down by rank 2 ..."), not by its own
  // report.
  bool named_by_other = false;
  // Named by another rank's failed init ("chorus init failed on rank 1 ..."): it failed before
  // the runtime started, not while ops ran.
  bool in_init = false;

  friend bool operator==(const FailureReport&, const FailureReport&) = default;
};

// "rank 1 on n2 raised ValueError: bad batch" (without " on ..." when `host` is empty); "rank 2
// on n3 ended while the other ranks ran ops (their ops failed: chorus was shut down by it)" for
// a report named by another rank, "rank 2 on n3 failed chorus init (...)" for one named by their
// failed init.
std::string DescribeFailureReport(const FailureReport& report, const std::string& host);

// Keeps in `*chosen` the report that names the cause best: the first rank's own report, else the
// first one named by another rank. `next` comes after every report offered before.
void ChooseFailureReport(std::optional<FailureReport>* chosen, const FailureReport& next);

// "9 (Killed)": a signal's number and description, for messages.
std::string SignalName(int sig);

// "SIGKILL", or "signal 64" for a number without a name.
std::string SignalAbbrev(int sig);

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_WORKER_EXIT_H_
