// File: runtime/autotune/knob_space.h
//
// The knobs autotune turns and the space its optimiser searches: each knob's range, scale and
// rounding, and the map between TunedParameters (runtime/message.h) and points of the unit cube
// [0, 1]^d that the Gaussian process works on (runtime/autotune/bayesian_optimizer.h).
//
//   knob                     range               scale  rounded to
//   fusion threshold         64 KiB .. 256 MiB   log2   4 KiB
//   pipeline chunk bytes     64 KiB .. 64 MiB    log2   4 KiB
//   in-place minimum bytes   4 KiB .. 64 MiB     log2   1 KiB
//   cycle time               0.1 ms .. 25 ms     log2   1 us
//   hierarchical allreduce   off, on             binary (only where it applies to the world)
//
// The byte knobs act through fusion planning and the executor (runtime/execute/fusion_planner.h,
// runtime/execute/executor.h), the cycle time through the loop's batching window
// (runtime/loop/cycle_policy.h); hierarchical allreduce through
// SharedConfig::hierarchical_allreduce, which the loop hands to each hierarchical set's backend per
// batch. Whether it applies (the world's layout lets it run:
// BackgroundLoop::HierarchicalAllreduceApplies) is the caller's to say: the knob is then one more
// dimension of the search, and absent otherwise.
//
// Thread-safety: a plain value (thread-compatible); the functions are pure.
#ifndef CHORUS_RUNTIME_AUTOTUNE_KNOB_SPACE_H_
#define CHORUS_RUNTIME_AUTOTUNE_KNOB_SPACE_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

#include "runtime/message.h"

namespace chorus::runtime {

enum class Knob { kFusionThreshold, kPipelineChunk, kInplaceMin, kCycleTime, kHierarchical };

struct KnobRange {
  Knob knob;
  const char* name;  // as in the autotune log's header
  double lo;         // bytes, or microseconds for the cycle time; unused for a binary knob
  double hi;
  bool binary;  // off/on: 0 or 1 in the cube
};

class KnobSpace {
 public:
  // The four numeric knobs, and hierarchical allreduce when `hierarchical_allreduce` applies.
  explicit KnobSpace(bool hierarchical_allreduce);

  int dims() const { return static_cast<int>(knobs_.size()); }
  const std::vector<KnobRange>& knobs() const { return knobs_; }
  // Which dimensions are binary (0 or 1).
  std::vector<bool> BinaryDims() const;
  bool has_hierarchical() const { return knobs_.size() > 4; }

  // The point of `p` in [0, 1]^d (values outside a knob's range are clamped to it).
  std::vector<double> Encode(const TunedParameters& p) const;
  // The parameters at point `x` of the cube, rounded to what the runtime runs with. Without the
  // hierarchical knob, hierarchical_allreduce is absent. REQUIRES: x.size() == dims().
  TunedParameters Decode(const std::vector<double>& x) const;
  // `p` with hierarchical_allreduce present exactly when this space tunes it (off when it was
  // absent).
  TunedParameters Conform(TunedParameters p) const;

 private:
  std::vector<KnobRange> knobs_;
};

// The parameters in force under `shared` and a loop cycle time of `cycle_time`.
TunedParameters CurrentParameters(const SharedConfig& shared, absl::Duration cycle_time);

// "fusion_threshold_bytes=... pipeline_chunk_bytes=... inplace_min_bytes=... cycle_time_ms=..."
// (and "hierarchical_allreduce=0|1" when present), for log lines.
std::string DescribeParameters(const TunedParameters& p);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_AUTOTUNE_KNOB_SPACE_H_
