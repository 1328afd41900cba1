#include "runtime/submit/op_slots.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"

#include "base/status_macros.h"

namespace chorus::runtime {
namespace {

// Handles carry the sequence number modulo 2^38.
constexpr uint64_t kSeqMask = (uint64_t{1} << (62 - kSlotIdBits)) - 1;

uint64_t SeqOf(uint64_t state) { return state >> kSlotFlagBits; }

// The handle of submission `seq` of slot `id`.
Handle MakeHandle(int32_t id, uint64_t seq) {
  return kSlotHandleBit | static_cast<Handle>((seq & kSeqMask) << kSlotIdBits) |
         static_cast<Handle>(id & (kMaxSlots - 1));
}

// Whether `state` is of the submission `seq` (mod 2^38) with its handle unreleased.
bool Matches(uint64_t state, uint64_t seq) {
  return (state & kSlotUnreleased) != 0 && (SeqOf(state) & kSeqMask) == seq;
}

}  // namespace

NameClaim ClaimSlotName(std::atomic<uint64_t>& state) {
  uint64_t s = state.load(std::memory_order_relaxed);
  do {
    if ((s & kSlotUnregistered) != 0) return NameClaim::kUnregistered;
    if ((s & (kSlotInFlight | kSlotNameInFlight)) != 0) return NameClaim::kInFlight;
  } while (!state.compare_exchange_weak(s, s | kSlotNameInFlight, std::memory_order_acq_rel,
                                        std::memory_order_relaxed));
  return NameClaim::kClaimed;
}

void ReleaseSlotName(std::atomic<uint64_t>& state) {
  state.fetch_and(~kSlotNameInFlight, std::memory_order_acq_rel);
}

SlotTable::SlotTable(std::function<void()> on_block)
    : on_block_(std::move(on_block)), instance_([] {
        static std::atomic<int32_t> tables{0};
        return tables.fetch_add(1, std::memory_order_relaxed) & 0x7f;
      }()) {}

SlotTable::~SlotTable() {
  for (std::atomic<Slot*>& chunk : chunks_) delete[] chunk.load(std::memory_order_relaxed);
}

absl::StatusOr<int32_t> SlotTable::Add(std::unique_ptr<TensorEntry> entry) {
  MutexLock lock(&mu_);
  int32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    if (next_index_ == kMaxSlots) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot register more than ", kMaxSlots, " ops at once"));
    }
    const int32_t index = next_index_++;
    std::atomic<Slot*>& chunk = chunks_[static_cast<size_t>(index) >> kChunkBits];
    if (chunk.load(std::memory_order_relaxed) == nullptr) {
      chunk.store(new Slot[kChunkSize], std::memory_order_release);
    }
    id = (instance_ << kSlotIdBits) | index;
  }
  Slot* slot = Find(id);
  entry->slot = id;
  entry->registration = ++registrations_;
  slot->type = entry->request.type;
  slot->name = entry->request.name;
  slot->elements = entry->op.input.num_elements();
  slot->has_output = entry->op.output.data != nullptr;
  slot->entry = std::move(entry);
  slot->status = absl::OkStatus();
  return id;
}

void SlotTable::Activate(int32_t id) {
  Find(id)->state.fetch_and(~kSlotUnregistered, std::memory_order_release);
}

absl::Status SlotTable::Remove(int32_t id) {
  Slot* slot = Find(id);
  if (slot == nullptr) return absl::NotFoundError(absl::StrCat("no registered op in slot ", id));
  uint64_t s = slot->state.load(std::memory_order_acquire);
  do {
    if ((s & kSlotUnregistered) != 0) {
      return absl::NotFoundError(absl::StrCat("no registered op in slot ", id));
    }
    if ((s & (kSlotInFlight | kSlotNameInFlight)) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("the op registered in slot ", id,
                                                        " is in flight; unregister it after it ",
                                                        "completed and its handle was released"));
    }
    if ((s & kSlotUnreleased) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("the handle of the last op of slot ", id,
                                                        " was not released; release it first"));
    }
  } while (!slot->state.compare_exchange_weak(s, s | kSlotUnregistered, std::memory_order_acq_rel,
                                              std::memory_order_acquire));
  return absl::OkStatus();
}

void SlotTable::Recycle(int32_t id) {
  Slot* slot = Find(id);
  slot->entry.reset();
  MutexLock lock(&mu_);
  free_ids_.push_back(id);
}

absl::Status SlotTable::Claim(int32_t id, Slot** out, Handle* handle) {
  Slot* slot = Find(id);
  if (slot == nullptr) return absl::NotFoundError(absl::StrCat("no registered op in slot ", id));
  uint64_t s = slot->state.load(std::memory_order_acquire);
  uint64_t next;
  do {
    if ((s & kSlotUnregistered) != 0) {
      return absl::NotFoundError(absl::StrCat("no registered op in slot ", id));
    }
    if ((s & (kSlotInFlight | kSlotNameInFlight)) != 0) {
      // The general path's words for a duplicate in-flight name (SubmissionQueue).
      return absl::InvalidArgumentError(
          absl::StrCat(OpTypeName(slot->type), " of tensor '", slot->name,
                       "': a tensor with this name is already in flight on this rank; names must "
                       "be unique among ops that have not completed"));
    }
    if ((s & kSlotUnreleased) != 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("the handle of the last op of slot ", id,
                       " was not released; release it before submitting the op again"));
    }
    next = ((SeqOf(s) + 1) << kSlotFlagBits) | kSlotInFlight | kSlotUnreleased;
  } while (!slot->state.compare_exchange_weak(s, next, std::memory_order_acquire,
                                              std::memory_order_acquire));
  *out = slot;
  *handle = MakeHandle(id, SeqOf(next));
  return absl::OkStatus();
}

void SlotTable::Unclaim(Slot& slot) {
  // Back to the state before the claim (the sequence number keeps counting: the handle given
  // out for the failed submission never matches).
  slot.state.fetch_and(~(kSlotInFlight | kSlotUnreleased), std::memory_order_release);
}

void SlotTable::Complete(std::vector<std::pair<std::unique_ptr<TensorEntry>, absl::Status>>* done) {
  for (auto& [entry, status] : *done) {
    Slot* slot = Find(entry->slot);
    slot->status = std::move(status);
    slot->entry = std::move(entry);
    // seq_cst: pairs with the waiter's increment of waiters_ (see AwaitDone).
    slot->state.fetch_and(~kSlotInFlight, std::memory_order_seq_cst);
  }
  done->clear();
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    // Through the mutex: a waiter that saw the op in flight is inside its wait by now.
    { MutexLock lock(&wait_mu_); }
    done_cv_.notify_all();
  }
}

SlotTable::Slot* SlotTable::Resolve(Handle handle, uint64_t* seq) const {
  if (!IsSlotHandle(handle)) return nullptr;
  Slot* slot = At(static_cast<int32_t>(handle & (kMaxSlots - 1)));
  if (slot == nullptr) return nullptr;
  *seq = static_cast<uint64_t>((handle & ~kSlotHandleBit) >> kSlotIdBits);
  return slot;
}

absl::Status SlotTable::NotFound(Handle handle) const {
  return absl::NotFoundError(
      absl::StrCat("unknown handle ", handle, " (never created, or already released)"));
}

void SlotTable::AwaitDone(Slot& slot) const {
  if ((slot.state.load(std::memory_order_acquire) & kSlotInFlight) == 0) return;
  if (on_block_) on_block_();
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  {
    MutexLock lock(&wait_mu_);
    lock.Wait(done_cv_, [&slot] {
      return (slot.state.load(std::memory_order_seq_cst) & kSlotInFlight) == 0;
    });
  }
  waiters_.fetch_sub(1, std::memory_order_relaxed);
}

absl::StatusOr<bool> SlotTable::Poll(Handle handle) const {
  uint64_t seq = 0;
  Slot* slot = Resolve(handle, &seq);
  if (slot == nullptr) return NotFound(handle);
  const uint64_t s = slot->state.load(std::memory_order_acquire);
  if (!Matches(s, seq)) return NotFound(handle);
  return (s & kSlotInFlight) == 0;
}

absl::Status SlotTable::Wait(Handle handle) const {
  uint64_t seq = 0;
  Slot* slot = Resolve(handle, &seq);
  if (slot == nullptr || !Matches(slot->state.load(std::memory_order_acquire), seq)) {
    return NotFound(handle);
  }
  AwaitDone(*slot);
  // The handle stays unreleased (only its holder releases it), so the status is this op's.
  return slot->status;
}

absl::StatusOr<OpResult> SlotTable::TakeResult(Handle handle, Slot& slot, uint64_t seq) {
  OpResult result;
  result.status = slot.status;
  uint64_t s = slot.state.load(std::memory_order_acquire);
  do {
    if (!Matches(s, seq) || (s & kSlotInFlight) != 0) return NotFound(handle);
  } while (!slot.state.compare_exchange_weak(s, s & ~kSlotUnreleased, std::memory_order_acq_rel,
                                             std::memory_order_acquire));
  return result;
}

absl::StatusOr<OpResult> SlotTable::Release(Handle handle) {
  uint64_t seq = 0;
  Slot* slot = Resolve(handle, &seq);
  if (slot == nullptr || !Matches(slot->state.load(std::memory_order_acquire), seq)) {
    return NotFound(handle);
  }
  AwaitDone(*slot);
  return TakeResult(handle, *slot, seq);
}

absl::StatusOr<std::optional<OpResult>> SlotTable::TryRelease(Handle handle) {
  uint64_t seq = 0;
  Slot* slot = Resolve(handle, &seq);
  if (slot == nullptr) return NotFound(handle);
  const uint64_t s = slot->state.load(std::memory_order_acquire);
  if (!Matches(s, seq)) return NotFound(handle);
  if ((s & kSlotInFlight) != 0) return std::optional<OpResult>();
  CHORUS_ASSIGN_OR_RETURN(OpResult result, TakeResult(handle, *slot, seq));
  return std::optional<OpResult>(std::move(result));
}

}  // namespace chorus::runtime
