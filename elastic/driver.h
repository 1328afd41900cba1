// File: elastic/driver.h
//
// chorusrun's elastic mode: the driver loop. The steps, repeated until the job ends:
//
// 1. Discover the hosts every CHORUS_ELASTIC_DISCOVERY_INTERVAL seconds (default 1, fractional
//    allowed) with --host-discovery-script (elastic/host_discovery.h), or use the -H/--hostfile
//    hosts as the whole, fixed pool. The script runs under the Supervisor like a worker, so it
//    never blocks the loop. A failure of the very first discovery is fatal; later failures keep
//    the last good set (with a warning).
// 2. Drop blacklisted hosts (elastic/blacklist.h), order the rest (elastic/host_set.h), assign
//    ranks (elastic/rank_assignment.h: survivors keep their rank order; --max-np caps).
// 3. Start a generation when at least --min-np (default -np) slots exist; wait for them up to
//    --elastic-timeout (default HOROVOD_ELASTIC_TIMEOUT, else 600 s), then fail.
// 4. On a membership change (a host added or removed, slots changed so that the ranks change, a
//    worker that ended or fell silent) generation g + 1 starts in place: the surviving workers
//    keep running. chorusrun publishes the generation through the rendezvous service (Watch in
//    proto/rendezvous.proto; elastic/generation_notice.h): every worker's id, rank and variables,
//    and whether it was aborted (a worker is gone: the survivors' pending ops fail at once and
//    they roll back to their last commit) or not (hosts added or removed: the survivors act on it
//    at their next commit). Survivors adopt their new places in process
//    (runtime/elastic/membership_watcher.h), workers for new slots are started with the same
//    variables, and workers without a place (host gone from discovery, --max-np) are released:
//    they exit at their next commit (stopped after 60 s otherwise), which is not an event.
//    When the survivors alone would be fewer than --min-np, they are stopped too and the next
//    generation starts afresh once enough slots exist. Each reset is logged on stderr as one line:
//      chorusrun: generation 3: -hostB (rank 2 killed by SIGKILL) +hostC, size 4 -> 4, cause: ...
//    Workers heartbeat through their Watch calls; one silent for 5 s (hung, SIGSTOPped, cut
//    off) is killed and counts as failed.
//
// How workers end:
// - exit 0: the job is done (as in Horovod); the others get the grace period, then are
//   stopped; status 0.
// - non-zero exit, or a signal other than SIGTERM: its host is blacklisted (with a cooldown
//   under --blacklist-cooldown-range), and a reset follows.
// - SIGTERM not sent by chorusrun (a spot-instance notice): the worker leaves, no blacklist; a
//   reset follows.
// A host missing from discovery: its workers are stopped, no blacklist. The (K+1)-th reset
// under --reset-limit K ends the job. Every host blacklisted, or fewer than --min-np slots for
// longer than --elastic-timeout: the job ends. Each failure ends with one line
// "chorusrun: elastic job failed: <cause>" and status 1. A SIGINT/SIGTERM to chorusrun is
// forwarded to the workers: status 128 + N.
//
// Thread-safety: call from the main thread only (the Supervisor owns the signals).
#ifndef CHORUS_ELASTIC_DRIVER_H_
#define CHORUS_ELASTIC_DRIVER_H_

#include "launcher/mpirun_command.h"
#include "launcher/options.h"

namespace chorus::elastic {

// Runs the elastic job `options` describes (options.is_elastic) in `launcher_env`, chorusrun's
// own environment; returns chorusrun's exit status (2 for bad input, before anything starts).
int RunElasticJob(const launcher::LaunchOptions& options,
                  const launcher::Environment& launcher_env);

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_DRIVER_H_
