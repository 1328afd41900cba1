#include "runtime/autotune/step_sampler.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "chorus/types.h"
#include "runtime/submit/name_hash.h"

namespace chorus::runtime {

StepSampler::StepSampler(int steps_per_sample) : steps_per_sample_(steps_per_sample) {}

void StepSampler::Restart() {
  seen_.clear();
  open_ = false;
  bytes_ = 0;
  rates_.clear();
}

std::optional<double> StepSampler::OnCycle(absl::Time cycle_start,
                                           absl::Span<const Response> plan) {
  int64_t bytes = 0;
  bool work = false;
  repeated_.clear();
  for (const Response& r : plan) {
    if (r.is_error() || !IsDataOp(r.type)) continue;
    work = true;
    const int64_t esize = static_cast<int64_t>(DataTypeSize(r.dtype));
    for (const std::vector<int64_t>& shape : r.shapes) bytes += NumElements(shape) * esize;
    if (counting_cycles_) continue;
    for (const std::string& name : r.names) {
      const size_t hash = HashName(name);
      if (!seen_.insert(hash).second) repeated_.push_back(hash);
    }
  }
  if (!work) return std::nullopt;

  bool begins_step = counting_cycles_;
  if (!counting_cycles_ && !repeated_.empty()) {
    // The repeated names begin the next step; the others ended the previous one.
    begins_step = true;
    seen_.clear();
    seen_.insert(repeated_.begin(), repeated_.end());
  } else if (!counting_cycles_ && seen_.size() >= kMaxNamesPerStep) {
    counting_cycles_ = true;
    seen_.clear();
    begins_step = true;
  }
  if (!begins_step) {
    bytes_ += bytes;
    return std::nullopt;
  }
  std::optional<double> score;
  if (open_) {
    // The step that began at step_start_ ends here.
    const double seconds = absl::ToDoubleSeconds(cycle_start - step_start_);
    rates_.push_back(seconds > 0 ? static_cast<double>(bytes_) / seconds : 0.0);
    if (static_cast<int>(rates_.size()) == steps_per_sample_) {
      const size_t mid = rates_.size() / 2;
      std::nth_element(rates_.begin(), rates_.begin() + static_cast<std::ptrdiff_t>(mid),
                       rates_.end());
      double median = rates_[mid];
      if (rates_.size() % 2 == 0) {
        median = (median + *std::max_element(rates_.begin(),
                                             rates_.begin() + static_cast<std::ptrdiff_t>(mid))) /
                 2;
      }
      score = median;
      rates_.clear();
    }
  }
  open_ = true;
  step_start_ = cycle_start;
  bytes_ = bytes;
  return score;
}

}  // namespace chorus::runtime
