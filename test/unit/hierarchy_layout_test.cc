// The pure decisions of hierarchical collectives (ops/hierarchical/hierarchy_layout.h): hosts from
// the ranks' local and cross numbers as chorusrun (every layout of elastic/rank_assignment.h) and
// MPI give them, a process set's layout, and which algorithm each call runs.
#include "ops/hierarchical/hierarchy_layout.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include <catch2/catch.hpp>

#include "elastic/rank_assignment.h"

namespace chorus::ops {
namespace {

using Kind = HierarchyPlan::Kind;

std::vector<RankPlace> PlacesOf(const std::vector<elastic::RankPlacement>& placements) {
  std::vector<RankPlace> places;
  for (const elastic::RankPlacement& p : placements) {
    places.push_back({p.local_rank, p.local_size, p.cross_rank, p.cross_size});
  }
  return places;
}

// Host index in `hosts` order of every rank.
std::vector<int32_t> ExpectedHosts(const std::vector<elastic::RankPlacement>& placements,
                                   const std::vector<elastic::HostSlots>& hosts) {
  std::map<std::string, int32_t> index;
  for (const elastic::HostSlots& h : hosts) {
    for (const elastic::RankPlacement& p : placements) {
      if (p.host == h.host && !index.contains(h.host)) {
        const auto next = static_cast<int32_t>(index.size());
        index[h.host] = next;
      }
    }
  }
  std::vector<int32_t> out;
  for (const elastic::RankPlacement& p : placements) out.push_back(index.at(p.host));
  return out;
}

TEST_CASE("HostsOfRanks recovers chorusrun's hosts from the local and cross numbers",
          "[hierarchical]") {
  const std::vector<std::vector<elastic::HostSlots>> layouts = {
      {{"a", 2}, {"b", 2}},           {{"a", 2}, {"b", 2}, {"c", 2}}, {{"a", 3}, {"b", 3}},
      {{"a", 2}, {"b", 1}},           {{"a", 1}, {"b", 3}, {"c", 2}}, {{"a", 4}},
      {{"a", 1}, {"b", 1}, {"c", 1}},
  };
  for (const auto& hosts : layouts) {
    int np = 0;
    for (const auto& h : hosts) np += h.slots;
    absl::StatusOr<std::vector<elastic::RankPlacement>> placements =
        elastic::LayoutRanks(hosts, np);
    REQUIRE(placements.ok());
    absl::StatusOr<std::vector<int32_t>> got = HostsOfRanks(PlacesOf(*placements));
    REQUIRE(got.ok());
    CHECK(*got == ExpectedHosts(*placements, hosts));
  }
}

TEST_CASE("HostsOfRanks follows an elastic generation whose ranks are not host by host",
          "[hierarchical]") {
  // rank_assignment.h's example: survivors keep their slots, rank 0 died.
  const std::vector<elastic::PreviousWorker> previous = {
      {"a", 0, 0, false}, {"a", 1, 1, true}, {"b", 0, 2, true}, {"b", 1, 3, true}};
  const std::vector<elastic::HostSlots> hosts = {{"a", 2}, {"b", 2}, {"c", 2}};
  absl::StatusOr<elastic::RankAssignment> next = elastic::AssignRanks(previous, hosts, {});
  REQUIRE(next.ok());
  std::vector<elastic::RankPlacement> placements;
  for (const auto& w : next->workers) placements.push_back(w.placement);
  absl::StatusOr<std::vector<int32_t>> got = HostsOfRanks(PlacesOf(placements));
  REQUIRE(got.ok());
  CHECK(*got == ExpectedHosts(placements, hosts));
  // 3 hosts x 2 ranks, but rank 0 is a's second rank: not host-major.
  const HierarchyPlan plan = PlanHierarchy(*got);
  REQUIRE(plan.kind == Kind::kHierarchical);
  CHECK_FALSE(plan.layout.host_major);
}

TEST_CASE("HostsOfRanks reads MPI's numbers of a round-robin mapping", "[hierarchical]") {
  // mpirun --map-by node on 2 hosts x 2: ranks 0, 2 on host 0; 1, 3 on host 1. The local rank
  // is the rank's index on its host, the cross rank its host's index among those with that
  // local rank (MPI_Comm_split by local rank, ordered by world rank).
  const std::vector<RankPlace> places = {{0, 2, 0, 2}, {0, 2, 1, 2}, {1, 2, 0, 2}, {1, 2, 1, 2}};
  absl::StatusOr<std::vector<int32_t>> got = HostsOfRanks(places);
  REQUIRE(got.ok());
  CHECK(*got == std::vector<int32_t>{0, 1, 0, 1});
}

TEST_CASE("HostsOfRanks refuses numbers that do not describe hosts", "[hierarchical]") {
  struct Case {
    const char* what;
    std::vector<RankPlace> places;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"two ranks in one place", {{0, 2, 0, 1}, {0, 2, 0, 1}}, "same place"},
      {"a host without its local rank 1", {{0, 2, 0, 2}, {0, 1, 1, 2}}, "none with local rank 1"},
      {"a rank disagreeing on its host's size", {{0, 2, 0, 1}, {1, 3, 0, 1}}, "disagrees"},
      {"a local rank out of range", {{2, 2, 0, 1}}, "out of range"},
      {"a place no host has", {{0, 1, 0, 1}, {1, 2, 3, 4}}, "no host has such a place"},
      {"no local rank 0 for a host", {{0, 1, 1, 2}}, "no rank has local rank 0 and cross rank 0"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    absl::StatusOr<std::vector<int32_t>> got = HostsOfRanks(c.places);
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(got.status().message()), Catch::Contains(c.says));
  }
}

TEST_CASE("PlanHierarchy: a grid of hosts, numbered by their lowest member", "[hierarchical]") {
  SECTION("host by host") {
    const HierarchyPlan plan = PlanHierarchy(std::vector<int32_t>{7, 7, 3, 3, 5, 5});
    REQUIRE(plan.kind == Kind::kHierarchical);
    CHECK(plan.layout.local_size == 2);
    CHECK(plan.layout.cross_size == 3);
    CHECK(plan.layout.host == std::vector<int32_t>{0, 0, 1, 1, 2, 2});
    CHECK(plan.layout.local == std::vector<int32_t>{0, 1, 0, 1, 0, 1});
    CHECK(plan.layout.member == std::vector<int32_t>{0, 1, 2, 3, 4, 5});
    CHECK(plan.layout.host_major);
  }
  SECTION("interleaved") {
    const HierarchyPlan plan = PlanHierarchy(std::vector<int32_t>{4, 9, 9, 4});
    REQUIRE(plan.kind == Kind::kHierarchical);
    CHECK(plan.layout.host == std::vector<int32_t>{0, 1, 1, 0});
    CHECK(plan.layout.local == std::vector<int32_t>{0, 0, 1, 1});
    CHECK(plan.layout.member == std::vector<int32_t>{0, 3, 1, 2});
    CHECK_FALSE(plan.layout.host_major);
  }
}

TEST_CASE("PlanHierarchy: the flat cases", "[hierarchical]") {
  CHECK(PlanHierarchy(std::vector<int32_t>{0, 0, 0}).kind == Kind::kSingleHost);
  CHECK(PlanHierarchy(std::vector<int32_t>{0}).kind == Kind::kSingleHost);
  CHECK(PlanHierarchy(std::vector<int32_t>{0, 1, 2}).kind == Kind::kOnePerHost);
  const HierarchyPlan uneven = PlanHierarchy(std::vector<int32_t>{0, 0, 1, 2, 2, 2});
  CHECK(uneven.kind == Kind::kHeterogeneous);
  CHECK(uneven.reason == "its 3 hosts run 2, 1, 3 of its 6 ranks");
}

TEST_CASE("Which algorithm a call runs", "[hierarchical]") {
  const HierarchyPlan grid = PlanHierarchy(std::vector<int32_t>{0, 0, 0, 1, 1, 1});  // 2 x 3
  const HierarchyPlan uneven = PlanHierarchy(std::vector<int32_t>{0, 0, 1});
  const HierarchyPlan single = PlanHierarchy(std::vector<int32_t>{0, 0});
  using A = CollectiveAlgorithm;
  struct Row {
    bool enabled;
    const HierarchyPlan* plan;
    int64_t count;
    A allreduce;
    A allgather;  // with `count` bytes
  };
  const std::vector<Row> rows = {
      {true, &grid, 1000, A::kHierarchical, A::kHierarchical},
      {true, &grid, 3, A::kHierarchical, A::kHierarchical},  // one element per local rank
      {true, &grid, 2, A::kFlat, A::kHierarchical},          // a piece below the local size
      {true, &grid, 0, A::kFlat, A::kFlat},
      {false, &grid, 1000, A::kFlat, A::kFlat},
      {true, &uneven, 1000, A::kFlat, A::kFlat},
      {true, &single, 1000, A::kFlat, A::kFlat},
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    INFO("row " << i);
    CHECK(ChooseAllreduce(r.enabled, *r.plan, r.count) == r.allreduce);
    CHECK(ChooseAllgather(r.enabled, *r.plan, r.count) == r.allgather);
  }
}

TEST_CASE("How the cross step reduces a block", "[hierarchical]") {
  CHECK(ChooseCrossStep(100, 400, 3) == CrossStep::kAllreduce);
  CHECK(ChooseCrossStep(16384, kCrossAllreduceMaxBytes, 3) == CrossStep::kAllreduce);
  CHECK(ChooseCrossStep(16385, kCrossAllreduceMaxBytes + 4, 3) ==
        CrossStep::kReduceScatterAllgather);
  CHECK(ChooseCrossStep(1 << 20, 4 << 20, 2) == CrossStep::kReduceScatterAllgather);
  // Fewer elements than hosts (a huge element type would be one): one allreduce.
  CHECK(ChooseCrossStep(2, 1 << 20, 3) == CrossStep::kAllreduce);
}

}  // namespace
}  // namespace chorus::ops
