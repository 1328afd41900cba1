// File: runtime/submit/submission_queue.h
//
// The hand-off from framework threads to the background loop. Also the authority on which
// names are in flight on this rank, so that a duplicate name is refused at Enqueue time.
//
// Enqueue'd ops are pushed under the queue's mutex. Registered ops (Note [Registered ops] in
// runtime/submit/op_slots.h) are pushed on a lock-free stack instead (PushRegistered: one
// compare-and-swap), whose head also says whether the queue is closed, so that no op is pushed
// after the loop took its last ones; a push takes the mutex only to wake a loop that sleeps
// for want of work. Their names are not listed here: a slot's state word holds its name in
// flight, and an Enqueue of a registered name claims the same word (Register).
//
// Thread-safety: thread-safe. Push/PushRegistered/Forget may be called from any thread;
// DrainAll and WaitForWork are meant for the background thread.
#ifndef CHORUS_RUNTIME_SUBMIT_SUBMISSION_QUEUE_H_
#define CHORUS_RUNTIME_SUBMIT_SUBMISSION_QUEUE_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "base/mutex.h"
#include "runtime/submit/name_hash.h"
#include "runtime/submit/tensor_entry.h"

namespace chorus::runtime {

class SubmissionQueue {
 public:
  // Queues all entries or none: InvalidArgument when a name is already in flight (or repeated
  // within `entries`), FailedPrecondition once Close() was called (the message is `closed_why`).
  absl::Status Push(std::vector<std::unique_ptr<TensorEntry>> entries) ABSL_LOCKS_EXCLUDED(mu_);
  // Push of one entry (the per-op path: no vector).
  absl::Status Push(std::unique_ptr<TensorEntry> entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Push of a registered op's entry, whose slot already holds its name in flight: lock-free.
  // On success the queue owns the entry (`entry` is null); FailedPrecondition once closed
  // (`entry` unchanged).
  absl::Status PushRegistered(std::unique_ptr<TensorEntry>& entry) ABSL_LOCKS_EXCLUDED(mu_);

  // Registers `name` as a slot's, whose state word is `state` (it must outlive the
  // registration): an Enqueue of that name then claims the word (ClaimSlotName).
  // InvalidArgument when the name is in flight or registered already.
  absl::Status Register(absl::string_view name, std::atomic<uint64_t>* state)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Unregister(absl::string_view name) ABSL_LOCKS_EXCLUDED(mu_);

  // Takes everything queued, in submission order (registered ops: in the order of their
  // pushes, after the Enqueue'd ones), into `out` (cleared first; its buffer is kept for the
  // next drain, so a steady loop allocates nothing here).
  void DrainAll(std::vector<std::unique_ptr<TensorEntry>>* out) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::unique_ptr<TensorEntry>> DrainAll() ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until something is queued, Close() is called, or `timeout` passes. Returns whether
  // something is queued.
  bool WaitForWork(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits while submissions keep arriving: returns once no new entry arrived during a nap, after
  // `max_wait`, or at once when Hurry() was called. The first nap lasts `quiet`, each later one
  // twice the previous (a long burst wakes the caller a few times, not once per `quiet`). Used
  // to take a burst of submissions in one cycle.
  void WaitForQuiet(absl::Duration quiet, absl::Duration max_wait) ABSL_LOCKS_EXCLUDED(mu_);

  // A thread has started to block on an op that is not complete: the submitter stopped
  // submitting to wait, so waiting for more of its burst only delays that op. Ends the current
  // (or the next) WaitForQuiet at once. One-shot: DrainAll and the WaitForQuiet it ends consume
  // it. Cheap; called with the handle table's lock held (lock order: handles, then queue).
  void Hurry() ABSL_LOCKS_EXCLUDED(mu_);

  // The entries' names are no longer in flight (their ops completed). REQUIRES: called for
  // every pushed entry before it is destroyed (in_flight_ views its name). Registered ops'
  // entries are skipped (their slots free their names).
  void Forget(const std::vector<std::unique_ptr<TensorEntry>>& entries) ABSL_LOCKS_EXCLUDED(mu_);

  // Refuses further pushes with FailedPrecondition(why) and wakes the waiter. On a closed queue
  // it replaces the reason, unless the queue was closed by Fail (a failure stays the reason).
  // `cause`: why this process shuts chorus down, for the other ranks (shutdown_cause()).
  void Close(std::string why, std::string cause = "") ABSL_LOCKS_EXCLUDED(mu_);
  // Close(why) unless the queue is closed already (the loop ending after a stop that this rank,
  // or another, requested: a reason given here stays).
  void CloseIfOpen(std::string why) ABSL_LOCKS_EXCLUDED(mu_);
  // Close(why) for a failure: the first failure's reason stays for good.
  void Fail(std::string why) ABSL_LOCKS_EXCLUDED(mu_);
  // Accepts pushes again (a runtime re-formed in place starts a new loop on this queue).
  // REQUIRES: no loop runs, and the last one drained the queue and completed what it took.
  void Reopen() ABSL_LOCKS_EXCLUDED(mu_);
  bool closed() const ABSL_LOCKS_EXCLUDED(mu_);
  // The cause given to the last Close ("" when none was, or the queue is open).
  std::string shutdown_cause() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Wakes the loop if it sleeps in WaitForWork.
  void WakeLoop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether registered ops wait on the stack.
  bool StackHoldsWork() const;
  // Takes the stack's entries, leaving it empty (or closed with `closed`), oldest first.
  void TakeStack(bool closed, std::vector<std::unique_ptr<TensorEntry>>* out);
  // In Push: claims `entry`'s name if it is registered (AlreadyInFlight otherwise).
  absl::Status ClaimRegisteredName(TensorEntry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes with `why` (replacing an earlier reason) and wakes the waiters.
  void CloseLocked(std::string why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::condition_variable work_cv_;   // signalled by Push and Close
  std::condition_variable quiet_cv_;  // signalled by Hurry and Close while the loop naps
  std::vector<std::unique_ptr<TensorEntry>> queued_ ABSL_GUARDED_BY(mu_);
  // Names of pushed entries not yet forgotten: views of their request.name (an entry's name
  // never changes after Push and the entry outlives its Forget).
  NameSet<absl::string_view> in_flight_ ABSL_GUARDED_BY(mu_);
  // Registered names (views of their slots' names) and their slots' state words.
  NameMap<absl::string_view, std::atomic<uint64_t>*> registered_ ABSL_GUARDED_BY(mu_);
  // Registered ops pushed and not yet drained, newest first (linked by next_submitted);
  // kClosedStack once closed.
  std::atomic<TensorEntry*> stack_{nullptr};
  // waiting_, readable without the mutex: a registered push wakes the loop only when set.
  std::atomic<bool> loop_sleeps_{false};
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;  // closed by Fail
  // The loop is blocked in WaitForWork and nobody has woken it yet.
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
  bool napping_ ABSL_GUARDED_BY(mu_) = false;  // the loop naps in WaitForQuiet
  bool hurry_ ABSL_GUARDED_BY(mu_) = false;    // Hurry() not yet consumed
  int64_t pushed_ ABSL_GUARDED_BY(mu_) = 0;    // entries pushed so far
  std::string closed_why_ ABSL_GUARDED_BY(mu_);
  std::string shutdown_cause_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_SUBMIT_SUBMISSION_QUEUE_H_
