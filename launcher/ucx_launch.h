// File: launcher/ucx_launch.h
//
// chorusrun --gloo (horovodrun's name for it; no Gloo is involved): the MPI-less launch.
// chorusrun starts the workers itself (local ones by fork and exec, remote ones over ssh),
// serves the rendezvous through which they find each other (their runtime then talks UCX),
// supervises them, and stops the server once every worker has ended. The steps:
// docs/launcher.md.
//
// Exit status: 0 when every rank exited 0. A failing rank stops the others; the status is the
// rank's shell status and the last stderr line "chorusrun: job failed: " + DescribeRankExit(...).
// A signal N to chorusrun stops the job: status 128 + N, "chorusrun: job stopped: ...". Bad
// input (before anything starts): 2; an unreachable host or a start failure: 1; each with one
// "chorusrun: error: ..." line.
//
// Thread-safety: call from the main thread only (see WorkerGroup).
#ifndef CHORUS_LAUNCHER_UCX_LAUNCH_H_
#define CHORUS_LAUNCHER_UCX_LAUNCH_H_

#include <string>

#include "launcher/mpirun_command.h"
#include "launcher/options.h"
#include "launcher/rank_layout.h"
#include "launcher/worker_group.h"

namespace chorus::launcher {

// SIGTERM -> SIGKILL, for the workers here and (in the ssh script) on remote hosts.
inline constexpr int kGraceSeconds = 3;

// Runs the job described by `options` (options.gloo) in `launcher_env`, chorusrun's own
// environment; returns chorusrun's exit status.
int RunUcxJob(const LaunchOptions& options, const Environment& launcher_env);

// "rank 1 on localhost exited with code 3", "rank 1 on localhost was killed by signal 9
// (Killed)". For a rank started over ssh (`remote`) a code of 255 or 129-192 gets a note: ssh
// uses 255 for its own failures, and the remote shell reports a signal N as 128 + N.
std::string DescribeRankExit(const RankPlacement& placement, bool remote, const WorkerExit& exit);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_UCX_LAUNCH_H_
