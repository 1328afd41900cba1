// File: launcher/ucx_launch.h
//
// chorusrun --gloo (horovodrun's name for it; no Gloo is involved): the MPI-less launch.
// chorusrun starts the workers itself and serves the rendezvous through which they find each
// other (their runtime then talks UCX):
//
//   1. hosts (launcher/job_hosts.h: -H, --hostfile, a Slurm allocation, or localhost:np) and
//      the rank layout (launcher/rank_layout.h);
//   2. every remote host (not this machine) answers `ssh HOST true` within --start-timeout,
//      all checked at once; else one line naming the host, exit status 1, nothing started;
//   3. the rendezvous server (launcher/rendezvous_server.h) with a fresh secret, on 127.0.0.1
//      when every host is local, else on 0.0.0.0; workers dial 127.0.0.1, or the IPv4 address
//      of the first --network-interfaces entry, or this machine's hostname;
//   4. one worker per rank with the environment of launcher/rank_env.h: local ones by fork and
//      exec (COMMAND found in PATH), remote ones over ssh (launcher/ssh_command.h);
//   5. supervision by WorkerGroup (launcher/worker_group.h); output tagged on the terminal or
//      in --output-filename files (launcher/worker_output.h);
//   6. the server stops once every worker has ended.
//
// Exit status: 0 when every rank exited 0. When a rank fails, the others are stopped and the
// last stderr line is "chorusrun: job failed: " + DescribeRankExit(...), the status being the
// rank's shell status (its code, or 128 + signal). A signal N sent to chorusrun stops the job:
// "chorusrun: job stopped: chorusrun received signal N (Name)", status 128 + N. Bad input
// (before anything starts): 2 with one "chorusrun: error: ..." line; an unreachable host or a
// start failure: 1 with one such line.
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
