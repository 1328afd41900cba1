// File: base/interrupt.h
//
// A one-way signal with a reason, raised by one thread and seen by others: how something outside
// a blocking loop (an elastic job's membership watcher) makes the loop give up. The first
// Raise() wins; the reason never changes after it.
//
//   auto interrupt = std::make_shared<Interrupt>();
//   // waiting thread, in its poll loop:
//   if (interrupt->raised()) return interrupt->reason();
//   // any other thread:
//   interrupt->Raise(absl::AbortedError("generation 3 aborted"));
//
// Thread-safety: thread-safe; raised() is one atomic load, cheap enough for a spin loop.
#ifndef CHORUS_BASE_INTERRUPT_H_
#define CHORUS_BASE_INTERRUPT_H_

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"

#include "base/mutex.h"

namespace chorus {

class Interrupt {
 public:
  Interrupt() = default;
  Interrupt(const Interrupt&) = delete;
  Interrupt& operator=(const Interrupt&) = delete;

  // Raises the signal with `reason` (not OK; an OK reason becomes Unknown). Later calls are
  // ignored.
  void Raise(absl::Status reason);
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  // The reason given to the first Raise(); OK while not raised.
  absl::Status reason() const;

 private:
  mutable Mutex mu_;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> raised_{false};  // set after reason_, under mu_
};

}  // namespace chorus

#endif  // CHORUS_BASE_INTERRUPT_H_
