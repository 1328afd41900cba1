// The hand-off between a thread that waits on an op and the background loop's batching window:
// a blocking wait hurries the loop (SubmissionQueue::Hurry, HandleTable's on_block).
#include <atomic>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

#include "runtime/handle_table.h"
#include "runtime/submission_queue.h"

namespace chorus::runtime {
namespace {

// Each wait below would last an hour if nothing ended it early.
constexpr absl::Duration kForever = absl::Hours(1);

TEST_CASE("Hurry ends the loop's wait for a burst while it naps", "[submission_queue]") {
  SubmissionQueue queue;
  std::thread hurrier([&] {
    absl::SleepFor(absl::Milliseconds(20));
    queue.Hurry();
  });
  queue.WaitForQuiet(kForever, kForever);
  hurrier.join();
}

TEST_CASE("A Hurry before the wait ends the next wait for a burst, once", "[submission_queue]") {
  SubmissionQueue queue;
  queue.Hurry();
  queue.WaitForQuiet(kForever, kForever);
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
  queue.WaitForQuiet(kForever, kForever);
  closer.join();
}

TEST_CASE("HandleTable calls on_block when the first waiter blocks on an incomplete handle",
          "[handle_table]") {
  std::atomic<int> blocked{0};
  HandleTable table([&] { blocked.fetch_add(1); });
  const Handle done = table.Create();
  table.Complete(done, OpResult());
  REQUIRE(table.Wait(done).ok());
  REQUIRE(table.Poll(done).value());
  CHECK(blocked.load() == 0);  // nothing to wait for

  const Handle pending = table.Create();
  absl::Status first_status, second_status;  // Catch2 asserts on the test's thread only
  std::thread first([&] { first_status = table.Wait(pending); });
  while (blocked.load() == 0) absl::SleepFor(absl::Milliseconds(1));
  std::thread second([&] { second_status = table.Wait(pending); });
  absl::SleepFor(absl::Milliseconds(20));
  table.Complete(pending, OpResult());
  first.join();
  second.join();
  CHECK(first_status.ok());
  CHECK(second_status.ok());
  // The second waiter joined a handle already waited on (or found it done): one call.
  CHECK(blocked.load() == 1);
}

}  // namespace
}  // namespace chorus::runtime
