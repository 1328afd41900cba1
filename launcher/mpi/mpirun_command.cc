#include "launcher/mpi/mpirun_command.h"

#include <algorithm>
#include <string_view>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

#include "base/config_names.h"
#include "launcher/cli/args.h"
#include "launcher/engine/rank_env.h"
#include "launcher/hosts/rank_layout.h"
#include "launcher/process/shell_words.h"

namespace chorus::launcher {

Environment MpirunEnvironment(const Environment& launcher_env,
                              const std::vector<std::pair<std::string, std::string>>& worker_vars,
                              bool as_root) {
  Environment env = launcher_env;
  for (const auto& [name, value] : worker_vars) env[name] = value;
  if (as_root) {
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  }
  return env;
}

int LocalRanks(const std::vector<HostSlots>& hosts, int num_proc,
               const std::string& this_hostname) {
  int remaining = num_proc, local = 0;
  for (const HostSlots& h : hosts) {
    const int n = std::min(std::max(h.slots, 0), remaining);
    if (IsLocalHost(h.host, this_hostname)) local += n;
    remaining -= n;
  }
  return local;
}

absl::StatusOr<std::vector<std::string>> BuildMpirunArgv(const LaunchOptions& o,
                                                         const MpirunJob& job) {
  std::vector<std::string> argv = {job.mpirun};
  if (job.as_root) argv.push_back("--allow-run-as-root");
  argv.push_back("--tag-output");
  argv.insert(argv.end(), {"-np", absl::StrCat(o.num_proc), "-H", FormatHosts(job.hosts)});
  if (o.binding_args) {
    absl::StatusOr<std::vector<std::string>> words = ShellSplit(*o.binding_args);
    if (!words.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--binding-args: ", words.status().message()));
    }
    argv.insert(argv.end(), words->begin(), words->end());
  } else {
    argv.insert(argv.end(), {"-bind-to", "none", "-map-by", "slot"});
  }
  if (o.tcp) argv.insert(argv.end(), {"-mca", "pml", "ob1", "-mca", "btl", "^openib"});
  std::vector<std::string> ssh;
  if (o.ssh_port) ssh.push_back(absl::StrCat("-p ", *o.ssh_port));
  if (o.ssh_identity_file) ssh.push_back(absl::StrCat("-i ", *o.ssh_identity_file));
  if (!ssh.empty()) argv.insert(argv.end(), {"-mca", "plm_rsh_args", absl::StrJoin(ssh, " ")});
  if (!o.network_interfaces.empty()) {
    argv.insert(argv.end(),
                {"-mca", "btl_tcp_if_include", absl::StrJoin(o.network_interfaces, ",")});
  }
  const bool user_chose_yield =
      job.environment.contains("OMPI_MCA_mpi_yield_when_idle") ||
      (o.mpi_args && absl::StrContains(*o.mpi_args, "mpi_yield_when_idle"));
  if (!user_chose_yield && job.local_cores > 0 &&
      LocalRanks(job.hosts, o.num_proc, job.this_hostname) > job.local_cores) {
    argv.insert(argv.end(), {"-mca", "mpi_yield_when_idle", "1"});
  }
  if (o.prefix_output_with_timestamp) argv.push_back("--timestamp-output");
  if (o.output_filename) argv.insert(argv.end(), {"--output-filename", *o.output_filename});
  for (const std::string& name : ExportedNames(job.environment)) {
    argv.insert(argv.end(), {"-x", name});
  }
  if (o.mpi_args) {
    absl::StatusOr<std::vector<std::string>> words = ShellSplit(*o.mpi_args);
    if (!words.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--mpi-args: ", words.status().message()));
    }
    argv.insert(argv.end(), words->begin(), words->end());
  }
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  return argv;
}

bool MpirunUsesSsh(const LaunchOptions& o, const Environment& env) {
  static constexpr absl::string_view kLauncherParams[] = {"plm", "plm_rsh_agent", "orte_rsh_agent"};
  for (absl::string_view param : kLauncherParams) {
    if (env.contains(absl::StrCat("OMPI_MCA_", param))) return false;
  }
  if (env.contains("SLURM_JOB_ID") || env.contains("SLURM_JOBID")) return false;
  if (o.mpi_args) {
    absl::StatusOr<std::vector<std::string>> words = ShellSplit(*o.mpi_args);
    for (const std::string& word : words.ok() ? *words : std::vector<std::string>{}) {
      if (absl::c_linear_search(kLauncherParams, word)) return false;
    }
  }
  return true;
}

std::optional<std::vector<std::string>> MpirunRankHosts(const LaunchOptions& o,
                                                        const MpirunJob& job) {
  if (o.binding_args) return std::nullopt;
  for (const auto& [name, value] : job.environment) {
    if (absl::StartsWith(name, "OMPI_MCA_rmaps_") && name != "OMPI_MCA_rmaps_base_oversubscribe") {
      return std::nullopt;
    }
  }
  if (o.mpi_args) {
    // Options that place or number ranks otherwise (Open MPI 4.1's mpirun --help), and any
    // MCA parameter of the mapper (rmaps_*).
    static constexpr absl::string_view kMapping[] = {
        "map-by",        "rank-by",      "rankfile",    "rf",
        "npernode",      "npersocket",   "pernode",     "ppr",
        "bynode",        "bysocket",     "bycore",      "H",
        "host",          "hostfile",     "machinefile", "default-hostfile",
        "cpus-per-proc", "cpus-per-rank"};
    absl::StatusOr<std::vector<std::string>> words = ShellSplit(*o.mpi_args);
    if (!words.ok()) return std::nullopt;
    for (const std::string& word : *words) {
      absl::string_view option = word;
      if (absl::StrContains(option, "rmaps")) return std::nullopt;
      if (!absl::ConsumePrefix(&option, "-")) continue;
      absl::ConsumePrefix(&option, "-");
      option = option.substr(0, option.find('='));
      if (absl::c_linear_search(kMapping, option)) return std::nullopt;
    }
  }
  absl::StatusOr<std::vector<RankPlacement>> layout = LayoutRanks(job.hosts, o.num_proc);
  if (!layout.ok()) return std::nullopt;
  std::vector<std::string> hosts;
  for (const RankPlacement& p : *layout) hosts.push_back(p.host);
  return hosts;
}

}  // namespace chorus::launcher
