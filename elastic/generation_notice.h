// File: elastic/generation_notice.h
//
// What chorusrun tells the workers of an elastic job when a generation starts: the Generation
// message of proto/rendezvous.proto, which the rendezvous server hands to every worker's
// membership watcher (runtime/elastic/membership_watcher.h). It lists every worker's place: its
// id (CHORUS_ELASTIC_WORKER_ID), its rank and the variables it sets when it adopts the
// generation. Survivors of a reset adopt those in process; workers started for the generation
// get the same variables in their environment (launcher/rank_env.h plus the elastic ones).
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_ELASTIC_GENERATION_NOTICE_H_
#define CHORUS_ELASTIC_GENERATION_NOTICE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

#include "launcher/rank_env.h"
#include "launcher/rank_layout.h"
#include "proto/rendezvous.pb.h"

namespace chorus::elastic {

inline constexpr char kWorkerIdVar[] = "CHORUS_ELASTIC_WORKER_ID";
inline constexpr char kGenerationVar[] = "CHORUS_ELASTIC_GENERATION";

// Why a generation starts.
struct GenerationChange {
  int generation = 0;
  // A worker of the previous generation is gone: the survivors' pending ops must fail (they
  // roll back to their last commit).
  bool aborted = false;
  std::string cause;            // the reset line's cause
  std::vector<int> lost_ranks;  // previous ranks that are gone, ascending
  bool hosts_added = false;
  bool hosts_removed = false;
  absl::Time decided;  // becomes timestamp_us: grows with every change
};

// One worker of the generation.
struct WorkerPlace {
  std::string worker_id;
  launcher::RankPlacement placement;
};

// The variables that change from generation to generation for the worker at `p`:
// launcher::RankEnvironment(p, rendezvous with scope "world/<generation>") without the
// rendezvous address, secret and start timeout (fixed for the job), then
// CHORUS_ELASTIC_GENERATION.
std::vector<launcher::EnvVar> GenerationVariables(const launcher::RankPlacement& p, int generation);

// The message for `change`; `places` in rank order.
chorus::rendezvous::Generation MakeGenerationNotice(const GenerationChange& change,
                                                    const std::vector<WorkerPlace>& places);

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_GENERATION_NOTICE_H_
