// File: elastic/host_set.h
//
// The hosts of an elastic job, generation to generation. Discovery (elastic/host_discovery.h)
// yields a set: host -> slots, without order. The driver keeps an ordered list, because ranks
// and cross ranks follow host order, and that order must not be reshuffled by each discovery:
//
//   previous order  [c:2, a:1, d:4]      discovered {a:1, b:2, d:8, e:1}
//   new order       [a:1, d:8, b:2, e:1] (a and d keep their order; b and e are new, by name)
//   diff            added [b, e]  removed [c]  slot changes [d: 4 -> 8]
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_ELASTIC_HOST_SET_H_
#define CHORUS_ELASTIC_HOST_SET_H_

#include <map>
#include <string>
#include <vector>

#include "elastic/hosts.h"

namespace chorus::elastic {

struct SlotChange {
  std::string host;
  int old_slots = 0;
  int new_slots = 0;

  friend bool operator==(const SlotChange&, const SlotChange&) = default;
};

struct HostDiff {
  std::vector<std::string> added;        // in the new order
  std::vector<std::string> removed;      // in the previous order
  std::vector<SlotChange> slot_changes;  // hosts in both lists whose slots differ, new order

  bool empty() const { return added.empty() && removed.empty() && slot_changes.empty(); }
  friend bool operator==(const HostDiff&, const HostDiff&) = default;
};

// The new ordered host list: the hosts of `previous` that are in `discovered`, in their previous
// order, then the other hosts of `discovered` sorted by name. Slots are `discovered`'s.
std::vector<HostSlots> OrderHosts(const std::vector<HostSlots>& previous,
                                  const HostSet& discovered);

// What changed from `previous` to `current` (two ordered lists, each host at most once).
HostDiff DiffHosts(const std::vector<HostSlots>& previous, const std::vector<HostSlots>& current);

// "added [b, e], removed [c], slots d 4->8"; "no change" for an empty diff. For logs.
std::string DescribeDiff(const HostDiff& diff);

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_HOST_SET_H_
