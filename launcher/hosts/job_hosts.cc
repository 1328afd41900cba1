#include "launcher/hosts/job_hosts.h"

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "launcher/hosts/slurm.h"

namespace chorus::launcher {
namespace {

std::string SlurmSource(const Environment& env) {
  for (const char* name : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (auto it = env.find(name); it != env.end()) {
      return absl::StrCat("the Slurm allocation (", name, "=", it->second, ")");
    }
  }
  return "the Slurm allocation";
}

}  // namespace

absl::StatusOr<JobHosts> ResolveJobHosts(const LaunchOptions& o, const Environment& env,
                                         bool use_slurm) {
  JobHosts job;
  if (o.hosts) {
    absl::StatusOr<std::vector<HostSlots>> parsed = ParseHosts(*o.hosts);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("-H: ", parsed.status().message()));
    }
    job.hosts = *std::move(parsed);
    job.source = absl::StrCat("-H ", *o.hosts);
  } else if (o.hostfile) {
    absl::StatusOr<std::vector<HostSlots>> parsed = ReadHostfile(*o.hostfile);
    if (!parsed.ok()) return parsed.status();
    job.hosts = *std::move(parsed);
    job.source = absl::StrCat("--hostfile ", *o.hostfile);
  } else {
    std::optional<std::vector<HostSlots>> slurm;
    if (use_slurm) {
      absl::StatusOr<std::optional<std::vector<HostSlots>>> found = SlurmHosts(env);
      if (!found.ok()) return found.status();
      slurm = *std::move(found);
    }
    if (!slurm) {
      job.hosts = {{"localhost", o.num_proc}};
      job.source = absl::StrCat("the default localhost:", o.num_proc);
      return job;
    }
    job.hosts = *std::move(slurm);
    job.source = SlurmSource(env);
  }
  if (TotalSlots(job.hosts) < o.num_proc) {
    return absl::InvalidArgumentError(absl::StrCat(
        "-np ", o.num_proc, " is more than the ", TotalSlots(job.hosts), " slots of ", job.source));
  }
  return job;
}

}  // namespace chorus::launcher
