#include "launcher/rank_layout.h"

#include <unistd.h>

#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace chorus::launcher {

absl::StatusOr<std::vector<RankPlacement>> LayoutRanks(const std::vector<HostSlots>& hosts,
                                                       int num_proc) {
  if (num_proc < 1) {
    return absl::InvalidArgumentError(absl::StrCat("-np ", num_proc, " is below 1"));
  }
  std::set<std::string> seen;
  for (const HostSlots& h : hosts) {
    if (h.slots < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("host '", h.host, "' has ", h.slots, " slots; expected at least 1"));
    }
    if (!seen.insert(h.host).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("host '", h.host, "' is listed more than once"));
    }
  }
  if (TotalSlots(hosts) < num_proc) {
    return absl::InvalidArgumentError(absl::StrCat("-np ", num_proc, " is more than the ",
                                                   TotalSlots(hosts), " slots of the hosts"));
  }

  std::vector<RankPlacement> ranks;
  // hosts_with_local_rank[l]: how many hosts so far have a rank with local rank l.
  std::vector<int> hosts_with_local_rank;
  for (const HostSlots& h : hosts) {
    const size_t first = ranks.size();
    for (int local = 0; local < h.slots && static_cast<int>(ranks.size()) < num_proc; ++local) {
      if (hosts_with_local_rank.size() <= static_cast<size_t>(local)) {
        hosts_with_local_rank.push_back(0);
      }
      RankPlacement p;
      p.host = h.host;
      p.rank = static_cast<int>(ranks.size());
      p.size = num_proc;
      p.local_rank = local;
      p.cross_rank = hosts_with_local_rank[local]++;
      ranks.push_back(std::move(p));
    }
    for (size_t r = first; r < ranks.size(); ++r) {
      ranks[r].local_size = static_cast<int>(ranks.size() - first);
    }
  }
  for (RankPlacement& p : ranks) p.cross_size = hosts_with_local_rank[p.local_rank];
  return ranks;
}

bool IsLocalHost(absl::string_view host, absl::string_view this_hostname) {
  if (absl::EqualsIgnoreCase(host, "localhost") || host == "127.0.0.1" || host == "::1") {
    return true;
  }
  if (this_hostname.empty()) return false;
  const absl::string_view short_name = this_hostname.substr(0, this_hostname.find('.'));
  return absl::EqualsIgnoreCase(host, this_hostname) || absl::EqualsIgnoreCase(host, short_name);
}

std::string ThisHostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace chorus::launcher
