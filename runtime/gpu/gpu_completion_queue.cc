#include "runtime/gpu/gpu_completion_queue.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "base/logging.h"

namespace chorus::runtime {
namespace {

// Polling interval while batches run without a host callback: short right after progress,
// backing off to 1 ms so an idle wait on a long NCCL op costs next to no CPU.
constexpr absl::Duration kMinPoll = absl::Microseconds(10);
constexpr absl::Duration kMaxPoll = absl::Milliseconds(1);
// With a callback behind every watched batch, polling is only for NCCL's asynchronous errors
// and the deadlines.
constexpr absl::Duration kWokenPoll = absl::Milliseconds(10);

// After a failure, how long a batch's queued device work may take to drain.
constexpr absl::Duration kAbandonAfter = absl::Seconds(10);

constexpr char kAborted[] = "; chorus aborted its NCCL communicators";

}  // namespace

class GpuCompletionQueue::Doorbell {
 public:
  void Ring() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      ++rings_;
    }
    cv_.notify_one();
  }
  // Blocks until it rang since `*seen` rings or `timeout` passed; `*seen` becomes the count.
  void Wait(uint64_t* seen, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    auto rang = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return rings_ != *seen; };
    if (timeout == absl::InfiniteDuration()) {
      lock.Wait(cv_, rang);
    } else {
      lock.WaitFor(cv_, timeout, rang);
    }
    *seen = rings_;
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  uint64_t rings_ ABSL_GUARDED_BY(mu_) = 0;
};

GpuCompletionQueue::GpuCompletionQueue(std::shared_ptr<ops::gpu::GpuPlatform> platform,
                                       DeliverFn deliver, AbortFn abort_all)
    : platform_(std::move(platform)),
      deliver_(std::move(deliver)),
      abort_all_(std::move(abort_all)),
      doorbell_(std::make_shared<Doorbell>()),
      thread_([this] { ThreadMain(); }) {}

GpuCompletionQueue::~GpuCompletionQueue() {
  Drain();
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  doorbell_->Ring();
  thread_.join();
}

void GpuCompletionQueue::RingFromDevice(void* doorbell) {
  auto* ref = static_cast<std::shared_ptr<Doorbell>*>(doorbell);
  (*ref)->Ring();
  delete ref;
}

void GpuCompletionQueue::ArmWake(GpuBatch& batch, ops::gpu::StreamHandle stream) {
  // The callback holds its own reference: it may run after this queue is gone.
  auto* ref = new std::shared_ptr<Doorbell>(doorbell_);
  batch.wakes = platform_->EnqueueHostCallback(batch.device, stream, &RingFromDevice, ref).ok();
  if (!batch.wakes) delete ref;  // never runs
}

void GpuCompletionQueue::Park(GpuBatch batch) {
  MutexLock lock(&mu_);
  ++in_flight_;
  parked_.push_back(std::move(batch));
}

void GpuCompletionQueue::Settle() {
  {
    MutexLock lock(&mu_);
    if (parked_.empty()) return;
    settling_.swap(parked_);  // parked_ takes settling_'s empty buffer
  }
  // Poll completes a batch that is done (or fails one after a failure), as the thread would;
  // the others stay, in order, at the front.
  int64_t finished = 0;
  size_t waiting = 0;
  for (GpuBatch& batch : settling_) {
    if (Poll(batch)) {
      ++finished;
    } else {
      if (&batch != &settling_[waiting]) settling_[waiting] = std::move(batch);
      ++waiting;
    }
  }
  {
    MutexLock lock(&mu_);
    in_flight_ -= finished;
    for (size_t i = 0; i < waiting; ++i) incoming_.push_back(std::move(settling_[i]));
  }
  settling_.clear();
  if (finished > 0) cv_.notify_all();
  if (waiting > 0) doorbell_->Ring();
}

void GpuCompletionQueue::Drain() {
  Settle();
  MutexLock lock(&mu_);
  lock.Wait(cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; });
}

void GpuCompletionQueue::Fail(absl::Status status) {
  SetFailure(std::move(status));
  doorbell_->Ring();
}

absl::Status GpuCompletionQueue::failure() const {
  MutexLock lock(&mu_);
  return failure_;
}

void GpuCompletionQueue::SetFailure(absl::Status status) {
  bool abort = false;
  {
    MutexLock lock(&mu_);
    if (failure_.ok()) failure_ = std::move(status);
    abort = !aborted_;
    aborted_ = true;
  }
  if (abort) {
    CHORUS_LOG(ERROR) << "GPU data plane failed: " << failure();
    abort_all_();
  }
}

void GpuCompletionQueue::ThreadMain() {
  // Named for tools (top -H, /proc/<pid>/task/*/comm) and the tests.
  ::pthread_setname_np(::pthread_self(), "chorus-gpu-done");
  std::vector<GpuBatch> watching;
  absl::Duration poll = kMinPoll;
  uint64_t rings_seen = 0;
  while (true) {
    // Sleeps until rung (a push, a failure, the stop, a batch's callback) or the next poll.
    const bool all_wake =
        std::all_of(watching.begin(), watching.end(), [](const GpuBatch& b) { return b.wakes; });
    doorbell_->Wait(&rings_seen, watching.empty() ? absl::InfiniteDuration()
                                 : all_wake       ? kWokenPoll
                                                  : poll);
    {
      MutexLock lock(&mu_);
      if (stop_ && watching.empty() && incoming_.empty()) return;
      for (GpuBatch& batch : incoming_) watching.push_back(std::move(batch));
      incoming_.clear();
    }
    int64_t finished = 0;
    for (auto it = watching.begin(); it != watching.end();) {
      if (Poll(*it)) {
        it = watching.erase(it);
        ++finished;
      } else {
        ++it;
      }
    }
    if (finished > 0) {
      {
        MutexLock lock(&mu_);
        in_flight_ -= finished;
      }
      cv_.notify_all();
      poll = kMinPoll;
    } else {
      poll = std::min(poll * 2, kMaxPoll);
    }
  }
}

bool GpuCompletionQueue::Poll(GpuBatch& batch) {
  absl::Status failed = failure();
  if (!failed.ok()) {
    // Failed by another batch, or by another rank (through the background loop). The entries
    // fail once the device work queued for them is over (after the abort, collectives return
    // early), so a framework reusing the tensors does not race the device; a batch that does
    // not drain within kAbandonAfter fails anyway.
    if (!Drained(batch)) return false;
    if (!absl::StrContains(failed.message(), batch.what)) {
      failed = absl::Status(failed.code(), absl::StrCat(batch.what, ": ", failed.message()));
    }
    Finish(batch, failed);
    return true;
  }
  absl::StatusOr<bool> done = platform_->EventDone(batch.device, batch.done);
  if (!done.ok()) {
    failed = absl::UnavailableError(absl::StrCat(batch.what, " failed on GPU ", batch.device, ": ",
                                                 done.status().message(), kAborted));
  } else if (*done) {
    for (void* p : batch.scratch) platform_->Free(batch.device, p);
    Finish(batch, absl::OkStatus());
    return true;
  } else {
    for (ops::gpu::GpuCommunicator* communicator : batch.communicators) {
      absl::Status nccl = communicator->AsyncError();
      if (!nccl.ok()) {
        failed = absl::UnavailableError(
            absl::StrCat("NCCL error in ", batch.what, ": ", nccl.message(), kAborted));
        break;
      }
    }
  }
  if (failed.ok() && absl::Now() > batch.deadline) {
    // The report every transport's no-progress gives (Note [No-progress bound]).
    batch.stuck.call = absl::StrCat("the NCCL work on GPU ", batch.device);
    batch.stuck.work = batch.what;
    failed = absl::UnavailableError(
        absl::StrCat(DescribeNoProgress(batch.stuck), " chorus aborted its NCCL communicators."));
  }
  if (failed.ok()) return false;
  SetFailure(failed);
  return Poll(batch);  // fails it once drained
}

bool GpuCompletionQueue::Drained(GpuBatch& batch) {
  if (batch.done == nullptr) return true;
  absl::StatusOr<bool> done = platform_->EventDone(batch.device, batch.done);
  if (!done.ok() || *done) return true;
  const absl::Time now = absl::Now();
  if (batch.abandon_at == absl::InfinitePast()) batch.abandon_at = now + kAbandonAfter;
  return now > batch.abandon_at;
}

void GpuCompletionQueue::Finish(GpuBatch& batch, const absl::Status& status) {
  // After a failure the device may still use the batch's scratch buffers (an aborted kernel
  // need not have exited yet): they are left allocated, as the process is going down.
  platform_->DestroyEvent(batch.device, batch.done);
  if (!status.ok()) {
    for (OpResult& result : batch.results) result = StatusResult(status);
  }
  deliver_(&batch.entries, &batch.results, batch.flight_token);
}

}  // namespace chorus::runtime
