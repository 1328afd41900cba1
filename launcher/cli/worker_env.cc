#include "launcher/cli/worker_env.h"

#include "absl/strings/str_join.h"

#include "launcher/cli/tunables.h"

namespace chorus::launcher {

std::vector<EnvVar> WorkerEnvironment(const LaunchOptions& o) {
  std::vector<EnvVar> vars = TunableVariables(o);
  if (o.tcp) {
    // Only TCP: NCCL without InfiniBand; UCX (--gloo's controller and data plane, the UCX data
    // plane in MPI mode) on its TCP transport alone, no shared memory or RDMA. MPI mode also
    // passes mpirun its TCP options (launcher/mpi/mpirun_command.cc).
    vars.emplace_back("NCCL_IB_DISABLE", "1");
    vars.emplace_back("UCX_TLS", "tcp");
  }
  if (!o.network_interfaces.empty()) {
    const std::string interfaces = absl::StrJoin(o.network_interfaces, ",");
    vars.emplace_back("NCCL_SOCKET_IFNAME", interfaces);
    // --gloo: UCX carries the controller and the CPU data plane, as Gloo does in horovodrun,
    // where the flag names the interface Gloo's connections use: UCX's network devices are
    // those interfaces (shared memory within a host is not a network device and stays). MPI
    // mode restricts Open MPI's TCP transport instead (launcher/mpi/mpirun_command.cc), as
    // horovodrun does.
    if (o.gloo) vars.emplace_back("UCX_NET_DEVICES", interfaces);
  }
  return vars;
}

}  // namespace chorus::launcher
