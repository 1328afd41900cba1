#include "elastic/host_set.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chorus::elastic {

std::vector<HostSlots> OrderHosts(const std::vector<HostSlots>& previous,
                                  const HostSet& discovered) {
  std::vector<HostSlots> order;
  std::set<std::string> kept;
  for (const HostSlots& h : previous) {
    auto it = discovered.find(h.host);
    if (it == discovered.end() || !kept.insert(h.host).second) continue;
    order.push_back({it->first, it->second});
  }
  for (const auto& [host, slots] : discovered) {  // name order
    if (!kept.contains(host)) order.push_back({host, slots});
  }
  return order;
}

HostDiff DiffHosts(const std::vector<HostSlots>& previous, const std::vector<HostSlots>& current) {
  std::map<std::string, int> old_slots, new_slots;
  for (const HostSlots& h : previous) old_slots.emplace(h.host, h.slots);
  for (const HostSlots& h : current) new_slots.emplace(h.host, h.slots);
  HostDiff diff;
  for (const HostSlots& h : current) {
    auto it = old_slots.find(h.host);
    if (it == old_slots.end()) {
      diff.added.push_back(h.host);
    } else if (it->second != h.slots) {
      diff.slot_changes.push_back({h.host, it->second, h.slots});
    }
  }
  for (const HostSlots& h : previous) {
    if (!new_slots.contains(h.host)) diff.removed.push_back(h.host);
  }
  return diff;
}

std::string DescribeDiff(const HostDiff& diff) {
  if (diff.empty()) return "no change";
  std::vector<std::string> parts;
  if (!diff.added.empty())
    parts.push_back(absl::StrCat("added [", absl::StrJoin(diff.added, ", "), "]"));
  if (!diff.removed.empty()) {
    parts.push_back(absl::StrCat("removed [", absl::StrJoin(diff.removed, ", "), "]"));
  }
  if (!diff.slot_changes.empty()) {
    parts.push_back(absl::StrCat(
        "slots ", absl::StrJoin(diff.slot_changes, ", ", [](std::string* out, const SlotChange& c) {
          absl::StrAppend(out, c.host, " ", c.old_slots, "->", c.new_slots);
        })));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace chorus::elastic
