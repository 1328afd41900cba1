// File: ops/mpi/mpi_wait.h
//
// Completing a non-blocking MPI call without holding a core while the peers are late, and
// without waiting forever for a peer that stopped answering.
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
// A wait has a deadline (none by default): a peer lost without closing its connections (a host
// down, a cut link, a stopped process) is noticed by no MPI transport, so the caller bounds how
// long it waits (runtime/progress/progress_watchdog.h, Note [No-progress bound]).
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
  // Give up when the request has not completed by then (it is tested once more at the
  // deadline; no sleep goes past it).
  absl::Time deadline = absl::InfiniteFuture();
  // Time this thread did not run, in stretches longer than this beyond what it asked to sleep
  // (the process was stopped, its host paused or starved), moves the deadline by as much: a
  // rank that was frozen itself must not blame its peers, whose answers may be waiting.
  absl::Duration frozen_after = absl::Seconds(1);
};

// Completes `*request` (MPI_Test until done, as above). `call` names the operation in errors.
// DeadlineExceeded when `how.deadline` passed first: the request is then still active (MPI
// cannot cancel a collective), and the communicator must not be used again; the caller ends
// the job.
absl::Status WaitPolitely(MPI_Request* request, const char* call, const PoliteWait& how = {});

}  // namespace chorus::ops

#endif  // CHORUS_OPS_MPI_MPI_WAIT_H_
