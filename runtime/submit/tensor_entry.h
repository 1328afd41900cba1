// File: runtime/submit/tensor_entry.h
//
// One submitted op as the runtime tracks it from Enqueue to its callback.
// Thread-safety: created by the submitting thread, then owned by the background thread.
#ifndef CHORUS_RUNTIME_SUBMIT_TENSOR_ENTRY_H_
#define CHORUS_RUNTIME_SUBMIT_TENSOR_ENTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

#include "chorus/chorus.h"
#include "runtime/message.h"

namespace chorus::runtime {

// Back to a default-constructed view, keeping the shape's buffer.
inline void ResetKeepingBuffers(TensorView& v) {
  v.data = nullptr;
  v.dtype = DataType::kFloat32;
  v.shape.clear();
  v.device = kCpuDevice;
}

// Back to a default-constructed OpRequest, field by field (assigning a fresh one costs more
// than the whole of Enqueue's checks), keeping the buffers of its strings and vectors.
inline void ResetKeepingBuffers(OpRequest& r) {
  r.type = OpType::kAllreduce;
  r.name.clear();
  ResetKeepingBuffers(r.input);
  ResetKeepingBuffers(r.output);
  r.reduce_op = ReduceOp::kSum;
  r.prescale_factor = 1.0;
  r.postscale_factor = 1.0;
  r.root_rank = 0;
  r.process_set_id = kGlobalProcessSetId;
  r.splits.clear();
  r.process_set_ranks.clear();
  r.stream = nullptr;
  r.wire_dtype.reset();
}

// The same for a Request.
inline void ResetKeepingBuffers(Request& r) {
  r.request_rank = 0;
  r.type = OpType::kAllreduce;
  r.name.clear();
  r.dtype = DataType::kFloat32;
  r.shape.clear();
  r.reduce_op = ReduceOp::kSum;
  r.prescale_factor = 1.0;
  r.postscale_factor = 1.0;
  r.root_rank = 0;
  r.device = kCpuDevice;
  r.process_set_id = kGlobalProcessSetId;
  r.group_key.clear();
  r.group_size = 0;
  r.splits.clear();
  r.process_set_ranks.clear();
  r.wire_dtype = -1;
}

#if defined(__x86_64__) && defined(__GLIBCXX__)
// A field added to one of these structs must be reset above (and in entry_pool_test.cc).
static_assert(sizeof(TensorView) == 48 && sizeof(OpRequest) == 232 && sizeof(Request) == 208,
              "update ResetKeepingBuffers for the new field");
#endif

struct TensorEntry {
  OpRequest op;     // what the caller asked for (borrowed tensor pointers)
  Request request;  // the negotiation request derived from `op`
  // Completed exactly once by the background thread: `done` (if set) runs with the result,
  // then the handle becomes done.
  Handle handle = 0;
  DoneCallback done;
  // When submitted (with a timeline configured), else when the background loop took it.
  absl::Time enqueued_at;
  // GPU tensors: recorded on op.stream at Enqueue (ops::gpu::EventHandle); chorus reads the
  // tensors only after it. Destroyed when the entry completes, but a registered op's, which
  // every submission records again and which goes with its registration.
  void* ready_event = nullptr;
  // The runtime's recording counter just before and just after ready_event was recorded: which
  // events of a batch one wait covers (runtime/gpu/ready_waits.h).
  uint64_t ready_begin = 0;
  uint64_t ready_end = 0;

  // A registered op's entry (Note [Registered ops] in runtime/submit/op_slots.h): its slot; it goes
  // back there when the op completes. -1: an Enqueue'd op, recycled through the EntryPool.
  int32_t slot = -1;
  // Which registration of that slot (a slot given to a new registration counts anew).
  uint64_t registration = 0;
  // An Enqueue'd op whose name is registered: the state word of the slot whose name it holds
  // in flight (SubmissionQueue).
  std::atomic<uint64_t>* claimed_name = nullptr;
  // The link of the submission queue's lock-free stack of registered ops.
  TensorEntry* next_submitted = nullptr;

  // Background-loop bookkeeping.
  int32_t cache_bit = -1;  // >= 0: waiting on the cache fast path at this bit
  bool in_unsent = false;  // listed in the loop's unsent_ (not yet sent to rank 0)
  absl::Time ready_at = absl::InfinitePast();  // when negotiation ended (set while tracing)

  // Back to the state of a new entry (for reuse, see EntryPool), except that the strings and
  // vectors of `op` and `request` keep their heap buffers (empty) so that refilling them need
  // not allocate (Runtime::MakeEntry swaps `op`'s with the submitted request's). Every member
  // above is reset here.
  void ResetForReuse() {
    ResetKeepingBuffers(op);
    ResetKeepingBuffers(request);
    handle = 0;
    done = nullptr;
    enqueued_at = absl::Time();
    ready_event = nullptr;
    ready_begin = 0;
    ready_end = 0;
    claimed_name = nullptr;
    next_submitted = nullptr;
    cache_bit = -1;
    in_unsent = false;
    ready_at = absl::InfinitePast();
  }
  // A registered op's entry before its next submission: the per-submission fields back to
  // their initial values (its request and slot stay, and its ready event, recorded anew by each
  // submission).
  void ResetForSubmission() {
    handle = 0;
    done = nullptr;
    enqueued_at = absl::Time();
    next_submitted = nullptr;
    cache_bit = -1;
    in_unsent = false;
    ready_at = absl::InfinitePast();
  }
};

// Where an allreduce result goes: the explicit output, else the input (in place).
inline void* OutputOf(const TensorEntry& entry) {
  return entry.op.output.data != nullptr ? entry.op.output.data : entry.op.input.data;
}

// A result carrying only a status (a failed or status-only op).
inline OpResult StatusResult(absl::Status status) {
  OpResult result;
  result.status = std::move(status);
  return result;
}

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_SUBMIT_TENSOR_ENTRY_H_
