// File: runtime/autotune/parameter_manager.h
//
// Autotune's search, as a state machine over sample scores (runtime/autotune/step_sampler.h
// measures them). Rank 0 runs one per world (an elastic job's generation); the loop applies its
// decisions on every rank in the same cycle (runtime/autotune/autotuner.h).
//
//   warm-up:   `warmup_samples` samples at the starting point, discarded (the first steps of a
//              job or of a new world are slow: allocation, caches, page faults);
//   search:    `max_samples` samples: the starting point, then the points the Bayesian
//              optimiser chooses (runtime/autotune/bayesian_optimizer.h) over the knob space
//              (runtime/autotune/knob_space.h);
//   done:      the sample of the best posterior mean is kept for the rest of the world.
//
// Every sample is one Record (a line of the autotune log); the choice is one more. best() is the
// point a new world's search starts from (docs/autotune.md, "Elastic jobs").
//
// Thread-safety: thread-compatible. Deterministic given its options (the seed included).
#ifndef CHORUS_RUNTIME_AUTOTUNE_PARAMETER_MANAGER_H_
#define CHORUS_RUNTIME_AUTOTUNE_PARAMETER_MANAGER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/autotune/bayesian_optimizer.h"
#include "runtime/autotune/knob_space.h"
#include "runtime/message.h"

namespace chorus::runtime {

struct AutotuneOptions {
  int warmup_samples = 3;  // >= 0
  int max_samples = 20;    // >= 1
  double noise = 0.8;      // the Gaussian process's, in [0, 1]
  uint64_t seed = 1;       // the optimiser's
};

// One line of the autotune log.
struct AutotuneRecord {
  enum class Phase { kWarmup, kSample, kBest };
  int64_t generation = 0;
  int sample = 0;  // 1, 2, ... within the phase (kBest: the index of the sample kept)
  Phase phase = Phase::kSample;
  TunedParameters parameters;
  double score = 0;  // bytes per second (kBest: the kept sample's)
};

const char* PhaseName(AutotuneRecord::Phase phase);

class ParameterManager {
 public:
  // Starts the search of world `generation` at `start` (made to conform to `space`).
  ParameterManager(KnobSpace space, TunedParameters start, AutotuneOptions options,
                   int64_t generation);

  // The parameters the next sample is measured with.
  const TunedParameters& current() const { return current_; }
  // The best point so far: the start until a sample is scored, then the sample of the best
  // posterior mean; the final choice once done.
  const TunedParameters& best() const { return best_; }
  bool done() const { return done_; }
  bool warming_up() const { return warmup_left_ > 0; }

  struct Decision {
    std::vector<AutotuneRecord> records;  // what to log: the sample, and the choice when done
    std::optional<TunedParameters> next;  // parameters to switch to; none: measure again as is
    bool done = false;                    // the search is over (next holds its choice)
  };
  // The score of one sample measured with current(). REQUIRES: !done().
  Decision Record(double score);

 private:
  KnobSpace space_;
  AutotuneOptions options_;
  int64_t generation_;
  BayesianOptimizer optimizer_;
  int warmup_left_;
  int warmups_ = 0;
  std::vector<TunedParameters> sampled_;  // the parameters of each search sample, in order
  TunedParameters current_;
  TunedParameters best_;
  bool done_ = false;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_AUTOTUNE_PARAMETER_MANAGER_H_
