#include "runtime/submit/submission_queue.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

#include "base/status_macros.h"
#include "runtime/submit/op_slots.h"

namespace chorus::runtime {

namespace {

// The stack's head once the queue is closed: no push succeeds until Reopen.
TensorEntry* const kClosedStack = reinterpret_cast<TensorEntry*>(uintptr_t{1});

absl::Status AlreadyInFlight(const Request& request) {
  return absl::InvalidArgumentError(absl::StrCat(
      OpTypeName(request.type), " of tensor '", request.name,
      "': a tensor with this name is already in flight on this rank; names must be unique "
      "among ops that have not completed"));
}

}  // namespace

absl::Status SubmissionQueue::ClaimRegisteredName(TensorEntry& entry) {
  if (registered_.empty()) return absl::OkStatus();
  auto it = registered_.find(entry.request.name);
  if (it == registered_.end()) return absl::OkStatus();
  switch (ClaimSlotName(*it->second)) {
    case NameClaim::kClaimed:
      entry.claimed_name = it->second;
      return absl::OkStatus();
    case NameClaim::kInFlight:
      return AlreadyInFlight(entry.request);
    case NameClaim::kUnregistered:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status SubmissionQueue::Push(std::vector<std::unique_ptr<TensorEntry>> entries) {
  MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError(closed_why_);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& name = entries[i]->request.name;
    bool repeated = in_flight_.contains(name);
    for (size_t j = 0; j < i && !repeated; ++j) repeated = entries[j]->request.name == name;
    if (repeated) return AlreadyInFlight(entries[i]->request);
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    absl::Status claimed = ClaimRegisteredName(*entries[i]);
    if (!claimed.ok()) {
      for (size_t j = 0; j < i; ++j) {
        if (entries[j]->claimed_name != nullptr) ReleaseSlotName(*entries[j]->claimed_name);
        entries[j]->claimed_name = nullptr;
      }
      return claimed;
    }
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
  if (in_flight_.contains(entry->request.name)) return AlreadyInFlight(entry->request);
  CHORUS_RETURN_IF_ERROR(ClaimRegisteredName(*entry));
  in_flight_.insert(entry->request.name);
  queued_.push_back(std::move(entry));
  ++pushed_;
  WakeLoop();
  return absl::OkStatus();
}

absl::Status SubmissionQueue::PushRegistered(std::unique_ptr<TensorEntry>& entry) {
  // Given up before the push publishes it: the loop may complete the entry (and hand it back
  // to `entry`'s owner) before the push returns.
  TensorEntry* e = entry.release();
  TensorEntry* head = stack_.load(std::memory_order_relaxed);
  do {
    if (head == kClosedStack) {
      entry.reset(e);
      MutexLock lock(&mu_);
      return absl::FailedPreconditionError(closed_why_);
    }
    e->next_submitted = head;
    // seq_cst: a loop about to sleep either sees this entry or is seen asleep below.
  } while (
      !stack_.compare_exchange_weak(head, e, std::memory_order_seq_cst, std::memory_order_relaxed));
  if (loop_sleeps_.load(std::memory_order_seq_cst)) {
    MutexLock lock(&mu_);
    WakeLoop();
  }
  return absl::OkStatus();
}

absl::Status SubmissionQueue::Register(absl::string_view name, std::atomic<uint64_t>* state) {
  MutexLock lock(&mu_);
  if (in_flight_.contains(name) || registered_.contains(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot register tensor '", name, "': ",
        registered_.contains(name) ? "an op of this name is registered already"
                                   : "an op of this name is in flight; register it after it "
                                     "completed"));
  }
  registered_.emplace(name, state);
  return absl::OkStatus();
}

void SubmissionQueue::Unregister(absl::string_view name) {
  MutexLock lock(&mu_);
  registered_.erase(name);
}

bool SubmissionQueue::StackHoldsWork() const {
  TensorEntry* head = stack_.load(std::memory_order_seq_cst);
  return head != nullptr && head != kClosedStack;
}

void SubmissionQueue::TakeStack(bool closed, std::vector<std::unique_ptr<TensorEntry>>* out) {
  TensorEntry* head = stack_.load(std::memory_order_acquire);
  TensorEntry* const replacement = closed ? kClosedStack : nullptr;
  do {
    if (head == kClosedStack) return;
    if (head == nullptr && !closed) return;
  } while (!stack_.compare_exchange_weak(head, replacement, std::memory_order_acq_rel,
                                         std::memory_order_acquire));
  // Newest first: append in push order.
  const size_t first = out->size();
  for (TensorEntry* e = head; e != nullptr;) {
    TensorEntry* next = e->next_submitted;
    e->next_submitted = nullptr;
    out->emplace_back(e);
    e = next;
  }
  std::reverse(out->begin() + static_cast<std::ptrdiff_t>(first), out->end());
}

void SubmissionQueue::WakeLoop() {
  // Only when the loop sleeps in WaitForWork, and once per sleep: a notify costs a syscall,
  // and the loop may take a while to run after the first one.
  if (!waiting_) return;
  waiting_ = false;
  loop_sleeps_.store(false, std::memory_order_relaxed);
  work_cv_.notify_one();
}

void SubmissionQueue::DrainAll(std::vector<std::unique_ptr<TensorEntry>>* out) {
  out->clear();
  {
    MutexLock lock(&mu_);
    out->swap(queued_);  // queued_ keeps out's buffer for the next pushes
    hurry_ = false;      // what the waiter waits for is taken now (or was taken earlier)
  }
  TakeStack(/*closed=*/false, out);
}

std::vector<std::unique_ptr<TensorEntry>> SubmissionQueue::DrainAll() {
  std::vector<std::unique_ptr<TensorEntry>> out;
  DrainAll(&out);
  return out;
}

bool SubmissionQueue::WaitForWork(absl::Duration timeout) {
  MutexLock lock(&mu_);
  waiting_ = true;
  loop_sleeps_.store(true, std::memory_order_seq_cst);
  lock.WaitFor(work_cv_, timeout, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !queued_.empty() || closed_ || StackHoldsWork();
  });
  waiting_ = false;
  loop_sleeps_.store(false, std::memory_order_relaxed);
  return !queued_.empty() || StackHoldsWork();
}

void SubmissionQueue::WaitForQuiet(absl::Duration quiet, absl::Duration max_wait) {
  const absl::Time deadline = absl::Now() + max_wait;
  MutexLock lock(&mu_);
  int64_t seen = -1;
  TensorEntry* seen_head = nullptr;  // registered pushes since the last look change the head
  absl::Duration nap = quiet;
  while (!hurry_ && !closed_) {
    TensorEntry* head = stack_.load(std::memory_order_acquire);
    if (pushed_ == seen && head == seen_head) return;
    if (seen >= 0) nap *= 2;  // a long burst: wake less often (each wake costs a switch)
    seen = pushed_;
    seen_head = head;
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
  bool any = false;
  for (const std::unique_ptr<TensorEntry>& entry : entries) any |= entry->slot < 0;
  if (!any) return;  // registered ops only: their slots free their names
  MutexLock lock(&mu_);
  for (const std::unique_ptr<TensorEntry>& entry : entries) {
    if (entry->slot >= 0) continue;
    in_flight_.erase(entry->request.name);
    if (entry->claimed_name != nullptr) {
      ReleaseSlotName(*entry->claimed_name);
      entry->claimed_name = nullptr;
    }
  }
}

void SubmissionQueue::CloseLocked(std::string why) {
  closed_ = true;
  closed_why_ = std::move(why);
  // Registered ops pushed before the close are failed with the rest of the queue.
  TakeStack(/*closed=*/true, &queued_);
  work_cv_.notify_all();
  quiet_cv_.notify_all();
}

void SubmissionQueue::Close(std::string why, std::string cause) {
  MutexLock lock(&mu_);
  if (failed_) return;
  shutdown_cause_ = std::move(cause);
  CloseLocked(std::move(why));
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
  stack_.store(nullptr, std::memory_order_release);
  closed_ = false;
  failed_ = false;
  closed_why_.clear();
  shutdown_cause_.clear();
  hurry_ = false;
}

bool SubmissionQueue::closed() const {
  MutexLock lock(&mu_);
  return closed_;
}

std::string SubmissionQueue::shutdown_cause() const {
  MutexLock lock(&mu_);
  return shutdown_cause_;
}

}  // namespace chorus::runtime
