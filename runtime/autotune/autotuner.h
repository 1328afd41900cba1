// File: runtime/autotune/autotuner.h
//
// Autotune inside the background loop (docs/autotune.md): rank 0 measures and decides; every
// rank applies each decision in the same cycle.
//
// In one world (one loop):
//   handshake  rank 0 offers the point this world starts from (StartPoint: the best point of the
//              last search this process took part in, else its configured values) in the shared
//              config; once the hosts are known (whether the hierarchical knob applies), every
//              rank makes an Autotuner and starts there, conformed to the world's knobs.
//   each cycle rank 0, after executing the cycle's responses, hands them to AfterCycle: the step
//              sampler (runtime/autotune/step_sampler.h) completes a sample now and then, the
//              parameter manager (runtime/autotune/parameter_manager.h) scores it and may decide
//              on new parameters, which wait (has_update) for the next cycle. That cycle's bit
//              vector carries the kAutotune flag, so every rank negotiates; rank 0 puts
//              TakeUpdate() into the response list it broadcasts; each rank, on receiving it,
//              calls Applied and switches before it executes the cycle's responses. So no rank
//              ever runs a batch with another rank's parameters.
//   memory     every update carries the search's best point so far, which each rank keeps in the
//              AutotuneMemory its Runtime holds across re-forms (Note [Re-forming in place] in
//              runtime/runtime.h): whichever survivor is rank 0 of the next world starts the next
//              search from the same point.
//
// Thread-safety: loop-thread-only, except history(), which any thread may call.
#ifndef CHORUS_RUNTIME_AUTOTUNE_AUTOTUNER_H_
#define CHORUS_RUNTIME_AUTOTUNE_AUTOTUNER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"

#include "base/mutex.h"
#include "runtime/autotune/autotune_log.h"
#include "runtime/autotune/knob_space.h"
#include "runtime/autotune/parameter_manager.h"
#include "runtime/autotune/step_sampler.h"
#include "runtime/config.h"
#include "runtime/message.h"

namespace chorus::runtime {

// What a process remembers of autotune from one world to the next. Owned by the Runtime; only
// the loop thread of the loop that runs touches it (one loop at a time).
struct AutotuneMemory {
  // The best point of the last search this process took part in, as rank 0 broadcast it (so
  // every rank of that world holds the same); none before the first.
  std::optional<TunedParameters> best;
  // Worlds this process's runtime has formed so far.
  int64_t worlds = 0;
};

class Autotuner {
 public:
  // `decides`: this is rank 0 with autotune on (it samples and decides); otherwise the rank only
  // applies rank 0's decisions. `log`: rank 0's CSV log, or null. `generation`: the world's
  // number in the log. `hierarchical_allreduce`: the knob applies to this world
  // (runtime/autotune/knob_space.h). `memory` outlives this object.
  Autotuner(const Config& config, bool decides, std::unique_ptr<AutotuneLog> log,
            int64_t generation, bool hierarchical_allreduce, AutotuneMemory* memory);

  // Rank 0, handshake: where this world's search starts: the remembered best point, else
  // `configured` (the values of rank 0's own configuration, hierarchical allreduce included).
  // A remembered point without the hierarchical knob (its world could not run it) takes
  // `configured`'s. Every rank conforms it to its world's knobs once the hosts are known.
  static TunedParameters StartPoint(const AutotuneMemory& memory, TunedParameters configured);

  // Every rank, handshake: the world starts at `start` (rank 0's StartPoint).
  void Start(const TunedParameters& start);

  // Rank 0: a decision waits for the next cycle.
  bool has_update() const { return update_.has_value(); }
  // Rank 0: the decision, for the response list of this cycle.
  std::optional<AutotuneUpdate> TakeUpdate();
  // Every rank: `update` takes effect in cycle `cycle` (the loop switches to update.apply).
  void Applied(const AutotuneUpdate& update, int64_t cycle);
  // Rank 0: the cycle that began at `cycle_start` executed `plan`.
  void AfterCycle(absl::Time cycle_start, absl::Span<const Response> plan);

  // The parameters this world started with and each switch since, with its cycle (the start's
  // is -1), for tests. Thread-safe.
  struct Switch {
    int64_t cycle = -1;
    TunedParameters parameters;
    bool done = false;  // the search's choice
  };
  std::vector<Switch> history() const;

 private:
  void Log(const ParameterManager::Decision& decision);

  const bool decides_;
  const int64_t generation_;
  const KnobSpace space_;
  const AutotuneOptions options_;
  AutotuneMemory* const memory_;
  std::unique_ptr<AutotuneLog> log_;  // rank 0, when configured
  bool log_failed_ = false;           // one warning, then no more writes
  StepSampler sampler_;
  std::unique_ptr<ParameterManager> manager_;  // rank 0, from Start
  std::optional<AutotuneUpdate> update_;       // rank 0: waiting for the next cycle
  mutable Mutex history_mu_;
  std::vector<Switch> history_ ABSL_GUARDED_BY(history_mu_);
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_AUTOTUNE_AUTOTUNER_H_
