// File: launcher/hosts/job_hosts.h
//
// Where a job's hosts come from, in horovodrun's order: -H/--hosts, else --hostfile, else (with
// `use_slurm`) the Slurm allocation chorusrun runs in (launcher/hosts/slurm.h), else
// localhost with -np slots.
//
// Thread-safety: stateless; reads the hostfile only.
#ifndef CHORUS_LAUNCHER_HOSTS_JOB_HOSTS_H_
#define CHORUS_LAUNCHER_HOSTS_JOB_HOSTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "launcher/hosts/hosts.h"
#include "launcher/options.h"
#include "launcher/process/environment.h"

namespace chorus::launcher {

struct JobHosts {
  std::vector<HostSlots> hosts;
  // For messages: "-H a:1,b:2", "--hostfile F", "the Slurm allocation (SLURM_JOB_NODELIST=...)",
  // or "the default localhost:N".
  std::string source;
};

// The hosts of the job; `env` is chorusrun's environment (read for the Slurm variables only).
// Errors, all InvalidArgument except an unreadable hostfile (NotFound): a malformed -H string,
// hostfile or Slurm variable; fewer slots in total than -np.
absl::StatusOr<JobHosts> ResolveJobHosts(const LaunchOptions& options, const Environment& env,
                                         bool use_slurm);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_HOSTS_JOB_HOSTS_H_
