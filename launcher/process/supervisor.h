// File: launcher/process/supervisor.h
//
// Supervisor starts and stops the processes of an MPI-less job (workers, the discovery script,
// ssh checks) one by one. A process's end is only reported: the job engine
// (launcher/engine/job_engine.h) decides what follows.
//
// - Each worker runs in a process group of its own, so that Stop() reaches the worker and
//   whatever it started, and a terminal's Ctrl-C reaches the workers only through chorusrun.
//   When a worker has ended, what is left of its process group is killed (SIGKILL) before the
//   worker is reaped, so no background child of a worker outlives it.
// - A worker's death is learnt from SIGCHLD through the self-pipe (SignalPipe), which
//   also delivers SIGINT, SIGTERM and SIGUSR2 to Poll(); nothing polls on a timer. While a nested
//   WorkerGroup runs (a discovery script), SIGCHLD goes to that group's pipe; the next Poll()
//   reaps every ended worker anyway (waitid(WNOHANG) on each of them).
// - Output: each worker's stdout and stderr are read by Poll() and handed to the OutputSink
//   given at Start(), under the index given there.
//
// SIGINT, SIGTERM, SIGUSR2, SIGCHLD and SIGPIPE (ignored) are the Supervisor's from Create() until
// it is destroyed; the previous handlers are then restored.
//
// Thread-safety: thread-compatible; every call on the thread that created it. Other threads of
// the process (gRPC's) may run.
#ifndef CHORUS_LAUNCHER_PROCESS_SUPERVISOR_H_
#define CHORUS_LAUNCHER_PROCESS_SUPERVISOR_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "launcher/process/spawn.h"
#include "launcher/process/worker_output.h"

namespace chorus::launcher {

class Supervisor {
 public:
  struct Options {
    absl::Duration grace = absl::Seconds(3);  // Stop(): the signal -> SIGKILL
  };

  struct Exit {
    int id = 0;
    WorkerExit exit;
    std::optional<int> stop_signal;  // the signal Stop() sent it before it ended, if any
  };

  struct Events {
    std::vector<Exit> exits;   // workers reaped, in the order seen
    std::vector<int> signals;  // SIGINT/SIGTERM that reached chorusrun, in order
    // SIGUSR2 that reached chorusrun: a request for the workers' flight recorder dumps (Note
    // [Flight dump on demand] in runtime/flight/flight_recorder.h), not a stop.
    int dump_requests = 0;
    // Workers that ended and whose output has been read to the end (after their exit), so
    // their ids are forgotten.
    std::vector<int> finished;
    bool empty() const {
      return exits.empty() && signals.empty() && dump_requests == 0 && finished.empty();
    }
  };

  // Installs the signal handlers. Internal when the self-pipe cannot be created.
  static absl::StatusOr<std::unique_ptr<Supervisor>> Create(Options options);
  // SIGKILL to every worker still running (and its process group), reaps them; restores the
  // signal handlers.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts one worker; returns its id (never reused). Its output goes to `sink` (borrowed; must
  // outlive the worker's output, i.e. until output_open() is false for it) as `sink_index`.
  // Internal on a pipe or fork failure (nothing left running).
  absl::StatusOr<int> Start(const WorkerSpec& spec, OutputSink* sink, int sink_index);

  // From now on worker `id`'s output goes to `sink` as `sink_index` (an elastic survivor takes its
  // new rank's label): its open streams are closed on the old sink first (which emits a partial
  // last line there). No-op for an unknown id.
  void Redirect(int id, OutputSink* sink, int sink_index);

  // Sends `sig` to worker `id`'s process group and closes its stdin; SIGKILL follows after the
  // grace period unless it has ended. A second Stop() sends SIGKILL at once. No-op for a worker
  // already reaped.
  void Stop(int id, int sig);
  // Sends `sig` to worker `id`'s process only (not its group), as a request, not a stop. No-op
  // for a worker already reaped.
  void Signal(int id, int sig);

  // Waits until something happens (a worker ended, its output was read to the end, a signal
  // arrived) or `until` passes, reading
  // output meanwhile and enforcing the grace periods; with `return_when_idle`, also returns as
  // soon as no worker is left (none running, no output open). Output alone does not end the
  // wait. Returns what happened (possibly nothing).
  Events Poll(absl::Time until, bool return_when_idle = false);

  // Workers started and not yet reaped.
  int running() const;
  bool is_running(int id) const;
  // Some worker's output pipe is still open.
  bool output_open() const;

 private:
  struct Worker {
    pid_t pid = -1;
    bool running = false;
    int fds[2] = {-1, -1};  // stdout, stderr
    int stdin_fd = -1;
    OutputSink* sink = nullptr;
    int sink_index = 0;
    std::optional<int> stop_signal;
    std::optional<absl::Time> kill_at;
  };

  explicit Supervisor(Options options);
  void Reap(Events* events);
  void ReadReady(int id, int stream);
  void CloseOutput(Worker& w, int stream);
  void Forget(Events* events);  // drops workers that are reaped and whose output is closed

  Options options_;
  SignalPipe signals_;
  int dev_null_ = -1;
  int next_id_ = 0;
  std::map<int, Worker> workers_;
};

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_PROCESS_SUPERVISOR_H_
