// File: runtime/submit/op_slots.h
//
// Note [Registered ops]
// A training step submits the same ops every time: one allreduce per gradient, under the same
// name, with the same dtype, shape, reduction and process set. Such an op can be registered
// once (chorus::RegisterOp): the runtime checks it then, builds its TensorEntry (the request
// the coordinator negotiates included) and keeps it in a slot of this table. Submitting it
// (chorus::Submit) then costs
//   - one compare-and-swap on the slot's state word (which also puts its name in flight),
//   - a few stores into the slot's entry (the tensors' addresses, the callback),
//   - one compare-and-swap pushing the entry on the submission queue's lock-free stack,
// and no heap allocation, hashing, string copy or mutex. The background loop wakes once per
// burst, not per op (SubmissionQueue), and once the response cache knows the op, finds its
// cache bit through the slot (BackgroundLoop's bindings) instead of hashing its name. The
// handle of a registered op names its slot and the submission's sequence number, so Poll, Wait
// and Release read the slot instead of the handle table; completing a batch of such ops wakes
// the threads blocked on any of them once.
//
// A slot holds one op at a time: it is submitted again only after the previous op completed
// and its handle was released (AlreadyExists otherwise; a caller that cannot wait takes the
// general path, Enqueue, for that submission). While it is registered its name belongs to the
// slot and to Enqueue alike: whichever puts it in flight first holds it until its op
// completes, and the other is refused as a duplicate in-flight name, as two Enqueues are.
//
// The state word of a slot: the low 8 bits are the flags below, the rest counts the slot's
// submissions (so a stale handle never matches a later submission).
//
// Thread-safety: thread-safe. Register/Unregister take the table's mutex; the per-op calls
// are lock-free but for a thread that blocks (Wait, Release), which sleeps on a condition
// variable until a completion wakes it.
#ifndef CHORUS_RUNTIME_SUBMIT_OP_SLOTS_H_
#define CHORUS_RUNTIME_SUBMIT_OP_SLOTS_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "chorus/chorus.h"
#include "runtime/submit/tensor_entry.h"

namespace chorus::runtime {

// Flags of a slot's state word.
inline constexpr uint64_t kSlotInFlight = 1;      // its op was submitted and has not completed
inline constexpr uint64_t kSlotUnreleased = 2;    // its last op's handle was not released yet
inline constexpr uint64_t kSlotNameInFlight = 4;  // an Enqueue of its name is in flight
inline constexpr uint64_t kSlotUnregistered = 8;  // free (never registered, or unregistered)
inline constexpr int kSlotFlagBits = 8;
inline constexpr uint64_t kSlotFlagMask = (uint64_t{1} << kSlotFlagBits) - 1;

// Enqueue of a registered name (SubmissionQueue::Push): puts the name in flight unless the
// slot's op is in flight.
enum class NameClaim {
  kClaimed,       // the name is in flight now: ReleaseSlotName when the op completes
  kInFlight,      // the slot's op, or another Enqueue of the name, is in flight
  kUnregistered,  // the slot is being unregistered: the name is not the slot's any more
};
NameClaim ClaimSlotName(std::atomic<uint64_t>& state);
// The Enqueue'd op of a claimed name completed.
void ReleaseSlotName(std::atomic<uint64_t>& state);

// A slot's id (OpSlot): its index in the table in bits 0..23, the table's instance number
// (mod 128) in bits 24..30, so that a slot of an earlier runtime (before a Shutdown and Init)
// is not found in a later one. Handles of registered ops: bit 62 set, the submission's
// sequence number (mod 2^38) in bits 24..61, the slot's id in bits 0..23.
inline constexpr Handle kSlotHandleBit = Handle{1} << 62;
inline constexpr int kSlotIdBits = 24;
inline constexpr int32_t kMaxSlots = int32_t{1} << kSlotIdBits;
inline bool IsSlotHandle(Handle h) { return h > 0 && (h & kSlotHandleBit) != 0; }
// A slot's index in its table (dense from 0: for per-slot arrays).
inline size_t SlotIndex(int32_t id) { return static_cast<size_t>(id & (kMaxSlots - 1)); }

class SlotTable {
 public:
  // `on_block` (optional) runs when a thread is about to block on a registered op's handle
  // (Runtime: ends the loop's batching window); quick, and it takes no lock of this table.
  explicit SlotTable(std::function<void()> on_block = nullptr);
  ~SlotTable();
  SlotTable(const SlotTable&) = delete;
  SlotTable& operator=(const SlotTable&) = delete;

  struct Slot {
    std::atomic<uint64_t> state{kSlotUnregistered};
    // The op's entry while the slot holds it (idle, or between a submission's claim and its
    // push); the background loop holds it while the op is in flight. Its `slot` is this slot.
    std::unique_ptr<TensorEntry> entry;
    // The result of the last op (written before kSlotInFlight is cleared).
    absl::Status status;
    // What the op was checked against (Runtime): the world's generation and, for a process set
    // other than the global one, the process-set registry's version. Written by the thread
    // that holds the slot (registration, or a submission's claim).
    uint64_t world_generation = 0;
    uint64_t registry_version = 0;
    int64_t elements = 0;     // of the input (a submission's tensors must not be null if > 0)
    bool has_output = false;  // registered with an output tensor (not in place)
    // The op's kind and name, for errors (set by Add, constant while registered).
    OpType type = OpType::kAllreduce;
    std::string name;
  };

  // A free slot for `entry` (which the table takes; its `slot` is set), or ResourceExhausted
  // past kMaxSlots. The slot stays unregistered (Submit refuses it) until Activate.
  absl::StatusOr<int32_t> Add(std::unique_ptr<TensorEntry> entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Makes an Added slot submittable.
  void Activate(int32_t id);
  // Unregisters an idle slot: FailedPrecondition while its op is in flight or its handle
  // unreleased, NotFound for no such slot. The slot keeps its name until Recycle (the caller
  // forgets the name first).
  absl::Status Remove(int32_t id);
  // Gives an unregistered slot (Remove, or an Add never activated) to later registrations,
  // dropping its entry.
  void Recycle(int32_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // The slot (null for an id never added, or of another table). The pointer stays valid for
  // the table's life.
  Slot* Find(int32_t id) const {
    if (id < 0 || (id >> kSlotIdBits) != instance_) return nullptr;
    return At(id & (kMaxSlots - 1));
  }

  // Claims an idle registered slot for a submission: NotFound (no such slot), InvalidArgument
  // (its op, or an Enqueue of its name, is in flight), AlreadyExists (its last handle is not
  // released). On success the caller holds slot->entry until Push or Unclaim, and *handle is
  // the submission's handle.
  absl::Status Claim(int32_t id, Slot** slot, Handle* handle);
  // Undoes a Claim whose op was not queued (the entry is back in the slot).
  void Unclaim(Slot& slot);

  // Returns completed entries to their slots with their results, then wakes the threads
  // blocked on any of them. Any thread (the loop, the GPU completion thread).
  void Complete(std::vector<std::pair<std::unique_ptr<TensorEntry>, absl::Status>>* done)
      ABSL_LOCKS_EXCLUDED(wait_mu_);

  // Calls f(entry) for the entry of every slot that holds one (registered and idle, or added
  // and not yet activated). REQUIRES: no op of the table in flight (the runtime shut down).
  template <typename F>
  void ForEachEntry(F f) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    for (int32_t index = 0; index < next_index_; ++index) {
      Slot* slot = At(index);
      if (slot->entry != nullptr) f(*slot->entry);
    }
  }

  // As HandleTable's, for handles of registered ops (NotFound for a stale or unknown one).
  absl::StatusOr<bool> Poll(Handle handle) const;
  absl::Status Wait(Handle handle) const ABSL_LOCKS_EXCLUDED(wait_mu_);
  absl::StatusOr<OpResult> Release(Handle handle) ABSL_LOCKS_EXCLUDED(wait_mu_);
  absl::StatusOr<std::optional<OpResult>> TryRelease(Handle handle);

 private:
  static constexpr int kChunkBits = 12;
  static constexpr int32_t kChunkSize = int32_t{1} << kChunkBits;
  static constexpr size_t kChunks = static_cast<size_t>(kMaxSlots >> kChunkBits);

  // The slot a handle names and the state word it expects there (sequence, no flags);
  // nullptr when the handle names no slot.
  Slot* Resolve(Handle handle, uint64_t* seq) const;
  // Blocks until the slot's op (of sequence `seq`) is no longer in flight.
  void AwaitDone(Slot& slot) const ABSL_LOCKS_EXCLUDED(wait_mu_);
  absl::Status NotFound(Handle handle) const;
  // Release of a completed op: its result, and the slot free for the next submission.
  absl::StatusOr<OpResult> TakeResult(Handle handle, Slot& slot, uint64_t seq);

  // The slot at `index` (null when its chunk was never made).
  Slot* At(int32_t index) const {
    Slot* chunk = chunks_[static_cast<size_t>(index) >> kChunkBits].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : &chunk[index & (kChunkSize - 1)];
  }

  const std::function<void()> on_block_;
  const int32_t instance_;  // of this table, mod 128 (the ids' bits 24..30)
  Mutex mu_;                // registration
  std::array<std::atomic<Slot*>, kChunks> chunks_{};
  int32_t next_index_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;  // TensorEntry::registration
  std::vector<int32_t> free_ids_ ABSL_GUARDED_BY(mu_);
  // Threads blocked on a registered op wait here; completions notify only when there are some.
  mutable Mutex wait_mu_;
  mutable std::condition_variable done_cv_;
  mutable std::atomic<int32_t> waiters_{0};
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_SUBMIT_OP_SLOTS_H_
