// File: ops/hierarchical/hierarchy_layout.cc
#include "ops/hierarchical/hierarchy_layout.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chorus::ops {

absl::StatusOr<std::vector<int32_t>> HostsOfRanks(absl::Span<const RankPlace> places) {
  const auto n = static_cast<int32_t>(places.size());
  auto describe = [](int32_t r, const RankPlace& p) {
    return absl::StrCat("rank ", r, " (local ", p.local_rank, "/", p.local_size, ", cross ",
                        p.cross_rank, "/", p.cross_size, ")");
  };
  // 1. The hosts: one per local rank 0, numbered by its cross rank.
  std::vector<int32_t> size_of_host;  // [host] -> its ranks, from its local rank 0
  std::vector<int32_t> first_of_host;
  for (int32_t r = 0; r < n; ++r) {
    const RankPlace& p = places[r];
    if (p.local_rank < 0 || p.local_rank >= p.local_size || p.cross_rank < 0 ||
        p.cross_rank >= p.cross_size) {
      return absl::InvalidArgumentError(absl::StrCat(describe(r, p), " is out of range"));
    }
    if (p.local_rank != 0) continue;
    if (static_cast<size_t>(p.cross_rank) >= size_of_host.size()) {
      size_of_host.resize(static_cast<size_t>(p.cross_rank) + 1, 0);
      first_of_host.resize(static_cast<size_t>(p.cross_rank) + 1, -1);
    }
    if (first_of_host[p.cross_rank] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(describe(r, p), " and ",
                       describe(first_of_host[p.cross_rank], places[first_of_host[p.cross_rank]]),
                       " are in the same place"));
    }
    first_of_host[p.cross_rank] = r;
    size_of_host[p.cross_rank] = p.local_size;
  }
  const auto hosts = static_cast<int32_t>(size_of_host.size());
  for (int32_t h = 0; h < hosts; ++h) {
    if (first_of_host[h] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("no rank has local rank 0 and cross rank ", h, " of ", hosts));
    }
  }
  // 2. The hosts with more than k ranks, in host order, for every local rank k.
  std::vector<std::vector<int32_t>> hosts_with_local;
  for (int32_t h = 0; h < hosts; ++h) {
    for (int32_t k = 0; k < size_of_host[h]; ++k) {
      if (hosts_with_local.size() <= static_cast<size_t>(k)) hosts_with_local.emplace_back();
      hosts_with_local[k].push_back(h);
    }
  }
  // 3. Every rank into its place; each place taken exactly once.
  std::vector<int32_t> host(static_cast<size_t>(n), -1);
  std::map<std::pair<int32_t, int32_t>, int32_t> taken;  // (host, local rank) -> rank
  for (int32_t r = 0; r < n; ++r) {
    const RankPlace& p = places[r];
    if (static_cast<size_t>(p.local_rank) >= hosts_with_local.size() ||
        static_cast<size_t>(p.cross_rank) >= hosts_with_local[p.local_rank].size()) {
      return absl::InvalidArgumentError(absl::StrCat(describe(r, p), ": no host has such a place"));
    }
    const std::vector<int32_t>& with = hosts_with_local[p.local_rank];
    const int32_t h = with[p.cross_rank];
    if (p.local_size != size_of_host[h] || p.cross_size != static_cast<int32_t>(with.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(describe(r, p), " disagrees with host ", h, ", which has ", size_of_host[h],
                       " ranks, and the ", with.size(), " hosts with local rank ", p.local_rank));
    }
    auto [it, inserted] = taken.emplace(std::make_pair(h, p.local_rank), r);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(describe(r, p), " and ",
                                                     describe(it->second, places[it->second]),
                                                     " are in the same place"));
    }
    host[r] = h;
  }
  for (int32_t h = 0; h < hosts; ++h) {
    for (int32_t k = 0; k < size_of_host[h]; ++k) {
      if (!taken.contains({h, k})) {
        return absl::InvalidArgumentError(absl::StrCat("host ", h, " has ", size_of_host[h],
                                                       " ranks but none with local rank ", k));
      }
    }
  }
  return host;
}

HierarchyPlan PlanHierarchy(absl::Span<const int32_t> host_of_member) {
  HierarchyPlan plan;
  const auto n = static_cast<int32_t>(host_of_member.size());
  // Hosts in order of their lowest member.
  std::map<int32_t, int32_t> index_of_host;   // host id -> host index
  std::vector<std::vector<int32_t>> members;  // [host index] -> set ranks, ascending
  for (int32_t i = 0; i < n; ++i) {
    auto [it, inserted] =
        index_of_host.emplace(host_of_member[i], static_cast<int32_t>(members.size()));
    if (inserted) members.emplace_back();
    members[it->second].push_back(i);
  }
  if (members.size() <= 1) {
    plan.kind = HierarchyPlan::Kind::kSingleHost;
    return plan;
  }
  const auto per_host = static_cast<int32_t>(members[0].size());
  const bool homogeneous = std::all_of(members.begin(), members.end(), [&](const auto& m) {
    return static_cast<int32_t>(m.size()) == per_host;
  });
  if (!homogeneous) {
    std::vector<size_t> counts;
    for (const auto& m : members) counts.push_back(m.size());
    plan.kind = HierarchyPlan::Kind::kHeterogeneous;
    plan.reason = absl::StrCat("its ", members.size(), " hosts run ", absl::StrJoin(counts, ", "),
                               " of its ", n, " ranks");
    return plan;
  }
  if (per_host == 1) {
    plan.kind = HierarchyPlan::Kind::kOnePerHost;
    return plan;
  }
  plan.kind = HierarchyPlan::Kind::kHierarchical;
  HierarchyLayout& layout = plan.layout;
  layout.local_size = per_host;
  layout.cross_size = static_cast<int32_t>(members.size());
  layout.host.assign(static_cast<size_t>(n), 0);
  layout.local.assign(static_cast<size_t>(n), 0);
  layout.member.assign(static_cast<size_t>(n), 0);
  for (int32_t h = 0; h < layout.cross_size; ++h) {
    for (int32_t l = 0; l < per_host; ++l) {
      const int32_t rank = members[h][l];
      layout.host[rank] = h;
      layout.local[rank] = l;
      layout.member[h * per_host + l] = rank;
      layout.host_major = layout.host_major && rank == h * per_host + l;
    }
  }
  return plan;
}

CollectiveAlgorithm ChooseAllreduce(bool enabled, const HierarchyPlan& plan, int64_t count) {
  if (!enabled || plan.kind != HierarchyPlan::Kind::kHierarchical) {
    return CollectiveAlgorithm::kFlat;
  }
  return count >= plan.layout.local_size ? CollectiveAlgorithm::kHierarchical
                                         : CollectiveAlgorithm::kFlat;
}

CollectiveAlgorithm ChooseAllgather(bool enabled, const HierarchyPlan& plan, int64_t total_bytes) {
  if (!enabled || plan.kind != HierarchyPlan::Kind::kHierarchical || total_bytes <= 0) {
    return CollectiveAlgorithm::kFlat;
  }
  return CollectiveAlgorithm::kHierarchical;
}

CrossStep ChooseCrossStep(int64_t count, int64_t bytes, int32_t hosts) {
  if (bytes <= kCrossAllreduceMaxBytes || count < hosts) return CrossStep::kAllreduce;
  return CrossStep::kReduceScatterAllgather;
}

}  // namespace chorus::ops
