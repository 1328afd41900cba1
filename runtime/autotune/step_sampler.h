// File: runtime/autotune/step_sampler.h
//
// Turns the background loop's cycles into autotune's samples: the bytes the job reduces per
// second over a number of training steps (Note [Autotune steps]).
//
// Note [Autotune steps]
// chorus does not see training steps, only cycles and the tensors each one executes. A step
// begins where a tensor name repeats: the cycle that executes a tensor already executed since the
// current step began starts the next step (a model's gradients are each reduced once per step,
// in however many cycles the parameters cut the step into). Counting cycles instead would make a
// sample's length depend on the very knobs being tuned: a smaller fusion threshold or cycle time
// cuts a step into more cycles, so a sample of N cycles would span fewer steps and end at another
// point of a step. A step runs from the start of the cycle that begins it to the start of the
// cycle that begins the next one: the time between steps (the forward and backward passes) counts
// in full. A sample is N steps; its score is the median over them of a step's bytes over its
// time, so it is proportional to steps per second whatever the parameters, and one step stalled
// by something else on the machine (another process, a page fault storm) does not decide it.
// A change of parameters discards the step in progress (it ran partly under the old ones): the
// next sample begins with the first step that starts after the change. Back-to-back samples
// under the same parameters share their boundary.
// Ops named afresh each time (Python's unnamed ops, "allreduce.noname.<n>") never repeat: once
// 4096 distinct names have gone by without a repeat, every cycle that executes tensors counts as
// a step from then on (right for a job that runs its ops for a step in one burst).
// Only data ops count (not barriers, joins, process-set changes or error responses); a
// response's bytes are its tensors' sizes as negotiated.
//
// Thread-safety: thread-compatible (rank 0's loop thread).
#ifndef CHORUS_RUNTIME_AUTOTUNE_STEP_SAMPLER_H_
#define CHORUS_RUNTIME_AUTOTUNE_STEP_SAMPLER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "runtime/message.h"

namespace chorus::runtime {

class StepSampler {
 public:
  // Distinct names without a repeat after which every cycle with work counts as a step.
  static constexpr size_t kMaxNamesPerStep = 4096;

  // REQUIRES: steps_per_sample >= 1.
  explicit StepSampler(int steps_per_sample);

  // The parameters change in this cycle: drops the step in progress and the open sample.
  void Restart();
  // One cycle that began at `cycle_start` and executed `plan`. Returns the sample's score, in
  // bytes per second (the median of its steps'), when this cycle begins the step that completes
  // a sample (it then begins the next sample too); nothing otherwise.
  std::optional<double> OnCycle(absl::Time cycle_start, absl::Span<const Response> plan);

  // Whether every cycle with work counts as a step (no name repeated: see the Note).
  bool counts_cycles() const { return counting_cycles_; }

 private:
  int steps_per_sample_;
  bool counting_cycles_ = false;
  // Hashes of the names executed since the current step began.
  absl::flat_hash_set<size_t> seen_;
  std::vector<size_t> repeated_;  // scratch: this cycle's names seen before
  bool open_ = false;             // a step has begun at step_start_
  absl::Time step_start_;
  int64_t bytes_ = 0;          // bytes of the step in progress so far
  std::vector<double> rates_;  // bytes per second of each completed step of the open sample
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_AUTOTUNE_STEP_SAMPLER_H_
