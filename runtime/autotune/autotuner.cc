#include "runtime/autotune/autotuner.h"

#include <utility>

#include "base/logging.h"

namespace chorus::runtime {
namespace {

AutotuneOptions OptionsFor(const Config& config, int64_t generation) {
  AutotuneOptions o;
  o.warmup_samples = config.autotune_warmup_samples;
  o.max_samples = config.autotune_bayes_opt_max_samples;
  o.noise = config.autotune_gaussian_process_noise;
  // A fixed seed per world: runs with the same scores make the same choices.
  o.seed = 0x6175746f74756e65ULL + static_cast<uint64_t>(generation);
  return o;
}

}  // namespace

Autotuner::Autotuner(const Config& config, bool decides, std::unique_ptr<AutotuneLog> log,
                     int64_t generation, bool hierarchical_allreduce, AutotuneMemory* memory)
    : decides_(decides),
      generation_(generation),
      space_(hierarchical_allreduce),
      options_(OptionsFor(config, generation)),
      memory_(memory),
      log_(std::move(log)),
      sampler_(config.autotune_steps_per_sample) {}

TunedParameters Autotuner::StartPoint(const AutotuneMemory& memory, TunedParameters configured) {
  if (!memory.best.has_value()) return configured;
  TunedParameters start = *memory.best;
  if (!start.hierarchical_allreduce.has_value()) {
    start.hierarchical_allreduce = configured.hierarchical_allreduce;
  }
  return start;
}

void Autotuner::Start(const TunedParameters& start) {
  memory_->best = start;
  {
    MutexLock lock(&history_mu_);
    history_.push_back({-1, start, false});
  }
  if (decides_) {
    manager_ = std::make_unique<ParameterManager>(space_, start, options_, generation_);
    CHORUS_LOG(INFO) << "autotune: generation " << generation_ << ": searching from "
                     << DescribeParameters(start) << " (" << options_.warmup_samples
                     << " warm-up samples, then " << options_.max_samples << ")";
  }
}

std::optional<AutotuneUpdate> Autotuner::TakeUpdate() {
  std::optional<AutotuneUpdate> update = std::move(update_);
  update_.reset();
  return update;
}

void Autotuner::Applied(const AutotuneUpdate& update, int64_t cycle) {
  memory_->best = update.best;
  {
    MutexLock lock(&history_mu_);
    history_.push_back({cycle, update.apply, update.done});
  }
  // The step in progress ran partly under the old parameters.
  sampler_.Restart();
  CHORUS_LOG(INFO) << "autotune: generation " << generation_ << " cycle " << cycle << ": "
                   << (update.done ? "search done, keeping " : "trying ")
                   << DescribeParameters(update.apply);
}

void Autotuner::AfterCycle(absl::Time cycle_start, absl::Span<const Response> plan) {
  if (!decides_ || manager_ == nullptr || manager_->done() || update_.has_value()) return;
  const bool counted_cycles = sampler_.counts_cycles();
  const std::optional<double> score = sampler_.OnCycle(cycle_start, plan);
  if (!counted_cycles && sampler_.counts_cycles()) {
    CHORUS_LOG(INFO) << "autotune: no tensor name repeated in " << StepSampler::kMaxNamesPerStep
                     << " names: every cycle that runs tensors counts as a training step "
                     << "(name the tensors for samples of whole steps)";
  }
  if (!score.has_value()) return;
  const ParameterManager::Decision decision = manager_->Record(*score);
  Log(decision);
  if (!decision.next.has_value()) return;
  AutotuneUpdate update;
  update.apply = *decision.next;
  update.best = manager_->best();
  update.done = decision.done;
  update_ = std::move(update);
}

void Autotuner::Log(const ParameterManager::Decision& decision) {
  for (const AutotuneRecord& r : decision.records) {
    CHORUS_LOG(INFO) << "autotune: generation " << r.generation << " " << PhaseName(r.phase) << " "
                     << r.sample << ": " << DescribeParameters(r.parameters) << ": "
                     << static_cast<int64_t>(r.score) << " bytes/s";
    if (log_ == nullptr || log_failed_) continue;
    if (absl::Status written = log_->Append(r); !written.ok()) {
      log_failed_ = true;
      CHORUS_LOG(WARNING) << written.message() << "; autotune goes on without its log";
    }
  }
}

std::vector<Autotuner::Switch> Autotuner::history() const {
  MutexLock lock(&history_mu_);
  return history_;
}

}  // namespace chorus::runtime
