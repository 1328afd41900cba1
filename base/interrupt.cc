#include "base/interrupt.h"

#include <utility>

namespace chorus {

void Interrupt::Raise(absl::Status reason) {
  if (reason.ok()) reason = absl::UnknownError("interrupted without a reason");
  MutexLock lock(&mu_);
  if (raised_.load(std::memory_order_relaxed)) return;
  reason_ = std::move(reason);
  raised_.store(true, std::memory_order_release);
}

absl::Status Interrupt::reason() const {
  MutexLock lock(&mu_);
  return reason_;
}

}  // namespace chorus
