// File: launcher/engine/worker_spec.h
//
// How chorusrun starts one worker of an MPI-less job (launcher/engine/worker_fleet.h), fixed-size
// or elastic alike: a local worker runs the resolved program with its whole environment; a remote
// one runs ssh, which starts the command in the same directory with the worker's forwarded
// variables (launcher/engine/rank_env.h, RemoteEnvironment) and the rendezvous secret, all read
// from its stdin (launcher/hosts/ssh_command.h).
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_ENGINE_WORKER_SPEC_H_
#define CHORUS_LAUNCHER_ENGINE_WORKER_SPEC_H_

#include <string>
#include <vector>

#include "launcher/hosts/ssh_command.h"
#include "launcher/process/environment.h"
#include "launcher/process/spawn.h"

namespace chorus::launcher {

// What every worker of a job is started with; resolved once per job.
struct WorkerStart {
  std::string program;               // local workers: the command's program, resolved on PATH
  std::vector<std::string> command;  // the user's command, argv[0] included
  std::string ssh_path;              // remote workers: ssh, resolved on PATH
  SshOptions ssh;
  std::string cwd;           // remote workers run the command here
  Environment launcher_env;  // chorusrun's own: ssh's environment
  std::string secret;        // the rendezvous secret, written to ssh's stdin
  int grace_seconds = 3;     // remote: SIGTERM -> SIGKILL of the command when ssh ends
};

// The spec of a worker whose whole environment is `env`: local, or over ssh to `host`.
WorkerSpec MakeWorkerSpec(const WorkerStart& start, const std::string& host, bool remote,
                          const Environment& env);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_ENGINE_WORKER_SPEC_H_
