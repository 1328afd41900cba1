// File: runtime/mpi/mpi_controller.h
//
// Controller over MPI: the control plane on a private duplicate of the job's communicator,
// topology from MPI_Comm_split_type(SHARED) and a split by local rank, and MpiBackend data
// planes per process set (MPI_Comm_split of the world communicator). The negotiation calls
// (GatherToRoot, BroadcastFromRoot, AllreduceBitAnd) are non-blocking collectives completed by
// ops::WaitPolitely: a rank whose peers are late sleeps instead of spinning (ops/mpi/mpi_wait.h).
//
// No MPI transport notices a peer lost without closing its connections (a host down, a cut link,
// a stopped process): with a no-progress bound (Options), the controller owns a
// ProgressWatchdog (runtime/progress/progress_watchdog.h, Note [No-progress bound]) that the loop
// arms after its handshake. The negotiation waits then have deadlines; the data planes' blocking
// collectives and MPI_Comm_split are watched by the watchdog's thread. A rank that sees no
// progress for the bound logs why and calls MPI_Abort (exit code EX_TEMPFAIL, 75), which ends
// the whole job.
//
// MPI lifecycle: Create() calls MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI is already
// initialised (then it uses it, whatever thread level it has). chorus never calls MPI_Finalize
// at shutdown (so that Init may run again in the same process); when chorus initialised MPI
// it registers an atexit handler that finalizes it.
// Thread-safety: background-thread-only after Create.
#ifndef CHORUS_RUNTIME_MPI_MPI_CONTROLLER_H_
#define CHORUS_RUNTIME_MPI_MPI_CONTROLLER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include <mpi.h>

#include "runtime/controller.h"
#include "runtime/progress/progress_watchdog.h"

namespace chorus::runtime {

struct MpiControllerOptions {
  // Config::no_progress_timeout (CHORUS_NO_PROGRESS_TIMEOUT_SECONDS); zero: no bound, no
  // watchdog.
  absl::Duration no_progress_timeout = absl::ZeroDuration();
  // Reports and ends the job when the bound is exceeded; default: log the report and MPI_Abort
  // (tests replace it).
  std::function<void(const std::string& report)> terminate;
};

class MpiController : public Controller {
 public:
  // `mpi_comm`: an MPI_Comm* to run on (duplicated), or null for MPI_COMM_WORLD.
  static absl::StatusOr<std::unique_ptr<MpiController>> Create(const void* mpi_comm,
                                                               MpiControllerOptions options = {});
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
  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> CreateGroupBackend(
      absl::Span<const int32_t> group_of_rank) override;
  ProgressWatchdog* progress_watchdog() override { return watchdog_.get(); }

 private:
  MpiController() = default;
  // Completes a negotiation call's request within the watchdog's deadline (when armed); past
  // it, the watchdog reports `call` and ends the job.
  absl::Status Await(MPI_Request* request, const char* call);
  // Splits data_comm_ (collective over the world): this rank joins `color` (MPI_UNDEFINED:
  // none) with the ranks in `members` (world ranks, ascending, this one included when it
  // joins); its backend, watched when there is a watchdog, or null.
  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> Split(int color,
                                                                std::vector<int32_t> members,
                                                                const char* call);

  MPI_Comm comm_ = MPI_COMM_NULL;       // control plane (owned duplicate)
  MPI_Comm data_comm_ = MPI_COMM_NULL;  // parent of every data-plane communicator (owned)
  Topology topology_;
  bool threads_multiple_ = false;
  std::vector<int32_t> peers_;  // every rank but this one: what the control plane waits on
  // Declared last: destroyed (its thread stopped) first.
  std::unique_ptr<ProgressWatchdog> watchdog_;  // null without a no-progress bound
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_MPI_MPI_CONTROLLER_H_
