// File: runtime/submit/handle_table.h
//
// Integer handles for in-flight ops: created at Enqueue, completed by the background thread,
// observed by Poll/Wait and forgotten by Release.
//
// Thread-safety: thread-safe.
#ifndef CHORUS_RUNTIME_SUBMIT_HANDLE_TABLE_H_
#define CHORUS_RUNTIME_SUBMIT_HANDLE_TABLE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "chorus/chorus.h"

namespace chorus::runtime {

class HandleTable {
 public:
  // `on_block` (optional) runs when a thread is about to block on a handle that no other thread
  // waits on yet, with this table's lock held: it must be quick and take no lock that is ever
  // held while calling into this table.
  explicit HandleTable(std::function<void()> on_block = nullptr) : on_block_(std::move(on_block)) {}

  // A new, not yet completed handle (positive, never reused within this table).
  Handle Create() ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets a handle whose op was never queued (Enqueue failed after Create).
  void Discard(Handle handle) ABSL_LOCKS_EXCLUDED(mu_);
  // Records the result and wakes waiters. REQUIRES: called once per handle.
  void Complete(Handle handle, OpResult result) ABSL_LOCKS_EXCLUDED(mu_);
  // Complete() for many handles under one lock; empties *done.
  void CompleteMany(std::vector<std::pair<Handle, OpResult>>* done) ABSL_LOCKS_EXCLUDED(mu_);

  // NotFound for an unknown (or released) handle.
  absl::StatusOr<bool> Poll(Handle handle) const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until completion; returns the op's status (NotFound for an unknown handle).
  absl::Status Wait(Handle handle) const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until completion, then removes the handle and returns its result.
  absl::StatusOr<OpResult> Release(Handle handle) ABSL_LOCKS_EXCLUDED(mu_);
  // Release without the wait: nullopt (the handle untouched) while the op is in flight.
  absl::StatusOr<std::optional<OpResult>> TryRelease(Handle handle) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Slot {
    bool done = false;
    int waiters = 0;  // threads blocked on this handle: Complete notifies only then
    OpResult result;
  };
  // Blocks until `handle` is done or unknown. REQUIRES: `lock` holds mu_.
  void AwaitDone(MutexLock& lock, Handle handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status NotFound(Handle handle) const;

  const std::function<void()> on_block_;
  mutable Mutex mu_;
  mutable std::condition_variable done_cv_;  // signalled by Complete and Discard
  Handle next_ ABSL_GUARDED_BY(mu_) = 1;
  mutable absl::flat_hash_map<Handle, Slot> slots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_SUBMIT_HANDLE_TABLE_H_
