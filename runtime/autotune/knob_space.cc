#include "runtime/autotune/knob_space.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace chorus::runtime {
namespace {

constexpr double kKiB = 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// Position of `value` in [lo, hi] on a log2 scale, in [0, 1].
double LogPosition(double value, double lo, double hi) {
  const double v = std::clamp(value, lo, hi);
  return std::log2(v / lo) / std::log2(hi / lo);
}

// The value at position `t` of [lo, hi] on a log2 scale.
double LogValue(double t, double lo, double hi) {
  return lo * std::exp2(std::clamp(t, 0.0, 1.0) * std::log2(hi / lo));
}

// `value` rounded to a multiple of `unit`, kept within [lo, hi].
int64_t RoundTo(double value, double unit, double lo, double hi) {
  const double rounded = std::round(value / unit) * unit;
  return static_cast<int64_t>(std::clamp(rounded, lo, hi));
}

}  // namespace

KnobSpace::KnobSpace(bool hierarchical_allreduce) {
  knobs_ = {
      {Knob::kFusionThreshold, "fusion_threshold_bytes", 64 * kKiB, 256 * kMiB, false},
      {Knob::kPipelineChunk, "pipeline_chunk_bytes", 64 * kKiB, 64 * kMiB, false},
      {Knob::kInplaceMin, "inplace_min_bytes", 4 * kKiB, 64 * kMiB, false},
      {Knob::kCycleTime, "cycle_time_ms", 100.0, 25000.0, false},
  };
  if (hierarchical_allreduce) {
    knobs_.push_back({Knob::kHierarchical, "hierarchical_allreduce", 0, 1, true});
  }
}

std::vector<bool> KnobSpace::BinaryDims() const {
  std::vector<bool> binary;
  for (const KnobRange& k : knobs_) binary.push_back(k.binary);
  return binary;
}

std::vector<double> KnobSpace::Encode(const TunedParameters& p) const {
  std::vector<double> x;
  x.reserve(knobs_.size());
  for (const KnobRange& k : knobs_) {
    switch (k.knob) {
      case Knob::kFusionThreshold:
        x.push_back(LogPosition(static_cast<double>(p.fusion_threshold_bytes), k.lo, k.hi));
        break;
      case Knob::kPipelineChunk:
        x.push_back(LogPosition(static_cast<double>(p.pipeline_chunk_bytes), k.lo, k.hi));
        break;
      case Knob::kInplaceMin:
        x.push_back(LogPosition(static_cast<double>(p.inplace_min_bytes), k.lo, k.hi));
        break;
      case Knob::kCycleTime:
        x.push_back(LogPosition(absl::ToDoubleMicroseconds(p.cycle_time), k.lo, k.hi));
        break;
      case Knob::kHierarchical:
        x.push_back(p.hierarchical_allreduce.value_or(false) ? 1.0 : 0.0);
        break;
    }
  }
  return x;
}

TunedParameters KnobSpace::Decode(const std::vector<double>& x) const {
  TunedParameters p;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const KnobRange& k = knobs_[i];
    const double v = k.binary ? 0 : LogValue(x[i], k.lo, k.hi);
    switch (k.knob) {
      case Knob::kFusionThreshold:
        p.fusion_threshold_bytes = RoundTo(v, 4 * kKiB, k.lo, k.hi);
        break;
      case Knob::kPipelineChunk:
        p.pipeline_chunk_bytes = RoundTo(v, 4 * kKiB, k.lo, k.hi);
        break;
      case Knob::kInplaceMin:
        p.inplace_min_bytes = RoundTo(v, kKiB, k.lo, k.hi);
        break;
      case Knob::kCycleTime:
        p.cycle_time = absl::Microseconds(RoundTo(v, 1.0, k.lo, k.hi));
        break;
      case Knob::kHierarchical:
        p.hierarchical_allreduce = x[i] >= 0.5;
        break;
    }
  }
  return p;
}

TunedParameters KnobSpace::Conform(TunedParameters p) const {
  if (has_hierarchical()) {
    p.hierarchical_allreduce = p.hierarchical_allreduce.value_or(false);
  } else {
    p.hierarchical_allreduce.reset();
  }
  return p;
}

TunedParameters CurrentParameters(const SharedConfig& shared, absl::Duration cycle_time) {
  TunedParameters p;
  p.fusion_threshold_bytes = shared.fusion_threshold_bytes;
  p.pipeline_chunk_bytes = shared.pipeline_chunk_bytes;
  p.inplace_min_bytes = shared.inplace_min_bytes;
  p.cycle_time = cycle_time;
  p.hierarchical_allreduce = shared.hierarchical_allreduce;
  return p;
}

std::string DescribeParameters(const TunedParameters& p) {
  std::string text = absl::StrCat("fusion_threshold_bytes=", p.fusion_threshold_bytes,
                                  " pipeline_chunk_bytes=", p.pipeline_chunk_bytes,
                                  " inplace_min_bytes=", p.inplace_min_bytes,
                                  " cycle_time_ms=", absl::ToDoubleMilliseconds(p.cycle_time));
  if (p.hierarchical_allreduce.has_value()) {
    absl::StrAppend(&text, " hierarchical_allreduce=", *p.hierarchical_allreduce ? 1 : 0);
  }
  return text;
}

}  // namespace chorus::runtime
