// File: runtime/progress/progress_watchdog.h
//
// The no-progress bound of a controller whose transport does not notice a lost peer by itself
// (MPI: Open MPI's TCP transport waits forever for a host that went away without closing its
// connections). When the background loop has waited on its peers for the bound without any of
// its calls completing, a peer is presumed lost and the job is ended with a report saying which
// rank noticed, what it was doing and which ranks it waited on (Note [No-progress bound]).
// CHORUS_NO_PROGRESS_TIMEOUT_SECONDS sets the bound (Config::no_progress_timeout).
//
// Note [No-progress bound]
// Progress is the completion of any transport call the loop waits in: each negotiation
// collective of a cycle, each piece of a pipelined fused batch (Note [Pipelined fusion] in
// docs/fusion.md), each unchunked collective. In a healthy job no such wait lasts long:
//   - every rank's loop runs a cycle, with its negotiation collective, at least once per idle
//     cycle time (20 ms) while it has nothing to do, and once per cycle time while some rank
//     has ops pending, whatever its application does: a rank whose application is busy (slow
//     to submit, computing, loading data, idle for minutes) still completes its peers' waits;
//   - a fused batch, however large, completes a piece (CHORUS_PIPELINE_CHUNK_BYTES, 4 MiB)
//     every few milliseconds, or every second or so on a 100 Mbit/s link;
//   - between calls (sleeping between cycles, packing, scaling) nothing is timed.
// Collectives that are one MPI call each (a broadcast, an allgather, an alltoall, a
// reducescatter: not pipelined) must complete within the bound: at 30 s that is 3.7 GB over a
// 1 Gbit/s link.
// A peer that stopped answering (its host down, a link cut, the process stopped) completes
// nothing, and the wait that needs it times out.
// One legitimate long wait remains: a rank skips the responses of process sets it is not in,
// and its next call waits for their members to run them. Each of their calls may take up to
// the bound, so such a call is allowed the bound times (1 + an upper bound on their calls:
// MaxBlockingCalls in runtime/execute/executor.h); the members bound their own calls meanwhile.
// A rank that was frozen itself (stopped and resumed, its host paused, starved of CPU for
// over a second) does not count that time: its peers' answers may be waiting, and a stopped
// rank resumed only to be killed must not blame the ranks that waited on it.
// Not bounded: init until the loop's handshake is done (ranks may reach init far apart, one
// loading data first) and anything after the loop stopped.
//
// Two ways a wait ends:
//   - a non-blocking wait (the negotiation's MPI calls, ops::WaitPolitely) has a deadline
//     (WaitDeadline) and gives up by itself; its caller then calls GiveUp, which reports and
//     ends the job on the loop thread;
//   - a blocking call (the data plane's MPI collectives, MPI_Comm_split) cannot give up, so
//     the caller brackets it (BlockingCall) and this class's thread ends the job when it is
//     still open at its deadline. (Open MPI's non-blocking collectives would run other
//     algorithms: libnbc reduces an in-place MPI_Iallreduce, and any on fewer than four ranks,
//     up and down a binomial tree, so the whole buffer crosses log2(p) links each way where the
//     blocking MPI_Allreduce's ring moves 2(p-1)/p of it.)
//
// Threading: every method but the constructor and destructor is called by the loop thread
// (the thread that calls the controller); the watchdog's own thread runs from Arm to Disarm and
// only looks at the open call. The loop's `describe_work` runs on either thread: on the
// watchdog's only while a blocking call is open, i.e. while the loop thread is inside it (the
// call's Begin and End synchronise with it through the watchdog's mutex); `while_inside` only on
// the watchdog's, in the same way, while a blocking call or a WaitingCall is open.
#ifndef CHORUS_RUNTIME_PROGRESS_PROGRESS_WATCHDOG_H_
#define CHORUS_RUNTIME_PROGRESS_PROGRESS_WATCHDOG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "base/mutex.h"
#include "runtime/message.h"

namespace chorus::runtime {

// What a rank that gave up says (DescribeNoProgress renders it).
struct NoProgressReport {
  int32_t rank = 0;            // the rank that noticed
  absl::Duration bound;        // CHORUS_NO_PROGRESS_TIMEOUT_SECONDS
  absl::Duration allowance;    // extra time allowed for other sets' work (usually 0)
  std::string call;            // the call that did not complete ("MPI_Allreduce")
  std::string work;            // what the loop was doing (the ops and tensors)
  std::vector<int32_t> peers;  // world ranks the call waited on; empty: unknown
  // What happens next: the watchdog ends the job (MPI_Abort); a transport that gave up by itself
  // (ops/no_progress.h) stops chorus on this rank, whose ops fail.
  bool ends_job = true;
};

// One paragraph: who noticed, what did not complete, which ranks it waited on, what that
// usually means, and which variable to raise if the ranks are only slow. Its shape is read by
// chorusrun, which names the lost ranks and their hosts from it (Note [The no-progress report
// contract] in launcher/mpi/no_progress_report.h; test/launcher/no_progress_contract.cc holds the
// two to one shape): change them together.
std::string DescribeNoProgress(const NoProgressReport& report);

// "allreduce of tensors 'a', 'b' and 3 more (process set 0)": what a response runs, for
// reports (at most `max_names` names).
std::string DescribeResponseWork(const Response& response, size_t max_names = 3);

// The deadline of a call starting at `start` (Note [No-progress bound]): `bound` plus `bound`
// per call of other ranks it may have to wait for.
absl::Time NoProgressDeadline(absl::Time start, absl::Duration bound, int64_t foreign_calls);

class ProgressWatchdog {
 public:
  struct Options {
    absl::Duration bound;  // > 0
    int32_t rank = 0;      // this rank, for the report
    // Prints the report and ends the job; called at most once, on the loop thread (GiveUp) or
    // the watchdog's thread (a blocking call past its deadline). Ends the process in
    // production (MPI_Abort); tests record the report, and it may then return: the watchdog
    // checks nothing more, and GiveUp returns DeadlineExceeded for the loop to fail with.
    std::function<void(const std::string& report)> terminate;
    // How often the watchdog's thread looks at an open blocking call; zero: a tenth of the
    // bound, between 10 ms and 1 s.
    absl::Duration check_every = absl::ZeroDuration();
    // The watchdog's thread waking this much later than asked means the process was frozen
    // (see the Note): the open call's deadline moves by the delay.
    absl::Duration frozen_after = absl::Seconds(1);
  };

  explicit ProgressWatchdog(Options options);
  // Stops the watchdog's thread.
  ~ProgressWatchdog();
  ProgressWatchdog(const ProgressWatchdog&) = delete;
  ProgressWatchdog& operator=(const ProgressWatchdog&) = delete;

  absl::Duration bound() const { return options_.bound; }

  // Starts bounding calls (before: none is) and the watchdog's thread. `describe_work` says
  // what the loop is doing (the ops of the response it executes, or those it negotiates); see
  // the class comment for when it runs. `before_terminate` (may be empty), called in the same
  // places before `terminate` with the report, leaves the loop's account of itself (its flight
  // recorder's dump, Note [Flight recorder]); `terminate` then waits a check interval or a
  // second (at most the bound), so that ranks blocked in the same call, which trip within about
  // that, leave theirs before this rank ends the job. `while_inside` (may be empty) runs on the
  // watchdog's thread at each check while the loop thread is inside a call (a BlockingCall or a
  // WaitingCall), with the call's name and how long it has been open: where the loop answers what
  // it cannot answer from a cycle (Note [Flight dump on demand] in
  // runtime/flight/flight_recorder.h).
  using WhileInside = std::function<void(absl::string_view call, absl::Duration open_for)>;
  void Arm(std::function<std::string()> describe_work,
           std::function<void(const std::string& report)> before_terminate = nullptr,
           WhileInside while_inside = nullptr);
  // Stops bounding calls and the thread; `describe_work` is not called any more.
  void Disarm();

  // The deadline of a non-blocking wait starting now; InfiniteFuture when not armed.
  absl::Time WaitDeadline() const;
  // A call completed: progress. Spends the allowance for other sets' work.
  void Progressed();
  // The next calls may wait for `calls` more calls of the members of a process set this rank
  // is not in (a skipped response), until one completes.
  void AllowForeignCalls(int64_t calls);
  // A non-blocking wait for `call` reached its WaitDeadline() without completing, waiting on
  // `peers` (world ranks; empty: unknown): reports and ends the job. Returns (only when
  // `terminate` returns) DeadlineExceeded with the report.
  absl::Status GiveUp(absl::string_view call, absl::Span<const int32_t> peers);

  // Brackets one blocking call on the loop thread: `call` and `peers` (world ranks the call
  // waits on; empty: unknown) must stay valid until the bracket ends. Nothing happens when the
  // watchdog is not armed.
  class BlockingCall {
   public:
    BlockingCall(ProgressWatchdog* watchdog, const char* call, absl::Span<const int32_t> peers);
    ~BlockingCall();
    BlockingCall(const BlockingCall&) = delete;
    BlockingCall& operator=(const BlockingCall&) = delete;

   private:
    ProgressWatchdog* watchdog_;  // null: not watched
  };

  // Brackets one non-blocking wait on the loop thread (one whose deadline is WaitDeadline(), which
  // the wait keeps itself: the watchdog's thread ends nothing for it), so that `while_inside` runs
  // while the loop thread is inside it. `call` must stay valid until the bracket ends. Nothing
  // happens when the watchdog is not armed.
  class WaitingCall {
   public:
    WaitingCall(ProgressWatchdog* watchdog, const char* call);
    ~WaitingCall();
    WaitingCall(const WaitingCall&) = delete;
    WaitingCall& operator=(const WaitingCall&) = delete;

   private:
    ProgressWatchdog* watchdog_;  // null: not watched
  };

 private:
  // `bounded`: the watchdog's thread ends the job when the call is still open at its deadline.
  void BeginBlocking(const char* call, absl::Span<const int32_t> peers, bool bounded);
  // Closes the open call; `progressed`: its completion counts as progress.
  void EndBlocking(bool progressed);
  void ThreadMain();
  // The report of the open call (or of `call`), with the loop's description of its work.
  NoProgressReport Report(absl::string_view call, absl::Span<const int32_t> peers,
                          int64_t foreign_calls) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the watchdog tripped and calls `terminate`; false when it had tripped already.
  bool Trip(const std::string& report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  std::atomic<bool> armed_{false};  // written by the loop thread; read by BlockingCall
  int64_t foreign_calls_ = 0;       // loop thread only

  mutable Mutex mu_;
  std::condition_variable wake_;
  std::function<std::string()> describe_work_ ABSL_GUARDED_BY(mu_);
  std::function<void(const std::string& report)> before_terminate_ ABSL_GUARDED_BY(mu_);
  WhileInside while_inside_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool tripped_ ABSL_GUARDED_BY(mu_) = false;
  // The open blocking call, if any.
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  const char* open_call_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Span<const int32_t> open_peers_ ABSL_GUARDED_BY(mu_);
  int64_t open_foreign_calls_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time open_deadline_ ABSL_GUARDED_BY(mu_);  // InfiniteFuture for a WaitingCall
  absl::Time open_since_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_PROGRESS_PROGRESS_WATCHDOG_H_
