// File: runtime/autotune/parameter_manager.h
//
// Autotune's search, as a state machine over sample scores (runtime/autotune/step_sampler.h
// measures them). Rank 0 runs one per world (an elastic job's generation); the loop applies its
// decisions on every rank in the same cycle (runtime/autotune/autotuner.h).
//
//   warm-up:   `warmup_samples` samples at the starting point, discarded (the first steps of a
//              job or of a new world are slow: allocation, caches, page faults);
//   search:    `max_samples` - 2 x pairs samples (pairs = ConfirmPairs(options)): the starting
//              point, then the start with each binary knob switched (Note [Binary knobs first]),
//              then the points the Bayesian optimiser chooses
//              (runtime/autotune/bayesian_optimizer.h) over the knob space
//              (runtime/autotune/knob_space.h);
//   confirm:   the candidate (the sample of the best posterior mean other than the start) and
//              the start, measured in alternation, in `pairs` pairs of adjacent samples whose
//              order alternates (start first, then candidate first, ...), so that a drift in the
//              machine's speed favours neither; (Note [Confirming the choice]);
//   done:      the candidate is kept if it scored above the start in every pair, else the start.
// Without pairs (max_samples < 4, or confirm_pairs 0) the search's best sample is kept as is.
//
// Note [Confirming the choice]
// On a flat landscape with noise larger than the differences, the sample of the best posterior
// mean is often a lucky measurement of a point no better than the start, and keeping it would end
// the search worse than it began. So the start must be beaten again, head to head, by the
// candidate: in each pair the two samples are adjacent in time; one pair won by chance has odds
// of one half, all of 3 pairs one eighth, for a candidate no better than the start. The pairs
// come out of the same budget of `max_samples` samples, so a search's length does not change,
// and there are exactly `max_samples` samples unless every sample of the search measured the
// start (then there is no candidate, and the start is kept).
//
// Note [Binary knobs first]
// A binary knob (hierarchical allreduce) splits the space in two regions whose landscapes can
// differ wholesale: on 2 hosts x 2 ranks at 2 Gbit/s, every hierarchical point with a 1-4 MiB
// chunk ran 1.4x as fast as every flat one, while a flat start's other knobs hardly mattered. The
// optimiser, left to itself, samples the other value only with other knobs drawn far from the
// start (its expected improvement favours the unexplored corners), scores it badly for those,
// and never comes back. So, as Horovod tunes a categorical parameter by trying each of its
// values, the second sample is the start with the knob switched: the two values are compared
// where everything else is equal, and the Gaussian process sees that difference first. It is
// a search sample like any other (it counts against max_samples, and can be the choice).
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
  int confirm_pairs = 3;   // >= 0: at most this many pairs confirm the choice
};

// The pairs of samples that confirm the choice: confirm_pairs, as many as leave the search two
// samples (the start and one more) of max_samples.
int ConfirmPairs(const AutotuneOptions& options);

// One line of the autotune log.
struct AutotuneRecord {
  enum class Phase { kWarmup, kSample, kConfirm, kBest };
  int64_t generation = 0;
  int sample = 0;  // 1, 2, ... within the phase (kBest: the number of the search sample kept)
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
  // posterior mean; the start while the choice is confirmed; the final choice once done.
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
  // Ends the search at sample `index` (of sampled_), with its search score.
  void Finish(int index, Decision* d);
  // Whether the `i`th confirming sample (0-based) measures the start (else the candidate).
  static bool StartsTurn(int i);

  KnobSpace space_;
  AutotuneOptions options_;
  int64_t generation_;
  BayesianOptimizer optimizer_;
  int warmup_left_;
  int warmups_ = 0;
  std::vector<TunedParameters> sampled_;  // the parameters of each search sample, in order
  std::vector<TunedParameters> probes_;   // the start with one binary knob switched, each
  int pairs_;                             // ConfirmPairs(options_)
  int candidate_ = -1;                    // confirming: the index of the candidate in sampled_
  std::vector<double> start_scores_;      // confirming: the start's scores, one per pair
  std::vector<double> candidate_scores_;  // and the candidate's
  TunedParameters current_;
  TunedParameters best_;
  bool done_ = false;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_AUTOTUNE_PARAMETER_MANAGER_H_
