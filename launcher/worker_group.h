// File: launcher/worker_group.h
//
// WorkerGroup starts processes (chorusrun --gloo's workers, or its ssh host checks), supervises
// them, and guarantees that none is left running when it returns: Start() starts all of them or
// leaves none running; Wait() returns once every worker has ended, and kills anything they left
// in their process group. Output goes to the OutputSink. The first worker to fail, a SIGINT or
// SIGTERM to chorusrun (forwarded; a second one sends SIGKILL) or the deadline stops the group:
// SIGTERM, stdin closed, SIGKILL after options.grace. Local workers get SIGKILL if chorusrun
// itself dies. The mechanics (process group and its keeper, pipes, signals): docs/launcher.md.
// SIGINT, SIGTERM, SIGCHLD and SIGPIPE (ignored) are chorusrun's from Start() until Wait()
// returns, then restored. At most one WorkerGroup may be started at a time per process.
//
// Thread-safety: thread-compatible; Start() and Wait() run on the same thread. Other threads of
// the process (gRPC's) may run: the child side of fork() only makes async-signal-safe calls.
#ifndef CHORUS_LAUNCHER_WORKER_GROUP_H_
#define CHORUS_LAUNCHER_WORKER_GROUP_H_

#include <poll.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "launcher/mpirun_command.h"
#include "launcher/spawn.h"
#include "launcher/worker_output.h"

namespace chorus::launcher {

inline constexpr absl::Duration kDrainAfterExit = absl::Milliseconds(500);

struct GroupResult {
  std::vector<WorkerExit> exits;  // by worker index
  // The first worker seen failing while the group was still running normally: the cause. Ends
  // that follow a stop are consequences and do not count.
  std::optional<int> first_failure;
  std::optional<int> stop_signal;  // SIGINT or SIGTERM chorusrun received and forwarded
  bool timed_out = false;          // options.deadline passed with workers running
};

struct WorkerGroupOptions {
  absl::Duration grace = absl::Seconds(3);  // SIGTERM -> SIGKILL
  std::optional<absl::Time> deadline;       // stop the group then
};

class WorkerGroup {
 public:
  // `sink` is borrowed and must outlive the group.
  WorkerGroup(WorkerGroupOptions options, OutputSink* sink);
  // Kills (SIGKILL) and reaps whatever is still running; restores the signal handlers.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Starts every worker. On failure (pipe, fork) the ones already started are killed and
  // reaped, and Internal is returned. A program that cannot be executed is not a Start()
  // failure: that worker prints "chorusrun: error: cannot run ..." on its stderr and exits 127.
  // REQUIRES: called once, with at least one worker.
  absl::Status Start(const std::vector<WorkerSpec>& workers);

  // Blocks until every worker has ended (see above). REQUIRES: Start() succeeded.
  GroupResult Wait();

 private:
  struct Worker {
    pid_t pid = -1;
    int fds[2] = {-1, -1};  // stdout, stderr (read ends)
    int stdin_fd = -1;      // write end, or -1
    bool running = false;
  };

  absl::Status StartOne(int index, const WorkerSpec& spec, int dev_null);
  void Reap(GroupResult* result);
  void ReadReady(const std::vector<struct pollfd>& polled, const std::vector<int>& owners,
                 bool* any_data);
  void CloseOutput(int index, int stream);
  void HandleSignals(GroupResult* result);
  void BeginStop(int sig);
  void KillAll();
  void KillKeeper();
  void CloseStdins();
  int RunningCount() const;

  WorkerGroupOptions options_;
  OutputSink* sink_;
  std::vector<Worker> workers_;
  pid_t keeper_ = -1;  // leader of the workers' process group; -1 once gone
  bool stopping_ = false;
  std::optional<absl::Time> kill_at_;
  SignalPipe signals_;  // SIGINT, SIGTERM, SIGCHLD (SIGPIPE ignored) from Start() to Wait()
};

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_WORKER_GROUP_H_
