#include "runtime/controller_factory.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#include "base/status_macros.h"
#include "ops/ucx/ucx_transport.h"
#include "runtime/mpi/mpi_controller.h"
#include "runtime/ucx/controller_address_exchange.h"
#include "runtime/ucx/rendezvous_client.h"
#include "runtime/ucx/ucx_controller.h"

namespace chorus::runtime {
namespace {

ops::UcxTransportOptions TransportOptions(const Config& config) {
  ops::UcxTransportOptions options;
  // A collective only starts once every rank is ready, so no wait legitimately stalls for
  // long; the stall inspector's shutdown time bounds it when set.
  if (config.stall_shutdown_time > absl::ZeroDuration()) {
    options.no_progress_timeout = std::max(options.no_progress_timeout, config.stall_shutdown_time);
  }
  return options;
}

// This worker's place in an MPI-less launch, from the launcher's variables.
absl::StatusOr<Topology> LaunchTopology(const Config& c) {
  if (c.launch_rank < 0 || c.launch_size <= 0 || c.launch_rank >= c.launch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an MPI-less launch (CHORUS_RENDEZVOUS_ADDR=", c.rendezvous_addr,
        ") needs CHORUS_RANK and CHORUS_SIZE with 0 <= rank < size (got rank ", c.launch_rank,
        ", size ", c.launch_size, "); start the job with chorusrun --gloo"));
  }
  if (c.rendezvous_secret.empty()) {
    return absl::InvalidArgumentError(
        "an MPI-less launch needs CHORUS_RENDEZVOUS_SECRET; start the job with chorusrun --gloo");
  }
  Topology t;
  t.rank = c.launch_rank;
  t.size = c.launch_size;
  t.local_rank = c.launch_local_rank >= 0 ? c.launch_local_rank : 0;
  t.local_size = c.launch_local_size > 0 ? c.launch_local_size : 1;
  t.cross_rank = c.launch_cross_rank >= 0 ? c.launch_cross_rank : t.rank;
  t.cross_size = c.launch_cross_size > 0 ? c.launch_cross_size : t.size;
  t.is_homogeneous = t.size % t.local_size == 0 && t.cross_size * t.local_size == t.size;
  return t;
}

absl::StatusOr<std::unique_ptr<Controller>> UcxThroughRendezvous(const Config& config) {
  CHORUS_ASSIGN_OR_RETURN(const Topology topology, LaunchTopology(config));
  // Every Init of this process forms a new world: shutdown and re-init (collective, so the
  // same count on every rank) must not meet the previous world's addresses.
  static std::atomic<int64_t> worlds{0};
  const std::string scope = absl::StrCat(config.rendezvous_scope, "/init", worlds++);
  CHORUS_ASSIGN_OR_RETURN(
      std::unique_ptr<RendezvousClient> client,
      RendezvousClient::Create(config.rendezvous_addr, config.rendezvous_secret));
  RendezvousAddressExchange exchange(std::move(client), scope, topology.rank, topology.size,
                                     config.start_timeout);
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<ops::UcxTransport> transport,
                          ops::UcxTransport::Create(TransportOptions(config)));
  absl::StatusOr<std::unique_ptr<UcxController>> controller =
      UcxController::Create(topology, std::move(transport), exchange);
  if (!controller.ok()) {
    return absl::Status(
        controller.status().code(),
        absl::StrCat("rank ", topology.rank, " of ", topology.size,
                     ": forming the UCX world through the rendezvous at ", config.rendezvous_addr,
                     " failed: ", controller.status().message()));
  }
  return std::unique_ptr<Controller>(*std::move(controller));
}

absl::StatusOr<std::unique_ptr<Controller>> UcxOverMpi(const Config& config, const void* mpi_comm) {
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<MpiController> mpi, MpiController::Create(mpi_comm));
  ControllerAddressExchange exchange(mpi.get());
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<ops::UcxTransport> transport,
                          ops::UcxTransport::Create(TransportOptions(config)));
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<UcxController> controller,
                          UcxController::Create(mpi->topology(), std::move(transport), exchange));
  return std::unique_ptr<Controller>(std::move(controller));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Controller>> CreateController(const Config& config,
                                                             const void* mpi_comm) {
  if (!config.UsesUcx()) {
    CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<MpiController> mpi, MpiController::Create(mpi_comm));
    return std::unique_ptr<Controller>(std::move(mpi));
  }
  if (!config.rendezvous_addr.empty()) return UcxThroughRendezvous(config);
  return UcxOverMpi(config, mpi_comm);
}

}  // namespace chorus::runtime
