#include "runtime/handle_table.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace chorus::runtime {

Handle HandleTable::Create() {
  absl::MutexLock lock(&mu_);
  Handle handle = next_++;
  slots_.emplace(handle, Slot{});
  return handle;
}

void HandleTable::Discard(Handle handle) {
  absl::MutexLock lock(&mu_);
  slots_.erase(handle);
}

void HandleTable::Complete(Handle handle, OpResult result) {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(handle);
  if (it == slots_.end()) return;
  it->second.result = std::move(result);
  it->second.done = true;
}

absl::Status HandleTable::NotFound(Handle handle) const {
  return absl::NotFoundError(absl::StrCat("unknown handle ", handle,
                                          " (never created, or already released)"));
}

absl::StatusOr<bool> HandleTable::Poll(Handle handle) const {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(handle);
  if (it == slots_.end()) return NotFound(handle);
  return it->second.done;
}

absl::Status HandleTable::Wait(Handle handle) const {
  absl::MutexLock lock(&mu_);
  auto done = [this, handle]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = slots_.find(handle);
    return it == slots_.end() || it->second.done;
  };
  mu_.Await(absl::Condition(&done));
  auto it = slots_.find(handle);
  if (it == slots_.end()) return NotFound(handle);
  return it->second.result.status;
}

absl::StatusOr<OpResult> HandleTable::Release(Handle handle) {
  absl::MutexLock lock(&mu_);
  auto done = [this, handle]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = slots_.find(handle);
    return it == slots_.end() || it->second.done;
  };
  mu_.Await(absl::Condition(&done));
  auto it = slots_.find(handle);
  if (it == slots_.end()) return NotFound(handle);
  OpResult result = std::move(it->second.result);
  slots_.erase(it);
  return result;
}

}  // namespace chorus::runtime
