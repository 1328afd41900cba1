// File: ops/mpi/mpi_wait.h
//
// Completing a non-blocking MPI call without holding a core while the peers are late.
//
// A blocking MPI call (and MPI_Wait) polls in a busy loop until the peers arrive. When a node
// runs more busy threads than it has cores (several ranks, each with a framework thread and
// chorus's background thread), that loop takes the core from the very threads the collective
// waits for: the ranks' negotiation of a step then costs as much CPU as the step itself.
// WaitPolitely polls with MPI_Test for a short spin (peers that are already there answer
// within microseconds), then sleeps between tests, the sleeps doubling up to a cap, so a
// late peer costs this rank almost no CPU and at most the cap in extra latency. The sleeps are
// as short as asked only on a thread that called UsePreciseSleeps (base/timer_slack.h).
//
// Thread-safety: as MPI_Test on `request` (MPI_THREAD_MULTIPLE: any thread, one per request).
#ifndef CHORUS_OPS_MPI_MPI_WAIT_H_
#define CHORUS_OPS_MPI_MPI_WAIT_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include <mpi.h>

namespace chorus::ops {

struct PoliteWait {
  absl::Duration spin = absl::Microseconds(20);        // MPI_Test back to back this long first
  absl::Duration first_sleep = absl::Microseconds(5);  // then sleep this long, doubling
  absl::Duration max_sleep = absl::Microseconds(200);  // up to this
};

// Completes `*request` (MPI_Test until done, as above). `call` names the operation in errors.
absl::Status WaitPolitely(MPI_Request* request, const char* call, const PoliteWait& how = {});

}  // namespace chorus::ops

#endif  // CHORUS_OPS_MPI_MPI_WAIT_H_
