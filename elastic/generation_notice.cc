#include "elastic/generation_notice.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace chorus::elastic {

std::vector<launcher::EnvVar> GenerationVariables(const launcher::RankPlacement& p,
                                                  int generation) {
  launcher::RendezvousInfo rendezvous;
  rendezvous.scope = absl::StrCat("world/", generation);
  static const std::set<std::string> kFixed = {
      "CHORUS_RENDEZVOUS_ADDR", launcher::kRendezvousSecretVar, "CHORUS_START_TIMEOUT_SECONDS"};
  std::vector<launcher::EnvVar> vars;
  for (launcher::EnvVar& v : launcher::RankEnvironment(p, rendezvous)) {
    if (kFixed.count(v.first) == 0) vars.push_back(std::move(v));
  }
  vars.emplace_back(kGenerationVar, absl::StrCat(generation));
  return vars;
}

chorus::rendezvous::Generation MakeGenerationNotice(const GenerationChange& change,
                                                    const std::vector<WorkerPlace>& places) {
  chorus::rendezvous::Generation g;
  g.set_number(change.generation);
  g.set_aborted(change.aborted);
  g.set_cause(change.cause);
  for (int rank : change.lost_ranks) g.add_lost_ranks(rank);
  g.set_hosts_added(change.hosts_added);
  g.set_hosts_removed(change.hosts_removed);
  g.set_timestamp_us(absl::ToUnixMicros(change.decided));
  for (const WorkerPlace& w : places) {
    chorus::rendezvous::WorkerPlace* place = g.add_places();
    place->set_worker_id(w.worker_id);
    place->set_rank(w.placement.rank);
    for (const launcher::EnvVar& v : GenerationVariables(w.placement, change.generation)) {
      (*place->mutable_env())[v.first] = v.second;
    }
  }
  return g;
}

}  // namespace chorus::elastic
