// File: launcher/process/child_process.h
//
// Runs mpirun as a child of chorusrun: its stdout and stderr come back through one pipe (see
// launcher/mpi/mpirun_output.h for why one), as read, to `on_output`. Blocks until the child exits,
// sleeping in poll() on that pipe and a self-pipe of signals (SIGCHLD, SIGINT, SIGTERM, SIGUSR2)
// with the next deadline of the StopSchedule as its timeout: no periodic wake-ups.
//
// SIGUSR2 sent to chorusrun is passed on to the child as it is, not as a stop (mpirun passes it
// to every rank: a request for the flight recorder dumps, Note [Flight dump on demand] in
// runtime/flight/flight_recorder.h).
//
// Stopping it:
// - SIGINT or SIGTERM sent to chorusrun is passed on to the child (not a terminal's Ctrl-C,
//   which reached mpirun already: it shares chorusrun's process group, and a second SIGINT makes
//   mpirun force-kill instead of shutting the job down), which then has ChildOptions::grace to
//   end before chorusrun sends it SIGKILL; a second signal sends SIGKILL at once. mpirun that
//   cannot reach a host's daemon (its host lost, its link cut) never ends by itself: its
//   shutdown waits on that daemon.
// - `stop_at`: the caller may ask for the child to be stopped at a time of its choosing
//   (SIGTERM then, SIGKILL `grace` later).
//
// Leftovers: chorusrun is the child subreaper (PR_SET_CHILD_SUBREAPER) while the child runs, so
// whatever the child leaves behind when it ends (its ssh clients after a SIGKILL, a rank's
// background process) becomes chorusrun's, and is killed (SIGKILL) and reaped before RunChild
// returns, as --gloo leaves nothing running either.
//
// One child at a time per process (the signal handlers are process-wide).
//
// Thread-safety: call from the main thread only; nothing else in the process may wait for
// children meanwhile (RunChild reaps every child of the process).
#ifndef CHORUS_LAUNCHER_PROCESS_CHILD_PROCESS_H_
#define CHORUS_LAUNCHER_PROCESS_CHILD_PROCESS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "launcher/process/environment.h"

namespace chorus::launcher {

// Called with the child's output in the order read, in chunks of any size (lines may be split
// anywhere).
using ByteSink = std::function<void(absl::string_view)>;

// When chorusrun signals its child (pure; RunChild's loop feeds it and sends what is due).
class StopSchedule {
 public:
  explicit StopSchedule(absl::Duration grace) : grace_(grace) {}

  // chorusrun received SIGINT/SIGTERM at `now` (passed on to the child already): the child has
  // until now + grace to end; a second one means SIGKILL at once.
  void OnSignal(absl::Time now);
  // The child is to be stopped at `when`: SIGTERM then, SIGKILL grace later. An earlier stop
  // already scheduled stays.
  void StopAt(absl::Time when);
  // The signals due at `now`, in the order to send them; each is returned once.
  std::vector<int> Due(absl::Time now);
  // When Due() has something next; InfiniteFuture when nothing is scheduled.
  absl::Time Next() const;

  bool signalled() const { return signals_ > 0; }
  bool term_sent() const { return term_sent_; }
  bool kill_sent() const { return kill_sent_; }

 private:
  absl::Duration grace_;
  int signals_ = 0;
  absl::Time term_at_ = absl::InfiniteFuture();
  absl::Time kill_at_ = absl::InfiniteFuture();
  bool term_sent_ = false;
  bool kill_sent_ = false;
};

struct ChildOptions {
  // How long the child may take to end after a stop signal (SIGINT/SIGTERM passed on, or the
  // SIGTERM `stop_at` asks for) before it gets SIGKILL.
  absl::Duration grace = absl::Seconds(3);
  // Asked after each chunk of output: when to stop the child; nullopt: not (yet).
  std::function<std::optional<absl::Time>()> stop_at;
  // Told of each signal chorusrun sends the child on its own (not a passed-on one), just before.
  std::function<void(int sig)> on_stop;
  // Told of each SIGUSR2 passed on to the child, just after.
  std::function<void()> on_dump_request;
};

struct ChildEnd {
  // The exit status as a shell reports it: the exit code, or 128 + signal number when the child
  // was killed by a signal.
  int status = 0;
  std::optional<int> signal;  // the first SIGINT/SIGTERM chorusrun received, if any
  bool stopped = false;       // chorusrun sent SIGTERM because `stop_at` asked
  bool killed = false;        // chorusrun sent SIGKILL (after the grace, or a second signal)
};

// Runs `program` with `argv` (argv[0] included) in `env`. Internal is returned when the child
// cannot be started.
absl::StatusOr<ChildEnd> RunChild(const std::string& program, const std::vector<std::string>& argv,
                                  const Environment& env, const ByteSink& on_output,
                                  const ChildOptions& options = {});

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_PROCESS_CHILD_PROCESS_H_
