#include "launcher/engine/generation_notice.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

#include "base/config_names.h"

namespace chorus::launcher {

std::vector<EnvVar> GenerationVariables(const RankPlacement& p, int generation) {
  RendezvousInfo rendezvous;
  rendezvous.scope = absl::StrCat("world/", generation);
  static const std::set<std::string> kFixed = {config_names::kRendezvousAddr,
                                               config_names::kRendezvousSecret,
                                               config_names::kStartTimeoutSeconds};
  std::vector<EnvVar> vars;
  for (EnvVar& v : RankEnvironment(p, rendezvous)) {
    if (kFixed.count(v.first) == 0) vars.push_back(std::move(v));
  }
  vars.emplace_back(config_names::kElasticGeneration, absl::StrCat(generation));
  return vars;
}

chorus::rendezvous::Generation MakeGenerationNotice(const elastic::PublishGeneration& change,
                                                    absl::Time decided) {
  chorus::rendezvous::Generation g;
  g.set_number(change.number);
  g.set_aborted(change.aborted);
  g.set_hold(change.hold);
  g.set_cause(change.cause);
  for (int rank : change.lost_ranks) g.add_lost_ranks(rank);
  g.set_hosts_added(change.hosts_added);
  g.set_hosts_removed(change.hosts_removed);
  g.set_timestamp_us(absl::ToUnixMicros(decided));
  for (const auto& [worker_id, placement] : change.places) {
    chorus::rendezvous::WorkerPlace* place = g.add_places();
    place->set_worker_id(worker_id);
    place->set_rank(placement.rank);
    for (const EnvVar& v : GenerationVariables(placement, change.number)) {
      (*place->mutable_env())[v.first] = v.second;
    }
  }
  return g;
}

}  // namespace chorus::launcher
