// File: launcher/engine/generation_notice.h
//
// What chorusrun tells the workers of an MPI-less job when a generation starts (as decided by
// elastic/next_generation.h): the Generation
// message of proto/rendezvous.proto, which the rendezvous server hands to every worker's
// membership watcher (runtime/elastic/membership_watcher.h). It lists every worker's place: its
// id (CHORUS_ELASTIC_WORKER_ID), its rank and the variables it sets when it adopts the
// generation. Survivors of a reset adopt those in process; workers started for the generation
// get the same variables in their environment (launcher/engine/rank_env.h plus the elastic ones).
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_ENGINE_GENERATION_NOTICE_H_
#define CHORUS_LAUNCHER_ENGINE_GENERATION_NOTICE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

#include "base/config_names.h"
#include "elastic/next_generation.h"
#include "launcher/engine/rank_env.h"
#include "launcher/hosts/rank_layout.h"
#include "proto/rendezvous.pb.h"

namespace chorus::launcher {

// The variables that change from generation to generation for the worker at `p`:
// RankEnvironment(p, rendezvous with scope "world/<generation>") without the
// rendezvous address, secret and start timeout (fixed for the job), then
// CHORUS_ELASTIC_GENERATION.
std::vector<EnvVar> GenerationVariables(const RankPlacement& p, int generation);

// The message for generation `g`, decided at `decided` (its timestamp_us: chorusrun's clock,
// growing with every change).
chorus::rendezvous::Generation MakeGenerationNotice(const elastic::PublishGeneration& g,
                                                    absl::Time decided);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_ENGINE_GENERATION_NOTICE_H_
