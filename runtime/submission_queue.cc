#include "runtime/submission_queue.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"

namespace chorus::runtime {

namespace {

absl::Status AlreadyInFlight(const Request& request) {
  return absl::InvalidArgumentError(absl::StrCat(
      OpTypeName(request.type), " of tensor '", request.name,
      "': a tensor with this name is already in flight on this rank; names must be unique "
      "among ops that have not completed"));
}

}  // namespace

absl::Status SubmissionQueue::Push(std::vector<std::unique_ptr<TensorEntry>> entries) {
  MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError(closed_why_);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& name = entries[i]->request.name;
    bool repeated = in_flight_.contains(name);
    for (size_t j = 0; j < i && !repeated; ++j) repeated = entries[j]->request.name == name;
    if (repeated) return AlreadyInFlight(entries[i]->request);
  }
  for (auto& entry : entries) {
    in_flight_.insert(entry->request.name);
    queued_.push_back(std::move(entry));
    ++pushed_;
  }
  WakeLoop();
  return absl::OkStatus();
}

absl::Status SubmissionQueue::Push(std::unique_ptr<TensorEntry> entry) {
  MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError(closed_why_);
  if (!in_flight_.insert(entry->request.name).second) return AlreadyInFlight(entry->request);
  queued_.push_back(std::move(entry));
  ++pushed_;
  WakeLoop();
  return absl::OkStatus();
}

void SubmissionQueue::WakeLoop() {
  // Only when the loop sleeps in WaitForWork, and once per sleep: a notify costs a syscall,
  // and the loop may take a while to run after the first one.
  if (!waiting_) return;
  waiting_ = false;
  work_cv_.notify_one();
}

std::vector<std::unique_ptr<TensorEntry>> SubmissionQueue::DrainAll() {
  MutexLock lock(&mu_);
  std::vector<std::unique_ptr<TensorEntry>> out;
  out.swap(queued_);
  hurry_ = false;  // what the waiter waits for is taken now (or was taken earlier)
  return out;
}

bool SubmissionQueue::WaitForWork(absl::Duration timeout) {
  MutexLock lock(&mu_);
  waiting_ = true;
  lock.WaitFor(work_cv_, timeout,
               [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !queued_.empty() || closed_; });
  waiting_ = false;
  return !queued_.empty();
}

void SubmissionQueue::WaitForQuiet(absl::Duration quiet, absl::Duration max_wait) {
  const absl::Time deadline = absl::Now() + max_wait;
  MutexLock lock(&mu_);
  int64_t seen = -1;
  absl::Duration nap = quiet;
  while (!hurry_ && !closed_) {
    if (pushed_ == seen) return;
    if (seen >= 0) nap *= 2;  // a long burst: wake less often (each wake costs a switch)
    seen = pushed_;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return;
    napping_ = true;
    lock.WaitFor(quiet_cv_, std::min(nap, left),
                 [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return hurry_ || closed_; });
    napping_ = false;
  }
  hurry_ = false;
}

void SubmissionQueue::Hurry() {
  MutexLock lock(&mu_);
  hurry_ = true;
  if (napping_) quiet_cv_.notify_one();
}

void SubmissionQueue::Forget(const std::vector<std::unique_ptr<TensorEntry>>& entries) {
  MutexLock lock(&mu_);
  for (const std::unique_ptr<TensorEntry>& entry : entries) in_flight_.erase(entry->request.name);
}

void SubmissionQueue::CloseLocked(std::string why) {
  closed_ = true;
  closed_why_ = std::move(why);
  work_cv_.notify_all();
  quiet_cv_.notify_all();
}

void SubmissionQueue::Close(std::string why) {
  MutexLock lock(&mu_);
  if (!failed_) CloseLocked(std::move(why));
}

void SubmissionQueue::CloseIfOpen(std::string why) {
  MutexLock lock(&mu_);
  if (!closed_) CloseLocked(std::move(why));
}

void SubmissionQueue::Fail(std::string why) {
  MutexLock lock(&mu_);
  if (failed_) return;
  failed_ = true;
  CloseLocked(std::move(why));
}

void SubmissionQueue::Reopen() {
  MutexLock lock(&mu_);
  assert(queued_.empty() && in_flight_.empty());
  closed_ = false;
  failed_ = false;
  closed_why_.clear();
  hurry_ = false;
}

bool SubmissionQueue::closed() const {
  MutexLock lock(&mu_);
  return closed_;
}

}  // namespace chorus::runtime
