#include "launcher/hosts/rank_layout.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

// {host, rank, size, local_rank, local_size, cross_rank, cross_size}
using P = RankPlacement;

std::vector<RankPlacement> Layout(const std::vector<HostSlots>& hosts, int np) {
  absl::StatusOr<std::vector<RankPlacement>> layout = LayoutRanks(hosts, np);
  INFO(layout.status().ToString());
  REQUIRE(layout.ok());
  return *layout;
}

TEST_CASE("One host: local numbers equal global ones, one cross group each", "[launcher][layout]") {
  const int np = GENERATE(1, 2, 3, 8);
  const std::vector<RankPlacement> layout = Layout({{"localhost", np}}, np);
  REQUIRE(layout.size() == static_cast<size_t>(np));
  for (int r = 0; r < np; ++r) {
    CHECK(layout[static_cast<size_t>(r)] == P{"localhost", r, np, r, np, 0, 1});
  }
}

TEST_CASE("-H localhost:2,127.0.0.1:1 is two hosts", "[launcher][layout]") {
  CHECK(Layout({{"localhost", 2}, {"127.0.0.1", 1}}, 3) == std::vector<RankPlacement>{
                                                               {"localhost", 0, 3, 0, 2, 0, 2},
                                                               {"localhost", 1, 3, 1, 2, 0, 1},
                                                               {"127.0.0.1", 2, 3, 0, 1, 1, 2},
                                                           });
}

TEST_CASE("Uneven slots: cross groups count the hosts that have each local rank",
          "[launcher][layout]") {
  // local rank 0 on a, b, c; 1 on a and c; 2 on c only.
  CHECK(Layout({{"a", 2}, {"b", 1}, {"c", 3}}, 6) == std::vector<RankPlacement>{
                                                         {"a", 0, 6, 0, 2, 0, 3},
                                                         {"a", 1, 6, 1, 2, 0, 2},
                                                         {"b", 2, 6, 0, 1, 1, 3},
                                                         {"c", 3, 6, 0, 3, 2, 3},
                                                         {"c", 4, 6, 1, 3, 1, 2},
                                                         {"c", 5, 6, 2, 3, 0, 1},
                                                     });
}

TEST_CASE("Fewer ranks than slots: later hosts get fewer or none", "[launcher][layout]") {
  CHECK(Layout({{"a", 2}, {"b", 2}, {"c", 2}}, 3) == std::vector<RankPlacement>{
                                                         {"a", 0, 3, 0, 2, 0, 2},
                                                         {"a", 1, 3, 1, 2, 0, 1},
                                                         {"b", 2, 3, 0, 1, 1, 2},
                                                     });
}

TEST_CASE("Every rank's numbers are consistent", "[launcher][layout]") {
  const std::vector<HostSlots> hosts = {{"h0", 4}, {"h1", 1}, {"h2", 3}, {"h3", 4}};
  const int np = GENERATE(1, 5, 9, 12);
  const std::vector<RankPlacement> layout = Layout(hosts, np);
  REQUIRE(layout.size() == static_cast<size_t>(np));
  for (const RankPlacement& p : layout) {
    INFO("rank " << p.rank);
    CHECK(p.size == np);
    CHECK(p.local_rank < p.local_size);
    CHECK(p.cross_rank < p.cross_size);
    int on_host = 0, same_local = 0;
    for (const RankPlacement& q : layout) {
      on_host += q.host == p.host;
      same_local += q.local_rank == p.local_rank;
    }
    CHECK(p.local_size == on_host);
    CHECK(p.cross_size == same_local);
  }
}

TEST_CASE("LayoutRanks rejects impossible requests", "[launcher][layout]") {
  auto [hosts, np, expected] = GENERATE(table<std::vector<HostSlots>, int, std::string>({
      {{{"a", 2}}, 0, "-np 0 is below 1"},
      {{{"a", 2}, {"b", 1}}, 4, "-np 4 is more than the 3 slots"},
      {{}, 1, "-np 1 is more than the 0 slots"},
      {{{"a", 1}, {"a", 1}}, 2, "host 'a' is listed more than once"},
      {{{"a", 0}}, 1, "host 'a' has 0 slots"},
  }));
  absl::StatusOr<std::vector<RankPlacement>> layout = LayoutRanks(hosts, np);
  REQUIRE_FALSE(layout.ok());
  CHECK(layout.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(layout.status().message()), Catch::Contains(expected));
}

TEST_CASE("IsLocalHost knows this machine's names", "[launcher][layout]") {
  auto [host, hostname, local] = GENERATE(table<std::string, std::string, bool>({
      {"localhost", "vm", true},
      {"LocalHost", "vm", true},
      {"127.0.0.1", "vm", true},
      {"::1", "vm", true},
      {"vm", "vm", true},
      {"VM", "vm", true},
      {"vm", "vm.example.com", true},
      {"vm.example.com", "vm.example.com", true},
      {"vm2", "vm", false},
      {"127.0.0.2", "vm", false},
      {"node01", "", false},
      {"vm.other.org", "vm.example.com", false},
  }));
  INFO(host << " on " << hostname);
  CHECK(IsLocalHost(host, hostname) == local);
}

}  // namespace
}  // namespace chorus::launcher
