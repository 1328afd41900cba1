// File: launcher/process/spawn.h
//
// The child-process pieces that chorusrun's supervisors share (launcher::WorkerGroup, which
// stops a whole group on the first failure, and elastic::Supervisor, which starts and stops
// workers one by one):
//
// - SignalPipe: while installed, SIGINT, SIGTERM, SIGUSR2 and SIGCHLD are written as one byte
//   each to a non-blocking self-pipe that the owner polls, and SIGPIPE is ignored. Installations
//   nest: an inner one (a WorkerGroup running a discovery script inside the elastic driver) saves
//   the outer one's handlers and self-pipe and gives them back when restored; a signal that
//   arrives meanwhile goes to the inner owner only.
// - SpawnProcess: fork and exec one worker with its stdout and stderr on pipes, its stdin on
//   /dev/null or on a pipe that receives WorkerSpec::stdin_text, in a given process group, with
//   SIGKILL on chorusrun's death (PR_SET_PDEATHSIG).
//
// Thread-safety: call from one thread (the one that polls the pipe). Other threads of the
// process (gRPC's) may run: the child side of fork() only makes async-signal-safe calls.
#ifndef CHORUS_LAUNCHER_PROCESS_SPAWN_H_
#define CHORUS_LAUNCHER_PROCESS_SPAWN_H_

#include <signal.h>
#include <sys/types.h>

#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "elastic/worker_exit.h"
#include "launcher/process/environment.h"

namespace chorus::launcher {

struct WorkerSpec {
  std::string program;                    // what execve runs: a path (no PATH search)
  std::vector<std::string> argv;          // argv[0] included
  Environment environment;                // the whole environment
  std::optional<std::string> stdin_text;  // nullopt: stdin is /dev/null
};

using elastic::SignalName;
using elastic::WorkerExit;

// A waitpid() status as a WorkerExit.
WorkerExit FromWaitStatus(int status);

// Opens /dev/null on fds 0-2 where they are closed, so that pipes never take those numbers.
void EnsureStandardFds();

class SignalPipe {
 public:
  SignalPipe() = default;
  // Restores the previous handlers if still installed.
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // Creates the pipe and installs the handlers. Internal when the pipe cannot be created.
  // REQUIRES: not installed.
  absl::Status Install();
  // Puts back the handlers and the self-pipe that were in place before Install(); closes the
  // pipe. No-op when not installed.
  void Restore();

  // The read end to poll; -1 when not installed.
  int read_fd() const { return fds_[0]; }
  // Reads every pending byte: the signals received since the last call, in order.
  std::vector<int> Drain();
  // The actions chorusrun had before the outermost installed SignalPipe, indexed like kSignals:
  // what a child inherits (SpawnProcess). REQUIRES: installed.
  const struct sigaction* inherited_actions() const;

  static constexpr int kSignals[5] = {SIGINT, SIGTERM, SIGCHLD, SIGPIPE, SIGUSR2};

 private:
  bool installed_ = false;
  int fds_[2] = {-1, -1};
  int previous_fd_ = -1;
  const SignalPipe* outer_ = nullptr;  // the SignalPipe installed before this one, if any
  struct sigaction old_actions_[std::size(kSignals)] = {};
};

struct SpawnedProcess {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends, non-blocking, close-on-exec
  int stderr_fd = -1;
  int stdin_fd = -1;  // write end after stdin_text was written, or -1
};

// Starts `spec`. `group`: the process group to join, 0 for a new group led by the child.
// `inherited`: the handlers chorusrun had before it installed its own (SignalPipe), indexed
// like SignalPipe::kSignals: a signal ignored there stays ignored in the child (nohup), any
// other is reset to the default. `dev_null`: an open /dev/null. A program that cannot be
// executed is not an error here: the child prints "chorusrun: error: cannot run ..." on its
// stderr and exits 127. Internal for a pipe or fork failure (nothing left open or running).
absl::StatusOr<SpawnedProcess> SpawnProcess(const WorkerSpec& spec, pid_t group, int dev_null,
                                            const struct sigaction* inherited);

// chorusrun's working directory, the one its workers start in (remote ones cd to it).
// Internal with getcwd's error.
absl::StatusOr<std::string> CurrentDirectory();

// poll(2)'s timeout in milliseconds for a wait of `left`: rounded up, never negative, at most
// one hour (an infinite `left` included: the caller's loop polls again after it).
int PollTimeoutMs(absl::Duration left);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_PROCESS_SPAWN_H_
