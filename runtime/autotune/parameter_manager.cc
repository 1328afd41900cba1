#include "runtime/autotune/parameter_manager.h"

#include <algorithm>
#include <utility>

namespace chorus::runtime {

const char* PhaseName(AutotuneRecord::Phase phase) {
  switch (phase) {
    case AutotuneRecord::Phase::kWarmup:
      return "warmup";
    case AutotuneRecord::Phase::kSample:
      return "sample";
    case AutotuneRecord::Phase::kConfirm:
      return "confirm";
    case AutotuneRecord::Phase::kBest:
      return "best";
  }
  return "?";
}

int ConfirmPairs(const AutotuneOptions& options) {
  return std::clamp((options.max_samples - 2) / 2, 0, std::max(options.confirm_pairs, 0));
}

namespace {

BayesianOptimizerOptions OptimizerOptions(const AutotuneOptions& options) {
  BayesianOptimizerOptions o;
  o.noise = options.noise;
  o.seed = options.seed;
  return o;
}

}  // namespace

ParameterManager::ParameterManager(KnobSpace space, TunedParameters start, AutotuneOptions options,
                                   int64_t generation)
    : space_(std::move(space)),
      options_(options),
      generation_(generation),
      optimizer_(space_.BinaryDims(), OptimizerOptions(options)),
      warmup_left_(options.warmup_samples),
      pairs_(ConfirmPairs(options)),
      current_(space_.Conform(std::move(start))),
      best_(current_) {
  // Note [Binary knobs first].
  const std::vector<bool> binary = space_.BinaryDims();
  for (size_t d = 0; d < binary.size(); ++d) {
    if (!binary[d]) continue;
    std::vector<double> x = space_.Encode(current_);
    x[d] = x[d] >= 0.5 ? 0.0 : 1.0;
    probes_.push_back(space_.Decode(x));
  }
}

bool ParameterManager::StartsTurn(int i) {
  // Pairs (start, candidate), (candidate, start), (start, candidate), ...
  const int pair = i / 2;
  return (i % 2 == 0) == (pair % 2 == 0);
}

ParameterManager::Decision ParameterManager::Record(double score) {
  Decision d;
  if (warmup_left_ > 0) {
    --warmup_left_;
    d.records.push_back({generation_, ++warmups_, AutotuneRecord::Phase::kWarmup, current_, score});
    return d;
  }
  if (candidate_ >= 0) {
    // Confirming (Note [Confirming the choice]).
    const int i = static_cast<int>(start_scores_.size() + candidate_scores_.size());
    (StartsTurn(i) ? start_scores_ : candidate_scores_).push_back(score);
    d.records.push_back({generation_, i + 1, AutotuneRecord::Phase::kConfirm, current_, score});
    if (i + 1 < 2 * pairs_) {
      current_ = StartsTurn(i + 1) ? sampled_.front() : sampled_[static_cast<size_t>(candidate_)];
      d.next = current_;
      return d;
    }
    bool beaten_every_time = true;
    for (int p = 0; p < pairs_; ++p) {
      beaten_every_time = beaten_every_time && candidate_scores_[static_cast<size_t>(p)] >
                                                   start_scores_[static_cast<size_t>(p)];
    }
    Finish(beaten_every_time ? candidate_ : 0, &d);
    return d;
  }
  optimizer_.AddSample(space_.Encode(current_), score);
  sampled_.push_back(current_);
  const int n = static_cast<int>(sampled_.size());
  d.records.push_back({generation_, n, AutotuneRecord::Phase::kSample, current_, score});
  if (n < options_.max_samples - 2 * pairs_) {
    best_ = sampled_[static_cast<size_t>(optimizer_.BestSample())];
    const size_t probe = static_cast<size_t>(n - 1);  // after the start: probes_, in order
    current_ = probe < probes_.size() ? probes_[probe] : space_.Decode(optimizer_.NextSample());
    d.next = current_;
    return d;
  }
  if (pairs_ == 0) {
    Finish(optimizer_.BestSample(), &d);
    return d;
  }
  // The candidate: the best sample of a point other than the start.
  for (int i : optimizer_.SamplesByMean()) {
    if (sampled_[static_cast<size_t>(i)] == sampled_.front()) continue;
    candidate_ = i;
    break;
  }
  if (candidate_ < 0) {  // the optimiser proposed nothing but the start
    Finish(0, &d);
    return d;
  }
  best_ = sampled_.front();
  current_ = sampled_.front();  // StartsTurn(0)
  d.next = current_;
  return d;
}

void ParameterManager::Finish(int index, Decision* d) {
  done_ = true;
  d->done = true;
  best_ = sampled_[static_cast<size_t>(index)];
  current_ = best_;
  d->next = best_;
  d->records.push_back({generation_, index + 1, AutotuneRecord::Phase::kBest, best_,
                        optimizer_.scores()[static_cast<size_t>(index)]});
}

}  // namespace chorus::runtime
