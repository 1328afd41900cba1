// File: runtime/flight/batch_metrics.h
//
// Note [Batch metrics]
// The totals of the batches this process finished, by op, over all its worlds (an elastic job's
// re-forms included, so the counts never go back): what `chorus.metrics` serves to Prometheus
// (docs/metrics.md). The flight recorder adds each batch when it ends (FlightRecorder::End,
// Note [Flight recorder]: the same moment and the same lock as its record), so the totals cost
// nothing per tensor, and they are off when the recorder is (CHORUS_FLIGHT_RECORDER_ENTRIES=0).
// A batch's duration is the recorder's: from its start on the loop to its end (a GPU batch: to
// the completion of its device work).
//
// Thread-safety: thread-safe (one mutex for the totals, taken once per batch; the cycle count is
// an atomic).
#ifndef CHORUS_RUNTIME_FLIGHT_BATCH_METRICS_H_
#define CHORUS_RUNTIME_FLIGHT_BATCH_METRICS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include "base/mutex.h"
#include "chorus/types.h"

namespace chorus::runtime {

// Upper bounds (seconds) of the batch-duration histogram's buckets; one more bucket holds the
// rest (+Inf).
inline constexpr std::array<double, 7> kBatchSecondsBounds = {1e-4, 1e-3, 1e-2, 0.1,
                                                              1.0,  10.0, 100.0};
// Every OpType, by its value.
inline constexpr size_t kOpTypeCount = static_cast<size_t>(OpType::kRemoveProcessSet) + 1;

struct OpTotals {
  int64_t batches = 0;  // done
  int64_t failed = 0;   // batches that failed
  int64_t tensors = 0;  // of the done batches
  int64_t bytes = 0;    // what the done batches moved (ResponseBytes)
  double seconds = 0;   // the done batches' durations, summed
  // Done batches by duration: bucket i holds those above bound i-1, up to bound i (not
  // cumulative); the last holds those above every bound.
  std::array<int64_t, kBatchSecondsBounds.size() + 1> buckets{};
};

struct BatchTotals {
  std::array<OpTotals, kOpTypeCount> by_op{};
  int64_t cycles = 0;  // background cycles run
};

class BatchMetrics {
 public:
  BatchMetrics() = default;
  BatchMetrics(const BatchMetrics&) = delete;
  BatchMetrics& operator=(const BatchMetrics&) = delete;

  // A batch of `type` ended after `took`: done (`ok`) with `tensors` tensors moving `bytes`, or
  // failed.
  void Add(OpType type, int32_t tensors, int64_t bytes, absl::Duration took, bool ok);
  // One background cycle ran.
  void AddCycle() { cycles_.fetch_add(1, std::memory_order_relaxed); }
  BatchTotals Read() const;

 private:
  mutable Mutex mu_;
  std::array<OpTotals, kOpTypeCount> by_op_ ABSL_GUARDED_BY(mu_){};
  std::atomic<int64_t> cycles_{0};
};

// The totals as one JSON object (docs/metrics.md): {"rank", "size", "controller", "cycles",
// "bucket_bounds", "ops": {"allreduce": {"batches", "failed", "tensors", "bytes", "seconds",
// "buckets"}, ...}}, with only the ops that ran.
std::string FormatBatchTotals(const BatchTotals& totals, int32_t rank, int32_t size,
                              const std::string& controller);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_FLIGHT_BATCH_METRICS_H_
