// File: launcher/cli/worker_env.h
//
// The environment variables chorusrun sets for the workers from its flags: the CHORUS_* names the
// runtime reads, one per parameter of launcher/cli/tunables.h (e.g. --fusion-threshold-mb 64 ->
// CHORUS_FUSION_THRESHOLD=67108864 bytes), plus NCCL_IB_DISABLE and UCX_TLS (--tcp),
// NCCL_SOCKET_IFNAME and, with --gloo, UCX_NET_DEVICES (--network-interfaces), as horovodrun
// sets their HOROVOD_* counterparts. A flag not given sets nothing.
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_CLI_WORKER_ENV_H_
#define CHORUS_LAUNCHER_CLI_WORKER_ENV_H_

#include <string>
#include <utility>
#include <vector>

#include "launcher/options.h"

namespace chorus::launcher {

using EnvVar = std::pair<std::string, std::string>;

// In a fixed order: the parameters in the table's order, then the network's variables.
std::vector<EnvVar> WorkerEnvironment(const LaunchOptions& options);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_CLI_WORKER_ENV_H_
