#include "runtime/flight/batch_metrics.h"

#include <algorithm>
#include <string>

#include "nlohmann/json.hpp"

namespace chorus::runtime {

void BatchMetrics::Add(OpType type, int32_t tensors, int64_t bytes, absl::Duration took, bool ok) {
  const size_t op = static_cast<size_t>(type);
  if (op >= kOpTypeCount) return;
  const double seconds = std::max(0.0, absl::ToDoubleSeconds(took));
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(kBatchSecondsBounds.begin(), kBatchSecondsBounds.end(), seconds) -
      kBatchSecondsBounds.begin());
  MutexLock lock(&mu_);
  OpTotals& t = by_op_[op];
  if (!ok) {
    ++t.failed;
    return;
  }
  ++t.batches;
  t.tensors += tensors;
  t.bytes += bytes;
  t.seconds += seconds;
  ++t.buckets[bucket];
}

BatchTotals BatchMetrics::Read() const {
  BatchTotals out;
  {
    MutexLock lock(&mu_);
    out.by_op = by_op_;
  }
  out.cycles = cycles_.load(std::memory_order_relaxed);
  return out;
}

std::string FormatBatchTotals(const BatchTotals& totals, int32_t rank, int32_t size,
                              const std::string& controller) {
  using nlohmann::json;
  json ops = json::object();
  for (size_t op = 0; op < kOpTypeCount; ++op) {
    const OpTotals& t = totals.by_op[op];
    if (t.batches == 0 && t.failed == 0) continue;
    ops[OpTypeName(static_cast<OpType>(op))] = {{"batches", t.batches}, {"failed", t.failed},
                                                {"tensors", t.tensors}, {"bytes", t.bytes},
                                                {"seconds", t.seconds}, {"buckets", t.buckets}};
  }
  const json out = {{"rank", rank},
                    {"size", size},
                    {"controller", controller},
                    {"cycles", totals.cycles},
                    {"bucket_bounds", kBatchSecondsBounds},
                    {"ops", ops}};
  return out.dump();
}

}  // namespace chorus::runtime
