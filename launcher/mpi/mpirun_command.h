// File: launcher/mpi/mpirun_command.h
//
// The mpirun (Open MPI) command line of an MPI-mode chorusrun job, as horovodrun builds it
// (horovod/runner/mpi_run.py), and the environment mpirun runs in. Pure functions.
//
//   mpirun [--allow-run-as-root] --tag-output -np N -H host:slots,... -bind-to none -map-by slot
//          [-mca pml ob1 -mca btl ^openib  (--tcp)] [-mca plm_rsh_args "-p P -i FILE"]
//          [-mca btl_tcp_if_include IFACES] [-mca mpi_yield_when_idle 1  (see below)]
//          [--timestamp-output] [--output-filename DIR] -x NAME... [--mpi-args words]
//          COMMAND ARGS...
//
// -x NAME names a variable only: mpirun takes its value from its own environment (the one
// MpirunEnvironment builds) and sends it to the other hosts' Open MPI daemons inside its launch
// message, so no value is on any command line, here or there, and any byte string arrives as
// it was. ExportedNames says which names go.
//
// mpi_yield_when_idle: -H declares every rank a slot, so Open MPI never sees this machine as
// oversubscribed and its waits spin. When more ranks run here than the machine has cores, each
// rank's spin takes the core from a rank (or a rank's background thread) that has work, and
// jobs slow down several times (figures in docs/perf.md).
// So chorusrun asks waiting ranks to yield then, unless the user set the parameter already
// (OMPI_MCA_mpi_yield_when_idle, or in --mpi-args).
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_MPI_MPIRUN_COMMAND_H_
#define CHORUS_LAUNCHER_MPI_MPIRUN_COMMAND_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "launcher/hosts/hosts.h"
#include "launcher/options.h"
#include "launcher/process/environment.h"

namespace chorus::launcher {

struct MpirunJob {
  std::string mpirun = "mpirun";  // the program; argv[0] of the result
  bool as_root = false;           // adds --allow-run-as-root
  std::vector<HostSlots> hosts;
  // The environment mpirun runs in (MpirunEnvironment's result): the names exported with -x are
  // taken from it.
  Environment environment;
  // This machine: its name (gethostname) and its cores (0: unknown), to count the ranks that
  // run here (hosts for which IsLocalHost holds, filled in order as -map-by slot does).
  std::string this_hostname;
  int local_cores = 0;
};

// How many of the job's `num_proc` ranks run on this machine: slots are filled host by host in
// order (Open MPI's -map-by slot), and a host is this machine when IsLocalHost says so.
int LocalRanks(const std::vector<HostSlots>& hosts, int num_proc, const std::string& this_hostname);

// The environment for mpirun: `launcher_env` plus `worker_vars` (which win), plus
// OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 when `as_root`.
Environment MpirunEnvironment(const Environment& launcher_env,
                              const std::vector<std::pair<std::string, std::string>>& worker_vars,
                              bool as_root);

// mpirun's argv. InvalidArgument when --mpi-args or --binding-args do not split like shell words.
absl::StatusOr<std::vector<std::string>> BuildMpirunArgv(const LaunchOptions& options,
                                                         const MpirunJob& job);

// Whether mpirun starts its daemons on other hosts with ssh (Open MPI's rsh launcher with its
// default agent, ssh found on PATH), which chorusrun then checks first
// (launcher/hosts/host_checks.h). Not when the environment or --mpi-args choose the launcher or its
// agent (the MCA parameters plm, plm_rsh_agent, orte_rsh_agent: OMPI_MCA_<name>, or the name in
// --mpi-args), nor inside a Slurm job (SLURM_JOB_ID or SLURM_JOBID set: Open MPI then starts its
// daemons with srun).
bool MpirunUsesSsh(const LaunchOptions& options, const Environment& env);

// Where mpirun runs each rank (index: rank), as the host list names the hosts: -H's hosts
// filled in order, each host's slots in order (-map-by slot), which is elastic::LayoutRanks'
// layout. nullopt when chorusrun cannot tell: --binding-args replaces -map-by slot, or
// --mpi-args or an OMPI_MCA_rmaps_* variable (but rmaps_base_oversubscribe, which changes
// nothing while -np fits the slots) may choose another mapping or ranking.
std::optional<std::vector<std::string>> MpirunRankHosts(const LaunchOptions& options,
                                                        const MpirunJob& job);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_MPI_MPIRUN_COMMAND_H_
