// File: launcher/engine/rank_env.h
//
// The variables chorusrun --gloo gives each worker, beyond WorkerEnvironment(options)
// (launcher/cli/worker_env.h). The runtime reads them (runtime/config.h); scripts written for
// Horovod's gloo mode read the HOROVOD_* copies. The contract, for rank r of RankPlacement p:
//
//   CHORUS_RANK, CHORUS_SIZE, CHORUS_LOCAL_RANK, CHORUS_LOCAL_SIZE, CHORUS_CROSS_RANK,
//   CHORUS_CROSS_SIZE     p's numbers, decimal
//   CHORUS_HOSTNAME       p.host: the host as the host list names it
//   HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE, HOROVOD_CROSS_RANK,
//   HOROVOD_CROSS_SIZE, HOROVOD_HOSTNAME   the same values
//   CHORUS_RENDEZVOUS_ADDR    host:port of the rendezvous server in chorusrun
//   CHORUS_RENDEZVOUS_SECRET  the job's secret (64 hex digits)
//   CHORUS_RENDEZVOUS_SCOPE   rendezvous.scope: "world/0", "world/<g>" in generation g of an
//                             elastic job
//   CHORUS_START_TIMEOUT_SECONDS  --start-timeout (default 30)
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_ENGINE_RANK_ENV_H_
#define CHORUS_LAUNCHER_ENGINE_RANK_ENV_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "base/config_names.h"
#include "launcher/cli/worker_env.h"
#include "launcher/hosts/rank_layout.h"
#include "launcher/process/environment.h"

namespace chorus::launcher {

inline constexpr char kFirstWorldScope[] = "world/0";

struct RendezvousInfo {
  std::string address;  // host:port as workers dial it
  std::string secret;
  int start_timeout_s = 30;
  std::string scope = kFirstWorldScope;  // CHORUS_RENDEZVOUS_SCOPE
};

// The variables above for `p`, in the order listed.
std::vector<EnvVar> RankEnvironment(const RankPlacement& p, const RendezvousInfo& rendezvous);

// The variables of a worker started to join an elastic job later (launcher/engine/job_engine.h): it
// has no rank yet, only its host and the job's rendezvous (CHORUS_HOSTNAME, HOROVOD_HOSTNAME,
// CHORUS_RENDEZVOUS_ADDR, CHORUS_RENDEZVOUS_SECRET, CHORUS_START_TIMEOUT_SECONDS) and
// CHORUS_ELASTIC_GENERATION=-1 ("joining"): its chorus init waits for a generation that
// places it and takes its rank from there.
std::vector<EnvVar> JoiningEnvironment(const std::string& host, const RendezvousInfo& rendezvous);

// A local worker's whole environment: `launcher_env`, then `worker_vars` and `rank_vars` (later
// ones win).
Environment MergeEnvironment(const Environment& launcher_env,
                             const std::vector<EnvVar>& worker_vars,
                             const std::vector<EnvVar>& rank_vars);

// What travels to a worker started over ssh, sorted by name: the entries of `env` for which
// IsForwarded holds (launcher/process/environment.h: what mpirun's -x sends in MPI mode; never
// config_names::kRendezvousSecret, which the caller adds itself) and whose name a POSIX shell can
// export (letters, digits and '_', not starting with a digit): the remote shell exports them
// (launcher/hosts/ssh_command.h), and handing the others to `env` would put their values on a
// command line.
std::vector<EnvVar> RemoteEnvironment(const Environment& env);

// Whether `name` is a name a POSIX shell can assign (its "Name" grammar).
bool IsShellName(absl::string_view name);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_ENGINE_RANK_ENV_H_
