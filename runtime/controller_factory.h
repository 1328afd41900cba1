// File: runtime/controller_factory.h
//
// Which Controller a process-wide Init() uses (Config::controller):
//   - MPI (the default under mpirun): MpiController on `mpi_comm` (MPI_COMM_WORLD when null),
//     its calls bounded by config.no_progress_timeout (runtime/progress/progress_watchdog.h);
//   - UCX in an MPI-less launch (chorusrun --gloo set CHORUS_RENDEZVOUS_ADDR, CHORUS_RANK, ...):
//     the world is formed through the launcher's rendezvous service; MPI is never initialised;
//   - UCX under mpirun (CHORUS_CONTROLLER=ucx): MPI only exchanges the UCX worker addresses and
//     gives the topology; every collective then runs on UCX.
// Both UCX forms bound their waits in the transport (UcxTransportOptions::no_progress_timeout).
// Collective over the world being formed.
#ifndef CHORUS_RUNTIME_CONTROLLER_FACTORY_H_
#define CHORUS_RUNTIME_CONTROLLER_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"

#include "runtime/config.h"
#include "runtime/controller.h"

namespace chorus::runtime {

// Errors name what is missing or unreachable: InvalidArgument for an incomplete MPI-less
// environment, Unavailable/DeadlineExceeded when the rendezvous or a rank cannot be reached
// within config.start_timeout.
absl::StatusOr<std::unique_ptr<Controller>> CreateController(const Config& config,
                                                             const void* mpi_comm);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_CONTROLLER_FACTORY_H_
