// File: elastic/hosts.h
//
// The host vocabulary every part of chorusrun shares: a host with its slot count, a discovered
// set of hosts, and what a host name and a slot count may look like (as horovodrun reads them in
// -H, hostfiles and discovery output).
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_ELASTIC_HOSTS_H_
#define CHORUS_ELASTIC_HOSTS_H_

#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace chorus::elastic {

inline constexpr int kMaxSlots = 1000000;

struct HostSlots {
  std::string host;
  int slots = 0;

  friend bool operator==(const HostSlots&, const HostSlots&) = default;
};

// A discovered set of hosts: name -> slots (each >= 1). A std::map, so that every walk over it
// is in name order.
using HostSet = std::map<std::string, int>;

// True for a non-empty host name of letters, digits, '.', '-' and '_' (no ':', no spaces).
bool IsValidHostName(absl::string_view host);

// Parses a slot count: plain decimal digits (no sign, no spaces) with a value in [1, kMaxSlots].
bool ParseSlotCount(absl::string_view text, int* slots);

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_HOSTS_H_
