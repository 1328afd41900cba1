// File: ops/no_progress.h
//
// A transport that bounds its own waits (UCX: UcxTransportOptions::no_progress_timeout) and gives
// up fails the call with Unavailable and this payload: what did not complete and which ranks it
// waited on. The runtime turns it into the same report as the MPI path's watchdog (runtime/
// progress/progress_watchdog.h, DescribeNoProgress, Note [No-progress bound]): one bound
// (CHORUS_NO_PROGRESS_TIMEOUT_SECONDS), one message, whichever transport noticed.
//
// Thread-safety: stateless.
#ifndef CHORUS_OPS_NO_PROGRESS_H_
#define CHORUS_OPS_NO_PROGRESS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace chorus::ops {

struct NoProgress {
  absl::Duration bound;        // how long nothing completed
  std::string call;            // what did not complete ("a UCX transfer")
  std::vector<int32_t> peers;  // the ranks (of the transport: the world's) it waited on

  friend bool operator==(const NoProgress&, const NoProgress&) = default;
};

// Unavailable(`message`) carrying `what`.
absl::Status NoProgressError(const NoProgress& what, std::string message);

// The payload of a NoProgressError (nullopt for any other status).
std::optional<NoProgress> NoProgressOf(const absl::Status& status);

}  // namespace chorus::ops

#endif  // CHORUS_OPS_NO_PROGRESS_H_
