#include "runtime/gpu/gpu_completion_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "base/logging.h"

namespace chorus::runtime {
namespace {

// Polling interval while batches run: short right after progress, backing off to 1 ms so an
// idle wait on a long NCCL op costs next to no CPU.
constexpr absl::Duration kMinPoll = absl::Microseconds(10);
constexpr absl::Duration kMaxPoll = absl::Milliseconds(1);

// After a failure, how long a batch's queued device work may take to drain.
constexpr absl::Duration kAbandonAfter = absl::Seconds(10);

constexpr char kAborted[] = "; chorus aborted its NCCL communicators";

}  // namespace

GpuCompletionQueue::GpuCompletionQueue(std::shared_ptr<ops::gpu::GpuPlatform> platform,
                                       DeliverFn deliver, AbortFn abort_all)
    : platform_(std::move(platform)),
      deliver_(std::move(deliver)),
      abort_all_(std::move(abort_all)),
      thread_([this] { ThreadMain(); }) {}

GpuCompletionQueue::~GpuCompletionQueue() {
  Drain();
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GpuCompletionQueue::Push(GpuBatch batch) {
  {
    MutexLock lock(&mu_);
    ++in_flight_;
    incoming_.push_back(std::move(batch));
  }
  cv_.notify_all();
}

void GpuCompletionQueue::Drain() {
  MutexLock lock(&mu_);
  lock.Wait(cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; });
}

void GpuCompletionQueue::Fail(absl::Status status) {
  SetFailure(std::move(status));
  cv_.notify_all();
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
    poked_ = true;
    abort = !aborted_;
    aborted_ = true;
  }
  if (abort) {
    CHORUS_LOG(ERROR) << "GPU data plane failed: " << failure();
    abort_all_();
  }
}

void GpuCompletionQueue::ThreadMain() {
  std::vector<GpuBatch> watching;
  absl::Duration poll = kMinPoll;
  while (true) {
    {
      MutexLock lock(&mu_);
      auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !incoming_.empty() || stop_ || poked_;
      };
      if (watching.empty()) {
        lock.Wait(cv_,
                  [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !incoming_.empty() || stop_; });
      } else {
        lock.WaitFor(cv_, poll, woken);
      }
      poked_ = false;
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
    failed = absl::UnavailableError(absl::StrCat(
        batch.what, " did not complete on GPU ", batch.device,
        " within CHORUS_GPU_OP_TIMEOUT_SECONDS (a peer stopped or NCCL is stuck)", kAborted));
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
  deliver_(&batch.entries, &batch.results);
}

}  // namespace chorus::runtime
