#include "runtime/autotune/parameter_manager.h"

#include <utility>

namespace chorus::runtime {

const char* PhaseName(AutotuneRecord::Phase phase) {
  switch (phase) {
    case AutotuneRecord::Phase::kWarmup:
      return "warmup";
    case AutotuneRecord::Phase::kSample:
      return "sample";
    case AutotuneRecord::Phase::kBest:
      return "best";
  }
  return "?";
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
      current_(space_.Conform(std::move(start))),
      best_(current_) {}

ParameterManager::Decision ParameterManager::Record(double score) {
  Decision d;
  if (warmup_left_ > 0) {
    --warmup_left_;
    d.records.push_back({generation_, ++warmups_, AutotuneRecord::Phase::kWarmup, current_, score});
    return d;
  }
  optimizer_.AddSample(space_.Encode(current_), score);
  sampled_.push_back(current_);
  const int n = static_cast<int>(sampled_.size());
  d.records.push_back({generation_, n, AutotuneRecord::Phase::kSample, current_, score});
  const int best = optimizer_.BestSample();
  best_ = sampled_[best];
  if (n >= options_.max_samples) {
    done_ = true;
    d.done = true;
    current_ = best_;
    d.next = best_;
    d.records.push_back(
        {generation_, best + 1, AutotuneRecord::Phase::kBest, best_, optimizer_.scores()[best]});
    return d;
  }
  current_ = space_.Decode(optimizer_.NextSample());
  d.next = current_;
  return d;
}

}  // namespace chorus::runtime
