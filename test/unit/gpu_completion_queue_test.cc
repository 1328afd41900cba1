#include "runtime/gpu/gpu_completion_queue.h"

#include <pthread.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

#include "runtime/gpu/gpu_batch.h"
#include "test/support/fake_gpu.h"

namespace chorus::runtime {
namespace {

using testing::FakeGpuCluster;
using testing::FakeGpuPlatform;

// The name of the calling thread.
std::string ThreadName() {
  char name[32] = {};
  ::pthread_getname_np(::pthread_self(), name, sizeof(name));
  return name;
}

// A batch of no entries whose done event is recorded on `stream` behind what is queued there.
GpuBatch BatchOn(FakeGpuPlatform& gpu, ops::gpu::StreamHandle stream) {
  GpuBatch batch;
  batch.device = 0;
  batch.what = "allreduce of 'x'";
  batch.done = *gpu.CreateEvent(0);
  REQUIRE(gpu.RecordEvent(0, batch.done, stream).ok());
  return batch;
}

TEST_CASE(
    "A parked batch done by Settle completes on the settling thread, one still running on "
    "the completion thread",
    "[gpu][completion]") {
  FakeGpuCluster cluster;
  auto gpu = std::make_shared<FakeGpuPlatform>(cluster);
  std::mutex mu;
  std::vector<std::thread::id> delivered_on;
  std::vector<std::string> delivered_by;
  GpuCompletionQueue queue(
      gpu,
      [&](std::vector<std::unique_ptr<TensorEntry>>* entries, std::vector<OpResult>* results,
          int64_t) {
        std::lock_guard<std::mutex> lock(mu);
        delivered_on.push_back(std::this_thread::get_id());
        delivered_by.push_back(ThreadName());
        entries->clear();
        results->clear();
      },
      [] {});
  const ops::gpu::StreamHandle stream = *gpu->CreateStream(0);
  auto delivered = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return delivered_on.size();
  };

  // Done: its event has passed before the settle (the fake device runs a stream's work on a
  // thread of its own; waited for here, with a bound).
  GpuBatch done = BatchOn(*gpu, stream);
  const absl::Time limit = absl::Now() + absl::Seconds(60);
  while (!*gpu->EventDone(0, done.done) && absl::Now() < limit)
    absl::SleepFor(absl::Milliseconds(1));
  REQUIRE(*gpu->EventDone(0, done.done));
  queue.Park(std::move(done));
  CHECK(delivered() == 0);  // parked: nobody completes it before the settle
  queue.Settle();
  REQUIRE(delivered() == 1);
  CHECK(delivered_on[0] == std::this_thread::get_id());

  // Running: the stream is held by host work until released, after the settle.
  absl::Notification release;
  gpu->EnqueueHostWork(stream, [&] { release.WaitForNotification(); });
  queue.Park(BatchOn(*gpu, stream));
  queue.Settle();
  CHECK(delivered() == 1);
  release.Notify();
  queue.Drain();
  REQUIRE(delivered() == 2);
  CHECK(delivered_on[1] != std::this_thread::get_id());
  CHECK(delivered_by[1] == "chorus-gpu-done");
  gpu->DestroyStream(0, stream);
}

}  // namespace
}  // namespace chorus::runtime
