// File: launcher/hosts/rank_layout.h
//
// Which hosts are this machine (workers there are started directly, any other host over ssh).
// The rank layout itself (RankPlacement, LayoutRanks) is elastic/rank_assignment.h's, named here
// for the launcher's code.
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_HOSTS_RANK_LAYOUT_H_
#define CHORUS_LAUNCHER_HOSTS_RANK_LAYOUT_H_

#include <string>

#include "absl/strings/string_view.h"

#include "elastic/rank_assignment.h"

namespace chorus::launcher {

using elastic::HostSlots;
using elastic::LayoutRanks;
using elastic::RankPlacement;

// True when `host` names this machine: localhost, 127.0.0.1, ::1, or `this_hostname` (what
// gethostname() returns) or its first label, compared without regard to case. Workers on such
// hosts are started directly; any other host over ssh.
bool IsLocalHost(absl::string_view host, absl::string_view this_hostname);

// This machine's name (gethostname); "" when it cannot be read.
std::string ThisHostname();

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_HOSTS_RANK_LAYOUT_H_
