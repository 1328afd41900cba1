#include "elastic/rank_assignment.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chorus::elastic {
namespace {

absl::Status Validate(const std::vector<PreviousWorker>& previous,
                      const std::vector<HostSlots>& hosts, const RankLimits& limits) {
  if (limits.min_np < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--min-np ", limits.min_np, " is below 1"));
  }
  if (limits.max_np && *limits.max_np < limits.min_np) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-np ", *limits.max_np, " is below --min-np ", limits.min_np));
  }
  std::set<std::string> names;
  for (const HostSlots& h : hosts) {
    if (h.slots < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("host '", h.host, "' has ", h.slots, " slots; expected at least 1"));
    }
    if (!names.insert(h.host).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("host '", h.host, "' is listed more than once"));
    }
  }
  std::set<int> ranks;
  std::set<std::pair<std::string, int>> slots;
  for (const PreviousWorker& w : previous) {
    if (w.rank < 0 || w.slot < 0) {
      return absl::InvalidArgumentError(absl::StrCat("previous worker rank ", w.rank, " on '",
                                                     w.host, "' slot ", w.slot,
                                                     ": negative rank or slot"));
    }
    if (!ranks.insert(w.rank).second) {
      return absl::InvalidArgumentError(absl::StrCat("two previous workers have rank ", w.rank));
    }
    if (!slots.insert({w.host, w.slot}).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("two previous workers occupy slot ", w.slot, " of '", w.host, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RankAssignment> AssignRanks(const std::vector<PreviousWorker>& previous,
                                           const std::vector<HostSlots>& hosts,
                                           const RankLimits& limits) {
  if (absl::Status s = Validate(previous, hosts, limits); !s.ok()) return s;
  std::map<std::string, int> slots_of;
  for (const HostSlots& h : hosts) slots_of.emplace(h.host, h.slots);
  const size_t cap = limits.max_np ? static_cast<size_t>(*limits.max_np) : SIZE_MAX;

  std::vector<PreviousWorker> by_rank = previous;
  std::sort(by_rank.begin(), by_rank.end(),
            [](const PreviousWorker& a, const PreviousWorker& b) { return a.rank < b.rank; });

  // 1. Survivors, in previous rank order.
  RankAssignment result;
  std::set<std::pair<std::string, int>> taken;
  for (const PreviousWorker& w : by_rank) {
    if (!w.alive) continue;
    auto it = slots_of.find(w.host);
    if (it == slots_of.end() || w.slot >= it->second || result.workers.size() >= cap) {
      result.released.push_back(w);
      continue;
    }
    WorkerAssignment a;
    a.placement.host = w.host;
    a.placement.rank = static_cast<int>(result.workers.size());
    a.slot = w.slot;
    a.previous_rank = w.rank;
    result.workers.push_back(std::move(a));
    taken.insert({w.host, w.slot});
  }
  // 2. Free slots, in host order, up to the cap.
  for (const HostSlots& h : hosts) {
    for (int slot = 0; slot < h.slots && result.workers.size() < cap; ++slot) {
      if (taken.contains({h.host, slot})) continue;
      WorkerAssignment a;
      a.placement.host = h.host;
      a.placement.rank = static_cast<int>(result.workers.size());
      a.slot = slot;
      result.workers.push_back(std::move(a));
    }
  }

  // 4. Local and cross numbers.
  NumberWorkers(hosts, result.workers);
  result.min_np_met = static_cast<int>(result.workers.size()) >= limits.min_np;
  return result;
}

void NumberWorkers(const std::vector<HostSlots>& hosts, std::vector<WorkerAssignment>& workers) {
  const int size = static_cast<int>(workers.size());
  std::map<std::string, std::vector<WorkerAssignment*>> on_host;
  for (WorkerAssignment& a : workers) on_host[a.placement.host].push_back(&a);
  std::vector<std::string> host_order;
  for (const HostSlots& h : hosts) {
    if (on_host.contains(h.host)) host_order.push_back(h.host);
  }
  for (const auto& [host, unused] : on_host) {
    if (std::find(host_order.begin(), host_order.end(), host) == host_order.end()) {
      host_order.push_back(host);
    }
  }
  std::vector<int> hosts_with_local_rank;  // [l]: hosts so far with a worker of local rank l
  for (const std::string& host : host_order) {
    std::vector<WorkerAssignment*>& here = on_host[host];
    std::sort(here.begin(), here.end(), [](const WorkerAssignment* a, const WorkerAssignment* b) {
      return a->slot < b->slot;
    });
    for (size_t l = 0; l < here.size(); ++l) {
      if (hosts_with_local_rank.size() <= l) hosts_with_local_rank.push_back(0);
      RankPlacement& p = here[l]->placement;
      p.size = size;
      p.local_rank = static_cast<int>(l);
      p.local_size = static_cast<int>(here.size());
      p.cross_rank = hosts_with_local_rank[l]++;
    }
  }
  for (WorkerAssignment& a : workers) {
    a.placement.cross_size = hosts_with_local_rank[static_cast<size_t>(a.placement.local_rank)];
  }
}

absl::StatusOr<std::vector<RankPlacement>> LayoutRanks(const std::vector<HostSlots>& hosts,
                                                       int num_proc) {
  if (num_proc < 1) {
    return absl::InvalidArgumentError(absl::StrCat("-np ", num_proc, " is below 1"));
  }
  RankLimits limits;
  limits.min_np = limits.max_np.emplace(num_proc);
  absl::StatusOr<RankAssignment> assignment = AssignRanks({}, hosts, limits);
  if (!assignment.ok()) return assignment.status();
  if (!assignment->min_np_met) {
    int64_t total = 0;
    for (const HostSlots& h : hosts) total += h.slots;
    return absl::InvalidArgumentError(
        absl::StrCat("-np ", num_proc, " is more than the ", total, " slots of the hosts"));
  }
  std::vector<RankPlacement> ranks;
  for (WorkerAssignment& w : assignment->workers) ranks.push_back(std::move(w.placement));
  return ranks;
}

}  // namespace chorus::elastic
