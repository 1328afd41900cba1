// File: runtime/tensor_entry.h
//
// One submitted op as the runtime tracks it from Enqueue to its callback.
// Thread-safety: created by the submitting thread, then owned by the background thread.
#ifndef CHORUS_RUNTIME_TENSOR_ENTRY_H_
#define CHORUS_RUNTIME_TENSOR_ENTRY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "chorus/chorus.h"
#include "runtime/message.h"

namespace chorus::runtime {

// Empties `s` (a string or vector) and returns it with its buffer.
template <typename T>
T Emptied(T& s) {
  T out = std::move(s);
  out.clear();
  return out;
}

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

  // Back to the state of a new entry (for reuse, see EntryPool), except that the strings and
  // vectors of `op` and `request` keep their heap buffers (empty) so that refilling them need
  // not allocate (Runtime::MakeEntry swaps `op`'s with the submitted request's). Every member
  // above is reset here.
  void ResetForReuse() {
    OpRequest fresh_op;
    fresh_op.name = Emptied(op.name);
    fresh_op.input.shape = Emptied(op.input.shape);
    fresh_op.output.shape = Emptied(op.output.shape);
    fresh_op.splits = Emptied(op.splits);
    fresh_op.process_set_ranks = Emptied(op.process_set_ranks);
    op = std::move(fresh_op);
    Request fresh_request;
    fresh_request.name = Emptied(request.name);
    fresh_request.shape = Emptied(request.shape);
    request = std::move(fresh_request);
    handle = 0;
    done = nullptr;
    enqueued_at = absl::Time();
    ready_event = nullptr;
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

#endif  // CHORUS_RUNTIME_TENSOR_ENTRY_H_
