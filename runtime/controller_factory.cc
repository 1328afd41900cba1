#include "runtime/controller_factory.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#include "base/interrupt.h"
#include "base/status_macros.h"
#include "ops/ucx/ucx_transport.h"
#include "runtime/elastic/membership_watcher.h"
#include "runtime/mpi/mpi_controller.h"
#include "runtime/ucx/controller_address_exchange.h"
#include "runtime/ucx/rendezvous_client.h"
#include "runtime/ucx/ucx_controller.h"

namespace chorus::runtime {
namespace {

ops::UcxTransportOptions TransportOptions(const Config& config,
                                          std::shared_ptr<const Interrupt> interrupt = nullptr) {
  ops::UcxTransportOptions options;
  options.interrupt = std::move(interrupt);
  // The same no-progress bound as the MPI path (CHORUS_NO_PROGRESS_TIMEOUT_SECONDS; 0: none, a
  // year being none in practice). A collective only starts once every rank is ready, so no
  // wait legitimately stalls for long; the stall inspector's shutdown time bounds it when set.
  options.no_progress_timeout = config.no_progress_timeout > absl::ZeroDuration()
                                    ? config.no_progress_timeout
                                    : absl::Hours(24 * 365);
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

// Forms the world `config` names. `watcher` (null outside elastic jobs) interrupts it when
// chorusrun aborts its generation.
absl::StatusOr<std::unique_ptr<Controller>> FormUcxWorld(const Config& config,
                                                         MembershipWatcher* watcher) {
  CHORUS_ASSIGN_OR_RETURN(const Topology topology, LaunchTopology(config));
  // Every Init of this process forms a new world: shutdown and re-init (collective, so the
  // same count on every rank) must not meet the previous world's addresses. In an elastic job
  // each generation has a scope of its own, shared by its survivors and its new workers, whose
  // Init counts differ.
  static std::atomic<int64_t> worlds{0};
  const bool elastic = watcher != nullptr && watcher->elastic();
  const std::string scope = elastic ? absl::StrCat(config.rendezvous_scope, "/elastic")
                                    : absl::StrCat(config.rendezvous_scope, "/init", worlds++);
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<RendezvousClient> client,
                          RendezvousClient::Create(config.rendezvous_addr, config.rendezvous_secret,
                                                   absl::Seconds(30), config.elastic_generation));
  RendezvousAddressExchange exchange(std::move(client), scope, topology.rank, topology.size,
                                     config.start_timeout);
  std::shared_ptr<const Interrupt> interrupt =
      watcher != nullptr ? watcher->WorldInterrupt(config.elastic_generation) : nullptr;
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<ops::UcxTransport> transport,
                          ops::UcxTransport::Create(TransportOptions(config, interrupt)));
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

absl::StatusOr<std::unique_ptr<Controller>> UcxThroughRendezvous(const Config& config) {
  CHORUS_ASSIGN_OR_RETURN(MembershipWatcher * watcher, MembershipWatcher::ForConfig(config));
  Config c = config;
  if (watcher != nullptr && watcher->elastic() && c.elastic_generation < 0) {
    // A worker joining a running job: its place comes with the generation that adds it.
    CHORUS_ASSIGN_OR_RETURN(
        const auto place,
        watcher->Adopt(c.elastic_generation, c.elastic_timeout + MembershipWatcher::kAdoptMargin));
    CHORUS_RETURN_IF_ERROR(c.Adopt(place));
  }
  while (true) {
    absl::StatusOr<std::unique_ptr<Controller>> controller = FormUcxWorld(c, watcher);
    if (controller.ok() || watcher == nullptr || !watcher->elastic()) return controller;
    // An elastic worker whose generation was replaced while it formed the world (the rendezvous
    // refused the stale generation, or the world was interrupted) joins the newer one. That may
    // be on hold (too few workers left): the worker then waits, as in a reset, until chorusrun
    // places it in a world, releases it or ends the job, bounded like every wait for chorusrun.
    const bool stale = controller.status().code() == absl::StatusCode::kFailedPrecondition;
    if (!stale && watcher->latest() <= c.elastic_generation) return controller;
    CHORUS_ASSIGN_OR_RETURN(
        const auto place,
        watcher->Adopt(c.elastic_generation, c.elastic_timeout + MembershipWatcher::kAdoptMargin));
    CHORUS_RETURN_IF_ERROR(c.Adopt(place));
  }
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
    MpiControllerOptions options;
    options.no_progress_timeout = config.no_progress_timeout;
    CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<MpiController> mpi,
                            MpiController::Create(mpi_comm, std::move(options)));
    return std::unique_ptr<Controller>(std::move(mpi));
  }
  if (!config.rendezvous_addr.empty()) return UcxThroughRendezvous(config);
  return UcxOverMpi(config, mpi_comm);
}

}  // namespace chorus::runtime
