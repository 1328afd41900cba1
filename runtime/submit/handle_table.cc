#include "runtime/submit/handle_table.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace chorus::runtime {

Handle HandleTable::Create() {
  MutexLock lock(&mu_);
  Handle handle = next_++;
  slots_.emplace(handle, Slot{});
  return handle;
}

void HandleTable::Discard(Handle handle) {
  MutexLock lock(&mu_);
  slots_.erase(handle);
  done_cv_.notify_all();
}

void HandleTable::Complete(Handle handle, OpResult result) {
  MutexLock lock(&mu_);
  auto it = slots_.find(handle);
  if (it == slots_.end()) return;
  it->second.result = std::move(result);
  it->second.done = true;
  if (it->second.waiters > 0) done_cv_.notify_all();
}

void HandleTable::CompleteMany(std::vector<std::pair<Handle, OpResult>>* done) {
  bool wake = false;
  {
    MutexLock lock(&mu_);
    for (auto& [handle, result] : *done) {
      auto it = slots_.find(handle);
      if (it == slots_.end()) continue;
      it->second.result = std::move(result);
      it->second.done = true;
      wake |= it->second.waiters > 0;
    }
  }
  done->clear();
  if (wake) done_cv_.notify_all();
}

absl::Status HandleTable::NotFound(Handle handle) const {
  return absl::NotFoundError(
      absl::StrCat("unknown handle ", handle, " (never created, or already released)"));
}

void HandleTable::AwaitDone(MutexLock& lock, Handle handle) const {
  auto it = slots_.find(handle);
  if (it == slots_.end() || it->second.done) return;
  if (it->second.waiters++ == 0 && on_block_) on_block_();
  lock.Wait(done_cv_, [this, handle]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    auto found = slots_.find(handle);
    return found == slots_.end() || found->second.done;
  });
  auto again = slots_.find(handle);
  if (again != slots_.end()) --again->second.waiters;
}

absl::StatusOr<bool> HandleTable::Poll(Handle handle) const {
  MutexLock lock(&mu_);
  auto it = slots_.find(handle);
  if (it == slots_.end()) return NotFound(handle);
  return it->second.done;
}

absl::Status HandleTable::Wait(Handle handle) const {
  MutexLock lock(&mu_);
  AwaitDone(lock, handle);
  auto it = slots_.find(handle);
  if (it == slots_.end()) return NotFound(handle);
  return it->second.result.status;
}

absl::StatusOr<OpResult> HandleTable::Release(Handle handle) {
  MutexLock lock(&mu_);
  auto it = slots_.find(handle);
  if (it != slots_.end() && !it->second.done) {
    AwaitDone(lock, handle);
    it = slots_.find(handle);  // the wait released the lock
  }
  if (it == slots_.end()) return NotFound(handle);
  OpResult result = std::move(it->second.result);
  slots_.erase(it);
  return result;
}

absl::StatusOr<std::optional<OpResult>> HandleTable::TryRelease(Handle handle) {
  MutexLock lock(&mu_);
  auto it = slots_.find(handle);
  if (it == slots_.end()) return NotFound(handle);
  if (!it->second.done) return std::optional<OpResult>();
  std::optional<OpResult> result(std::move(it->second.result));
  slots_.erase(it);
  return result;
}

}  // namespace chorus::runtime
