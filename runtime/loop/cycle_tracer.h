// File: runtime/loop/cycle_tracer.h
//
// The background loop's timeline records: when a request became known and negotiated, and for
// each executed response its QUEUE, memcpy, collective, CALLBACK and whole-op spans. Every call
// does nothing while the timeline is inactive, so the loop calls them unconditionally.
//
// Per executed response: Start (before it runs), Executed (after the collective), Completed
// (after its callbacks). The executor reports its spans into spans().
//
// Thread-safety: none; the background loop's thread owns it.
#ifndef CHORUS_RUNTIME_LOOP_CYCLE_TRACER_H_
#define CHORUS_RUNTIME_LOOP_CYCLE_TRACER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "ops/collective_backend.h"
#include "runtime/execute/executor.h"
#include "runtime/message.h"
#include "runtime/submit/tensor_entry.h"
#include "timeline/timeline.h"

namespace chorus::runtime {

class CycleTracer {
 public:
  // Borrows `timeline` (it outlives the tracer).
  explicit CycleTracer(timeline::Timeline* timeline) : timeline_(timeline) {}

  bool active() const { return timeline_->active(); }
  // absl::Now() while tracing, else InfinitePast (no clock read).
  absl::Time Now() const { return active() ? absl::Now() : absl::InfinitePast(); }

  // `rank` submitted `name` at `at`.
  void RequestKnown(const std::string& name, int32_t rank, absl::Time at);
  // The entry's response is known at `at` (from the cache's bit vector when `cached`).
  void Negotiated(TensorEntry& entry, absl::Time at, bool cached);

  // Before `response` runs; entries[i] is this rank's entry of its i-th name (null: not held
  // here).
  void Start(const Response& response, absl::Span<TensorEntry* const> entries);
  // Where the executor records what it did (null while not tracing).
  std::vector<ExecutionSpan>* spans() { return active() ? &spans_ : nullptr; }
  // After the collective of the response passed to Start, which ran on `backend` (null: this
  // rank has none for its process set).
  void Executed(const Response& response, const ops::CollectiveBackend* backend);
  // After the response's callbacks ran.
  void Completed(const Response& response);

 private:
  // A traced tensor of the response in progress, by name index (row -1: not held here).
  struct TracedTensor {
    int32_t row = -1;
    absl::Time ready_at;
    timeline::OpArgs args;
  };

  timeline::Timeline* timeline_;
  std::vector<TracedTensor> traced_;
  std::vector<ExecutionSpan> spans_;
  absl::Time started_;
  absl::Time executed_;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_LOOP_CYCLE_TRACER_H_
