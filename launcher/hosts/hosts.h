// File: launcher/hosts/hosts.h
//
// Host lists of chorusrun: the -H/--hosts string ("host1:2,host2:4") and hostfiles ("host slots=N"
// lines), as horovodrun reads them. Pure functions except ReadHostfile, which reads one file.
//
// Thread-safety: stateless; safe to call from any thread.
#ifndef CHORUS_LAUNCHER_HOSTS_HOSTS_H_
#define CHORUS_LAUNCHER_HOSTS_HOSTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "elastic/hosts.h"

namespace chorus::launcher {

using elastic::HostSlots;
using elastic::IsValidHostName;
using elastic::kMaxSlots;
using elastic::ParseSlotCount;

// Parses "host:slots[,host:slots...]". Every entry needs a non-empty host name (letters, digits,
// '.', '-', '_') and a slot count in [1, 1000000]; a host may appear once. Errors are
// InvalidArgument naming the offending entry.
absl::StatusOr<std::vector<HostSlots>> ParseHosts(absl::string_view text);

// Parses hostfile contents: one "host [slots=N]" per line (slots default to 1, as Open MPI reads
// it); '#' starts a comment; blank lines are skipped. `file_name` only labels errors, which are
// InvalidArgument naming the file and line. A file without any host is an error.
absl::StatusOr<std::vector<HostSlots>> ParseHostfile(absl::string_view contents,
                                                     absl::string_view file_name);

// Reads and parses the hostfile at `path`; NotFound when it cannot be read.
absl::StatusOr<std::vector<HostSlots>> ReadHostfile(const std::string& path);

// "host1:2,host2:4": the form mpirun's -H takes.
std::string FormatHosts(const std::vector<HostSlots>& hosts);

int64_t TotalSlots(const std::vector<HostSlots>& hosts);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_HOSTS_HOSTS_H_
