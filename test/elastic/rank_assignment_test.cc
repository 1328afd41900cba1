#include "elastic/rank_assignment.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::elastic {
namespace {

// "host:slot" per rank, for compact expectations.
std::vector<std::string> Seats(const RankAssignment& a) {
  std::vector<std::string> seats;
  for (const WorkerAssignment& w : a.workers) {
    seats.push_back(w.placement.host + ":" + std::to_string(w.slot));
  }
  return seats;
}

std::vector<int> PreviousRanks(const RankAssignment& a) {
  std::vector<int> ranks;
  for (const WorkerAssignment& w : a.workers) ranks.push_back(w.previous_rank.value_or(-1));
  return ranks;
}

// The generation `a` as the previous one of the next assignment, every worker alive.
std::vector<PreviousWorker> AsPrevious(const RankAssignment& a) {
  std::vector<PreviousWorker> previous;
  for (const WorkerAssignment& w : a.workers) {
    previous.push_back({w.placement.host, w.slot, w.placement.rank, true});
  }
  return previous;
}

// Every worker's numbers are consistent: ranks 0..n-1 in order, size n, and local/cross
// numbers as horovodrun defines them.
void CheckConsistent(const RankAssignment& a, const std::vector<HostSlots>& hosts) {
  const int n = static_cast<int>(a.workers.size());
  for (int r = 0; r < n; ++r) {
    const RankPlacement& p = a.workers[static_cast<size_t>(r)].placement;
    CHECK(p.rank == r);
    CHECK(p.size == n);
    int local_size = 0, local_rank = 0;
    for (const WorkerAssignment& o : a.workers) {
      if (o.placement.host != p.host) continue;
      ++local_size;
      if (o.slot < a.workers[static_cast<size_t>(r)].slot) ++local_rank;
    }
    CHECK(p.local_rank == local_rank);
    CHECK(p.local_size == local_size);
    int cross_rank = -1, cross_size = 0;
    for (const HostSlots& h : hosts) {
      bool has = false;
      for (const WorkerAssignment& o : a.workers) {
        has = has || (o.placement.host == h.host && o.placement.local_rank == p.local_rank);
      }
      if (!has) continue;
      if (h.host == p.host) cross_rank = cross_size;
      ++cross_size;
    }
    CHECK(p.cross_rank == cross_rank);
    CHECK(p.cross_size == cross_size);
  }
}

// horovodrun's get_host_assignments, written out independently: ranks fill the hosts in order,
// each host's slots in order.
std::vector<RankPlacement> ReferenceLayout(const std::vector<HostSlots>& hosts, int np) {
  std::vector<RankPlacement> ranks;
  std::vector<int> hosts_with_local_rank;
  for (const HostSlots& h : hosts) {
    const size_t first = ranks.size();
    for (int local = 0; local < h.slots && static_cast<int>(ranks.size()) < np; ++local) {
      if (hosts_with_local_rank.size() <= static_cast<size_t>(local)) {
        hosts_with_local_rank.push_back(0);
      }
      RankPlacement p;
      p.host = h.host;
      p.rank = static_cast<int>(ranks.size());
      p.size = np;
      p.local_rank = local;
      p.cross_rank = hosts_with_local_rank[static_cast<size_t>(local)]++;
      ranks.push_back(std::move(p));
    }
    for (size_t r = first; r < ranks.size(); ++r) {
      ranks[r].local_size = static_cast<int>(ranks.size() - first);
    }
  }
  for (RankPlacement& p : ranks) {
    p.cross_size = hosts_with_local_rank[static_cast<size_t>(p.local_rank)];
  }
  return ranks;
}

TEST_CASE("AssignRanks: the first generation is horovodrun's layout", "[elastic][ranks]") {
  const std::vector<HostSlots> hosts =
      GENERATE(std::vector<HostSlots>{{"a", 1}}, std::vector<HostSlots>{{"a", 2}, {"b", 1}},
               std::vector<HostSlots>{{"a", 3}, {"b", 1}, {"c", 2}},
               std::vector<HostSlots>{{"z", 4}, {"a", 4}});
  int total = 0;
  for (const HostSlots& h : hosts) total += h.slots;
  for (int np = 1; np <= total; ++np) {
    INFO(hosts.size() << " hosts, max_np " << np);
    absl::StatusOr<RankAssignment> a = AssignRanks({}, hosts, {1, np});
    REQUIRE(a.ok());
    const std::vector<RankPlacement> reference = ReferenceLayout(hosts, np);
    absl::StatusOr<std::vector<RankPlacement>> layout = LayoutRanks(hosts, np);
    REQUIRE(layout.ok());
    CHECK(*layout == reference);
    REQUIRE(a->workers.size() == reference.size());
    for (size_t r = 0; r < reference.size(); ++r) {
      CHECK(a->workers[r].placement == reference[r]);
      CHECK_FALSE(a->workers[r].previous_rank.has_value());
    }
    CHECK(a->released.empty());
    CHECK(a->min_np_met);
  }
  absl::StatusOr<RankAssignment> all = AssignRanks({}, hosts, {1, std::nullopt});
  REQUIRE(all.ok());
  CHECK(static_cast<int>(all->workers.size()) == total);
}

TEST_CASE("AssignRanks: survivors keep the lowest ranks in their old order", "[elastic][ranks]") {
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 2}};
  const std::vector<PreviousWorker> previous = {
      {"a", 0, 0, true}, {"a", 1, 1, false}, {"b", 0, 2, true}, {"b", 1, 3, true}};
  absl::StatusOr<RankAssignment> a = AssignRanks(previous, hosts, {1, std::nullopt});
  REQUIRE(a.ok());
  CHECK(Seats(*a) == std::vector<std::string>{"a:0", "b:0", "b:1", "a:1"});
  CHECK(PreviousRanks(*a) == std::vector<int>{0, 2, 3, -1});
  CHECK(a->released.empty());
  CheckConsistent(*a, hosts);
  // The refilled slot keeps everyone's local rank.
  CHECK(a->workers[3].placement.local_rank == 1);
  CHECK(a->workers[1].placement.local_rank == 0);
}

TEST_CASE("AssignRanks: rank 0 dies, the lowest survivor becomes rank 0", "[elastic][ranks]") {
  // The example of elastic/rank_assignment.h.
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 2}, {"c", 1}};
  const std::vector<PreviousWorker> previous = {
      {"a", 0, 0, false}, {"a", 1, 1, true}, {"b", 0, 2, true}, {"b", 1, 3, true}};
  absl::StatusOr<RankAssignment> a = AssignRanks(previous, hosts, {1, std::nullopt});
  REQUIRE(a.ok());
  CHECK(Seats(*a) == std::vector<std::string>{"a:1", "b:0", "b:1", "a:0", "c:0"});
  CHECK(PreviousRanks(*a) == std::vector<int>{1, 2, 3, -1, -1});
  CheckConsistent(*a, hosts);
  const RankPlacement& zero = a->workers[0].placement;  // the old rank 1 keeps local rank 1
  CHECK(zero.local_rank == 1);
  CHECK(zero.local_size == 2);
  CHECK(zero.cross_rank == 0);
  CHECK(zero.cross_size == 2);
  const RankPlacement& c = a->workers[4].placement;
  CHECK(c.local_rank == 0);
  CHECK(c.cross_rank == 2);
  CHECK(c.cross_size == 3);
}

TEST_CASE("AssignRanks: add a host, then remove the first one", "[elastic][ranks]") {
  std::vector<HostSlots> hosts = {{"a", 2}};
  absl::StatusOr<RankAssignment> g1 = AssignRanks({}, hosts, {1, std::nullopt});
  REQUIRE(g1.ok());
  CHECK(Seats(*g1) == std::vector<std::string>{"a:0", "a:1"});

  hosts = {{"a", 2}, {"b", 2}};
  absl::StatusOr<RankAssignment> g2 = AssignRanks(AsPrevious(*g1), hosts, {1, std::nullopt});
  REQUIRE(g2.ok());
  CHECK(Seats(*g2) == std::vector<std::string>{"a:0", "a:1", "b:0", "b:1"});
  CHECK(PreviousRanks(*g2) == std::vector<int>{0, 1, -1, -1});
  CheckConsistent(*g2, hosts);
  CHECK(g2->workers[2].placement.cross_rank == 1);
  CHECK(g2->workers[2].placement.cross_size == 2);

  hosts = {{"b", 2}};
  absl::StatusOr<RankAssignment> g3 = AssignRanks(AsPrevious(*g2), hosts, {1, std::nullopt});
  REQUIRE(g3.ok());
  CHECK(Seats(*g3) == std::vector<std::string>{"b:0", "b:1"});
  CHECK(PreviousRanks(*g3) == std::vector<int>{2, 3});
  // a's workers are alive but their host is gone: the driver must stop them.
  CHECK(g3->released == std::vector<PreviousWorker>{{"a", 0, 0, true}, {"a", 1, 1, true}});
  CheckConsistent(*g3, hosts);
  CHECK(g3->workers[0].placement.cross_rank == 0);
  CHECK(g3->workers[0].placement.cross_size == 1);
}

TEST_CASE("AssignRanks: --max-np caps new slots and, if needed, survivors", "[elastic][ranks]") {
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 2}, {"c", 2}};
  absl::StatusOr<RankAssignment> capped = AssignRanks({}, hosts, {2, 5});
  REQUIRE(capped.ok());
  CHECK(Seats(*capped) == std::vector<std::string>{"a:0", "a:1", "b:0", "b:1", "c:0"});
  CHECK(capped->min_np_met);
  CheckConsistent(*capped, hosts);

  // Survivors on b and c, a new host a listed first: survivors first, then a's slots up to 4.
  const std::vector<PreviousWorker> previous = {
      {"b", 0, 0, true}, {"b", 1, 1, true}, {"c", 0, 2, true}};
  absl::StatusOr<RankAssignment> a = AssignRanks(previous, hosts, {1, 4});
  REQUIRE(a.ok());
  CHECK(Seats(*a) == std::vector<std::string>{"b:0", "b:1", "c:0", "a:0"});
  CHECK(a->released.empty());
  CheckConsistent(*a, hosts);

  // More survivors than the cap: the highest previous ranks go.
  absl::StatusOr<RankAssignment> tight = AssignRanks(previous, hosts, {1, 2});
  REQUIRE(tight.ok());
  CHECK(Seats(*tight) == std::vector<std::string>{"b:0", "b:1"});
  CHECK(tight->released == std::vector<PreviousWorker>{{"c", 0, 2, true}});
}

TEST_CASE("AssignRanks: a slot left empty under the cap compacts local ranks", "[elastic][ranks]") {
  // a:0 died, a:1 survives; with --max-np 2 only one new worker fits, on a:0 (a comes first).
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 2}};
  const std::vector<PreviousWorker> previous = {{"a", 0, 0, false}, {"a", 1, 1, true}};
  absl::StatusOr<RankAssignment> a = AssignRanks(previous, hosts, {1, 2});
  REQUIRE(a.ok());
  CHECK(Seats(*a) == std::vector<std::string>{"a:1", "a:0"});
  CheckConsistent(*a, hosts);
  // With --max-np 1 the survivor is alone on a: local rank 0 of 1, though it sits on slot 1.
  absl::StatusOr<RankAssignment> alone = AssignRanks(previous, hosts, {1, 1});
  REQUIRE(alone.ok());
  CHECK(Seats(*alone) == std::vector<std::string>{"a:1"});
  CHECK(alone->workers[0].placement.local_rank == 0);
  CHECK(alone->workers[0].placement.local_size == 1);
}

TEST_CASE("AssignRanks: fewer slots on a host release the workers above them", "[elastic][ranks]") {
  const std::vector<PreviousWorker> previous = {
      {"a", 0, 0, true}, {"a", 1, 1, true}, {"a", 2, 2, true}, {"a", 3, 3, false}};
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 1}};
  absl::StatusOr<RankAssignment> a = AssignRanks(previous, hosts, {1, std::nullopt});
  REQUIRE(a.ok());
  CHECK(Seats(*a) == std::vector<std::string>{"a:0", "a:1", "b:0"});
  CHECK(a->released == std::vector<PreviousWorker>{{"a", 2, 2, true}});  // a:3 is dead already
  CheckConsistent(*a, hosts);
}

TEST_CASE("AssignRanks: uneven hosts get horovodrun's local and cross numbers",
          "[elastic][ranks]") {
  const std::vector<HostSlots> hosts = {{"a", 3}, {"b", 1}, {"c", 2}};
  absl::StatusOr<RankAssignment> a = AssignRanks({}, hosts, {1, std::nullopt});
  REQUIRE(a.ok());
  struct Numbers {
    int local_rank, local_size, cross_rank, cross_size;
  };
  const std::vector<Numbers> expected = {{0, 3, 0, 3}, {1, 3, 0, 2}, {2, 3, 0, 1},
                                         {0, 1, 1, 3}, {0, 2, 2, 3}, {1, 2, 1, 2}};
  REQUIRE(a->workers.size() == expected.size());
  for (size_t r = 0; r < expected.size(); ++r) {
    INFO("rank " << r);
    const RankPlacement& p = a->workers[r].placement;
    CHECK(p.local_rank == expected[r].local_rank);
    CHECK(p.local_size == expected[r].local_size);
    CHECK(p.cross_rank == expected[r].cross_rank);
    CHECK(p.cross_size == expected[r].cross_size);
  }
  CheckConsistent(*a, hosts);
}

TEST_CASE("AssignRanks reports whether --min-np is met", "[elastic][ranks]") {
  const std::vector<HostSlots> hosts = {{"a", 2}};
  absl::StatusOr<RankAssignment> short_of = AssignRanks({}, hosts, {3, 4});
  REQUIRE(short_of.ok());
  CHECK(short_of->workers.size() == 2);
  CHECK_FALSE(short_of->min_np_met);
  absl::StatusOr<RankAssignment> met = AssignRanks({}, hosts, {2, 4});
  REQUIRE(met.ok());
  CHECK(met->min_np_met);
  absl::StatusOr<RankAssignment> none = AssignRanks({{"gone", 0, 0, true}}, {}, {1, std::nullopt});
  REQUIRE(none.ok());
  CHECK(none->workers.empty());
  CHECK_FALSE(none->min_np_met);
  CHECK(none->released.size() == 1);
}

TEST_CASE("AssignRanks rejects inconsistent input", "[elastic][ranks]") {
  const auto bad = [](const std::vector<PreviousWorker>& previous,
                      const std::vector<HostSlots>& hosts, RankLimits limits) {
    absl::StatusOr<RankAssignment> a = AssignRanks(previous, hosts, limits);
    REQUIRE_FALSE(a.ok());
    CHECK(a.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(a.status().message());
  };
  CHECK_THAT(bad({}, {{"a", 1}}, {0, std::nullopt}), Catch::Contains("--min-np 0"));
  CHECK_THAT(bad({}, {{"a", 1}}, {3, 2}), Catch::Contains("--max-np 2 is below --min-np 3"));
  CHECK_THAT(bad({}, {{"a", 1}, {"a", 2}}, {}), Catch::Contains("more than once"));
  CHECK_THAT(bad({}, {{"a", 0}}, {}), Catch::Contains("0 slots"));
  CHECK_THAT(bad({{"a", 0, 1, true}, {"b", 0, 1, false}}, {{"a", 1}}, {}),
             Catch::Contains("two previous workers have rank 1"));
  CHECK_THAT(bad({{"a", 0, 0, true}, {"a", 0, 1, false}}, {{"a", 1}}, {}),
             Catch::Contains("occupy slot 0 of 'a'"));
  CHECK_THAT(bad({{"a", -1, 0, true}}, {{"a", 1}}, {}), Catch::Contains("negative"));
}

}  // namespace
}  // namespace chorus::elastic
