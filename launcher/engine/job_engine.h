// File: launcher/engine/job_engine.h
//
// chorusrun's one engine for MPI-less jobs: a fixed-size --gloo job and an elastic job (any of
// horovodrun's elastic flags) run the same code. A fixed-size job is an elastic job with
// min = max = -np, the hosts given once and no reset (elastic/next_generation.h says what
// differs).
//
// The engine applies elastic::NextGeneration's decisions and feeds it what happened:
//
//   hosts        launcher/engine/discovery_runner.h (the discovery script every interval, or the
//   fixed
//                pool), each new remote host checked with `ssh HOST true` first
//                (launcher/hosts/host_checks.h)
//   workers      launcher/engine/worker_fleet.h: started locally or over ssh, their output tagged
//   with
//                their ranks, their ends classified
//   generations  published through the rendezvous service in chorusrun
//                (launcher/engine/rendezvous_server.h; Watch in proto/rendezvous.proto), which the
//                workers' membership watchers follow; each worker's Watch is its heartbeat: one
//                silent for 5 s (hung, stopped, cut off) is killed and counts as lost, so a
//                fixed-size job that loses a host ends within seconds instead of hanging
//   signals      SIGINT/SIGTERM to chorusrun (launcher/process/supervisor.h's self-pipe)
//
// The loop either acts on a decision or blocks in poll(2) until a worker ends, its output
// arrives, a signal comes, or the next deadline (the decision's wake-up, the next discovery
// run, a script or ssh check timeout, the next heartbeat check every 500 ms): it never spins,
// and a signal is handled in every state.
//
// Exit status: 0 when the job succeeded (fixed-size: every worker exited 0; elastic: a worker
// exited 0 and the others were stopped); a fixed-size job that lost a worker: that worker's
// shell status and "chorusrun: job failed: rank R on H <how>"; an elastic job that failed: 1 and
// "chorusrun: elastic job failed: <cause>"; a signal N to chorusrun: 128 + N and "chorusrun: job
// stopped: ..."; bad input (before anything starts): 2; a host ssh cannot reach in a fixed-size
// job, or a start failure: 1; each with one "chorusrun: error: ..." line.
//
// Thread-safety: call from the main thread only (the Supervisor owns the signals).
#ifndef CHORUS_LAUNCHER_ENGINE_JOB_ENGINE_H_
#define CHORUS_LAUNCHER_ENGINE_JOB_ENGINE_H_

#include "launcher/options.h"
#include "launcher/process/environment.h"

namespace chorus::launcher {

// SIGTERM -> SIGKILL, for the workers here and (in the ssh script) on remote hosts.
inline constexpr int kGraceSeconds = 3;

// Runs the MPI-less job `options` describes (options.gloo or options.is_elastic) in
// `launcher_env`, chorusrun's own environment; returns chorusrun's exit status.
int RunMpiLessJob(const LaunchOptions& options, const Environment& launcher_env);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_ENGINE_JOB_ENGINE_H_
