// The hand-off between a thread that waits on an op and the background loop's batching window:
// a blocking wait hurries the loop (SubmissionQueue::Hurry, HandleTable's on_block).
#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

#include "runtime/submit/handle_table.h"
#include "runtime/submit/submission_queue.h"

namespace chorus::runtime {
namespace {

// How long a wait below may last before the test fails: what it waits for comes within
// milliseconds, so reaching this means the wake-up was lost.
constexpr absl::Duration kLimit = absl::Seconds(60);

// Waits for a burst to end with nothing to end it but the wake-up under test (a quiet time and
// an upper bound of kLimit); fails the test if the wait ran to kLimit.
void WaitForQuietExpectingWakeUp(SubmissionQueue& queue, const char* wake_up) {
  const absl::Time start = absl::Now();
  queue.WaitForQuiet(kLimit, kLimit);
  const absl::Duration waited = absl::Now() - start;
  INFO(wake_up << " did not end WaitForQuiet: it ran for " << absl::FormatDuration(waited));
  CHECK(waited < kLimit);
}

// Polls `done` until it holds or kLimit passes; returns whether it holds.
bool Eventually(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + kLimit;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST_CASE("Hurry ends the loop's wait for a burst while it naps", "[submission_queue]") {
  SubmissionQueue queue;
  std::thread hurrier([&] {
    absl::SleepFor(absl::Milliseconds(20));
    queue.Hurry();
  });
  WaitForQuietExpectingWakeUp(queue, "Hurry() while napping");
  hurrier.join();
}

TEST_CASE("A Hurry before the wait ends the next wait for a burst, once", "[submission_queue]") {
  SubmissionQueue queue;
  queue.Hurry();
  WaitForQuietExpectingWakeUp(queue, "Hurry() before the wait");
  // Consumed: the next wait runs its course (a short one here).
  const absl::Time start = absl::Now();
  queue.WaitForQuiet(absl::Milliseconds(5), absl::Milliseconds(5));
  CHECK(absl::Now() - start >= absl::Milliseconds(5));
}

TEST_CASE("Close ends the loop's wait for a burst", "[submission_queue]") {
  SubmissionQueue queue;
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    queue.Close("closed");
  });
  WaitForQuietExpectingWakeUp(queue, "Close()");
  closer.join();
}

TEST_CASE("HandleTable calls on_block when the first waiter blocks on an incomplete handle",
          "[handle_table]") {
  // The waiters share what they touch, so that a waiter that never returns (the failure this
  // test looks for) can be left behind without touching freed memory.
  struct Shared {
    std::atomic<int> blocked{0};
    HandleTable table{[this] { blocked.fetch_add(1); }};
    absl::Status first_status, second_status;  // Catch2 asserts on the test's thread only
    std::atomic<int> returned{0};
  };
  auto w = std::make_shared<Shared>();
  const Handle done = w->table.Create();
  w->table.Complete(done, OpResult());
  REQUIRE(w->table.Wait(done).ok());
  REQUIRE(w->table.Poll(done).value());
  CHECK(w->blocked.load() == 0);  // nothing to wait for

  const Handle pending = w->table.Create();
  std::thread first([w, pending] {
    w->first_status = w->table.Wait(pending);
    w->returned.fetch_add(1);
  });
  const bool first_blocked = Eventually([&] { return w->blocked.load() > 0; });
  CHECK(first_blocked);  // else on_block was not called for the first waiter
  std::thread second([w, pending] {
    w->second_status = w->table.Wait(pending);
    w->returned.fetch_add(1);
  });
  absl::SleepFor(absl::Milliseconds(20));
  w->table.Complete(pending, OpResult());
  if (!Eventually([&] { return w->returned.load() == 2; })) {
    FAIL_CHECK("Complete() did not wake both waiters within " << absl::FormatDuration(kLimit));
    first.detach();
    second.detach();
    return;
  }
  first.join();
  second.join();
  CHECK(w->first_status.ok());
  CHECK(w->second_status.ok());
  // The second waiter joined a handle already waited on (or found it done): one call.
  CHECK(w->blocked.load() == 1);
}

}  // namespace
}  // namespace chorus::runtime
