// File: launcher/rank_layout.h
//
// Where each rank of an MPI-less job runs, and which hosts are this machine. Ranks fill the
// hosts in order, each host's slots in order (horovodrun's get_host_assignments):
//
//   -H a:2,b:1 -np 3   rank 0: a local 0/2 cross 0/2   rank 1: a local 1/2 cross 0/1
//                      rank 2: b local 0/1 cross 1/2
//
// local_rank/local_size: the rank's index among the ranks on its host, and their count.
// cross_rank/cross_size: among the hosts that have a rank with this local_rank, the index of
// this rank's host (in host order) and their count.
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_RANK_LAYOUT_H_
#define CHORUS_LAUNCHER_RANK_LAYOUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "launcher/hosts.h"

namespace chorus::launcher {

struct RankPlacement {
  std::string host;  // as the host list names it
  int rank = 0;
  int size = 0;
  int local_rank = 0;
  int local_size = 0;
  int cross_rank = 0;
  int cross_size = 0;

  friend bool operator==(const RankPlacement&, const RankPlacement&) = default;
};

// One placement per rank, in rank order. Hosts past the last rank get none. InvalidArgument when
// num_proc < 1, a host has fewer than 1 slot or is listed twice, or the slots add up to fewer
// than num_proc.
absl::StatusOr<std::vector<RankPlacement>> LayoutRanks(const std::vector<HostSlots>& hosts,
                                                       int num_proc);

// True when `host` names this machine: localhost, 127.0.0.1, ::1, or `this_hostname` (what
// gethostname() returns) or its first label, compared without regard to case. Workers on such
// hosts are started directly; any other host over ssh.
bool IsLocalHost(absl::string_view host, absl::string_view this_hostname);

// This machine's name (gethostname); "" when it cannot be read.
std::string ThisHostname();

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_RANK_LAYOUT_H_
