#include "elastic/host_set.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::elastic {
namespace {

TEST_CASE("OrderHosts keeps survivors in order and appends new hosts by name",
          "[elastic][host_set]") {
  const std::vector<HostSlots> previous = {{"c", 2}, {"a", 1}, {"d", 4}};
  const HostSet discovered = {{"a", 1}, {"b", 2}, {"d", 8}, {"e", 1}};
  const std::vector<HostSlots> order = OrderHosts(previous, discovered);
  CHECK(order == std::vector<HostSlots>{{"a", 1}, {"d", 8}, {"b", 2}, {"e", 1}});

  const HostDiff diff = DiffHosts(previous, order);
  CHECK(diff.added == std::vector<std::string>{"b", "e"});
  CHECK(diff.removed == std::vector<std::string>{"c"});
  CHECK(diff.slot_changes == std::vector<SlotChange>{{"d", 4, 8}});
  CHECK(DescribeDiff(diff) == "added [b, e], removed [c], slots d 4->8");
}

TEST_CASE("OrderHosts: the first generation is sorted by name", "[elastic][host_set]") {
  const HostSet discovered = {{"node10", 1}, {"node2", 2}, {"alpha", 3}};
  const std::vector<HostSlots> order = OrderHosts({}, discovered);
  CHECK(order == std::vector<HostSlots>{{"alpha", 3}, {"node10", 1}, {"node2", 2}});
  const HostDiff diff = DiffHosts({}, order);
  CHECK(diff.added == std::vector<std::string>{"alpha", "node10", "node2"});
  CHECK(diff.removed.empty());
  CHECK(diff.slot_changes.empty());
}

TEST_CASE("OrderHosts is stable when nothing changes", "[elastic][host_set]") {
  const std::vector<HostSlots> previous = {{"z", 1}, {"m", 2}, {"a", 3}};
  const HostSet same = {{"a", 3}, {"m", 2}, {"z", 1}};
  const std::vector<HostSlots> order = OrderHosts(previous, same);
  CHECK(order == previous);
  CHECK(DiffHosts(previous, order).empty());
  CHECK(DescribeDiff(DiffHosts(previous, order)) == "no change");
  // Applying it again changes nothing either.
  CHECK(OrderHosts(order, same) == order);
}

TEST_CASE("OrderHosts: a removed host that comes back is appended as new", "[elastic][host_set]") {
  std::vector<HostSlots> order = OrderHosts({}, {{"a", 1}, {"b", 1}, {"c", 1}});
  order = OrderHosts(order, {{"b", 1}, {"c", 1}});
  CHECK(order == std::vector<HostSlots>{{"b", 1}, {"c", 1}});
  order = OrderHosts(order, {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}});
  CHECK(order == std::vector<HostSlots>{{"b", 1}, {"c", 1}, {"a", 1}, {"d", 1}});
}

TEST_CASE("OrderHosts: everything gone, and slot changes only", "[elastic][host_set]") {
  const std::vector<HostSlots> previous = {{"b", 2}, {"a", 2}};
  CHECK(OrderHosts(previous, {}).empty());
  const HostDiff gone = DiffHosts(previous, {});
  CHECK(gone.removed == std::vector<std::string>{"b", "a"});
  CHECK(gone.added.empty());

  const std::vector<HostSlots> order = OrderHosts(previous, {{"a", 1}, {"b", 4}});
  CHECK(order == std::vector<HostSlots>{{"b", 4}, {"a", 1}});
  const HostDiff diff = DiffHosts(previous, order);
  CHECK(diff.added.empty());
  CHECK(diff.removed.empty());
  CHECK(diff.slot_changes == std::vector<SlotChange>{{"b", 2, 4}, {"a", 2, 1}});
}

}  // namespace
}  // namespace chorus::elastic
