// File: runtime/tensor_entry.h
//
// One submitted op as the runtime tracks it from Enqueue to its callback.
// Thread-safety: created by the submitting thread, then owned by the background thread.
#ifndef CHORUS_RUNTIME_TENSOR_ENTRY_H_
#define CHORUS_RUNTIME_TENSOR_ENTRY_H_

#include <functional>
#include <utility>

#include "absl/time/time.h"
#include "chorus/chorus.h"
#include "runtime/message.h"

namespace chorus::runtime {

struct TensorEntry {
  OpRequest op;     // what the caller asked for (borrowed tensor pointers)
  Request request;  // the negotiation request derived from `op`
  // Completed exactly once by the background thread: `done` (if set) runs with the result,
  // then the handle becomes done.
  Handle handle = 0;
  DoneCallback done;
  absl::Time enqueued_at;
  // GPU tensors: recorded on op.stream at Enqueue (ops::gpu::EventHandle); chorus reads the
  // tensors only after it. Destroyed when the entry completes.
  void* ready_event = nullptr;

  // Background-loop bookkeeping.
  int32_t cache_bit = -1;         // >= 0: waiting on the cache fast path at this bit
  bool in_unsent = false;          // listed in the loop's unsent_ (not yet sent to rank 0)
  absl::Time ready_at = absl::InfinitePast();  // when negotiation ended (set while tracing)
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

#endif  // CHORUS_RUNTIME_TENSOR_ENTRY_H_
