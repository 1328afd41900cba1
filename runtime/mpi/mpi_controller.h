// File: runtime/mpi/mpi_controller.h
//
// Controller over MPI: the control plane on a private duplicate of the job's communicator,
// topology from MPI_Comm_split_type(SHARED) and a split by local rank, and MpiBackend data
// planes per process set (MPI_Comm_split of the world communicator). The negotiation calls
// (GatherToRoot, BroadcastFromRoot, AllreduceBitAnd) are non-blocking collectives completed by
// ops::WaitPolitely: a rank whose peers are late sleeps instead of spinning (ops/mpi/mpi_wait.h).
//
// MPI lifecycle: Create() calls MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI is already
// initialised (then it uses it, whatever thread level it has). chorus never calls MPI_Finalize
// at shutdown (so that Init may run again in the same process); when chorus initialised MPI
// it registers an atexit handler that finalizes it.
// Thread-safety: background-thread-only after Create.
#ifndef CHORUS_RUNTIME_MPI_MPI_CONTROLLER_H_
#define CHORUS_RUNTIME_MPI_MPI_CONTROLLER_H_

#include <memory>

#include "absl/status/statusor.h"
#include <mpi.h>

#include "runtime/controller.h"

namespace chorus::runtime {

class MpiController : public Controller {
 public:
  // `mpi_comm`: an MPI_Comm* to run on (duplicated), or null for MPI_COMM_WORLD.
  static absl::StatusOr<std::unique_ptr<MpiController>> Create(const void* mpi_comm);
  ~MpiController() override;  // frees the duplicated communicators

  // Whether MPI provides MPI_THREAD_MULTIPLE.
  bool threads_multiple() const { return threads_multiple_; }

  const Topology& topology() const override { return topology_; }
  std::string name() const override { return "MPI"; }
  absl::Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override;
  absl::Status BroadcastFromRoot(std::string* data) override;
  absl::Status AllreduceBitAnd(absl::Span<uint64_t> bits) override;
  absl::Status Barrier() override;
  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> CreateBackend(
      absl::Span<const int32_t> ranks) override;

 private:
  MpiController() = default;
  MPI_Comm comm_ = MPI_COMM_NULL;       // control plane (owned duplicate)
  MPI_Comm data_comm_ = MPI_COMM_NULL;  // parent of every data-plane communicator (owned)
  Topology topology_;
  bool threads_multiple_ = false;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_MPI_MPI_CONTROLLER_H_
