// File: runtime/mpi/mpi_controller.cc
#include "runtime/mpi/mpi_controller.h"

#include <sysexits.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "base/status_macros.h"
#include "ops/mpi/mpi_backend.h"
#include "ops/mpi/mpi_datatypes.h"
#include "ops/mpi/mpi_wait.h"
#include "runtime/progress/watched_backend.h"

namespace chorus::runtime {
namespace {

// Registered with atexit once per process, only when chorus itself initialised MPI.
void FinalizeMpiAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  ops::FreeMpiCustomOps();
  MPI_Finalize();
}

// Initialises MPI unless someone (the application, or an earlier chorus runtime in this
// process) already did. Sets *provided to the thread level in effect.
absl::Status EnsureMpiInitialized(int* provided) {
  int finalized = 0;
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Finalized(&finalized));
  if (finalized) {
    return absl::FailedPreconditionError(
        "MPI has already been finalized in this process; it cannot be initialised again");
  }
  int initialized = 0;
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Initialized(&initialized));
  if (initialized) {
    CHORUS_MPI_RETURN_IF_ERROR(MPI_Query_thread(provided));
    return absl::OkStatus();
  }
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, provided));
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(&FinalizeMpiAtExit); });
  return absl::OkStatus();
}

absl::Status DupWithErrorsReturn(MPI_Comm base, MPI_Comm* out) {
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Comm_dup(base, out));
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN));
  return absl::OkStatus();
}

// Rank and size in a temporary communicator, which is freed.
absl::Status RankSizeAndFree(MPI_Comm* comm, int32_t* rank, int32_t* size) {
  int r = 0, s = 0;
  const int rc_rank = MPI_Comm_rank(*comm, &r);
  const int rc_size = MPI_Comm_size(*comm, &s);
  const int rc_free = MPI_Comm_free(comm);
  CHORUS_MPI_RETURN_IF_ERROR(rc_rank);
  CHORUS_MPI_RETURN_IF_ERROR(rc_size);
  CHORUS_MPI_RETURN_IF_ERROR(rc_free);
  *rank = r;
  *size = s;
  return absl::OkStatus();
}

absl::Status ComputeTopology(MPI_Comm comm, Topology* topo) {
  int rank = 0, size = 0;
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Comm_rank(comm, &rank));
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Comm_size(comm, &size));
  topo->rank = rank;
  topo->size = size;

  MPI_Comm local = MPI_COMM_NULL;
  CHORUS_MPI_RETURN_IF_ERROR(
      MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  CHORUS_RETURN_IF_ERROR(RankSizeAndFree(&local, &topo->local_rank, &topo->local_size));

  // One cross communicator per local rank: rank k of every host.
  MPI_Comm cross = MPI_COMM_NULL;
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Comm_split(comm, topo->local_rank, rank, &cross));
  CHORUS_RETURN_IF_ERROR(RankSizeAndFree(&cross, &topo->cross_rank, &topo->cross_size));

  std::vector<int> local_sizes(static_cast<size_t>(size));
  int mine = topo->local_size;
  CHORUS_MPI_RETURN_IF_ERROR(
      MPI_Allgather(&mine, 1, MPI_INT, local_sizes.data(), 1, MPI_INT, comm));
  topo->is_homogeneous = true;
  for (int s : local_sizes) topo->is_homogeneous = topo->is_homogeneous && s == mine;
  return absl::OkStatus();
}

// What the watchdog does when a peer stopped answering: say why, then end every rank of the
// job (MPI_Abort kills the whole job, not only `comm`). Runs on the loop thread or the
// watchdog's thread (MPI_THREAD_MULTIPLE, which chorus asks for, allows the latter; Open MPI's
// MPI_Abort talks only to its runtime, not to the communicator's transport, so it does not wait
// for the stuck call). chorusrun reads the line's "(MPI_Abort, exit code C)" end (Note [The
// no-progress report contract] in launcher/mpi/no_progress_report.h).
void AbortJob(MPI_Comm comm, const std::string& report) {
  CHORUS_LOG(ERROR) << report << " (MPI_Abort, exit code " << EX_TEMPFAIL << ")";
  MPI_Abort(comm, EX_TEMPFAIL);
  std::_Exit(EX_TEMPFAIL);  // MPI_Abort does not return; should it, the process still ends
}

}  // namespace

absl::StatusOr<std::unique_ptr<MpiController>> MpiController::Create(const void* mpi_comm,
                                                                     MpiControllerOptions options) {
  int provided = MPI_THREAD_SINGLE;
  CHORUS_RETURN_IF_ERROR(EnsureMpiInitialized(&provided));
  const MPI_Comm base =
      mpi_comm == nullptr ? MPI_COMM_WORLD : *static_cast<const MPI_Comm*>(mpi_comm);
  if (base == MPI_COMM_NULL) {
    return absl::InvalidArgumentError("MpiController: the given communicator is MPI_COMM_NULL");
  }
  // Owned from here: an early error return frees whatever was duplicated.
  std::unique_ptr<MpiController> controller(new MpiController());
  controller->threads_multiple_ = provided == MPI_THREAD_MULTIPLE;
  CHORUS_RETURN_IF_ERROR(DupWithErrorsReturn(base, &controller->comm_));
  CHORUS_RETURN_IF_ERROR(DupWithErrorsReturn(base, &controller->data_comm_));
  CHORUS_RETURN_IF_ERROR(ComputeTopology(controller->comm_, &controller->topology_));
  for (int32_t r = 0; r < controller->topology_.size; ++r) {
    if (r != controller->topology_.rank) controller->peers_.push_back(r);
  }
  if (options.no_progress_timeout > absl::ZeroDuration()) {
    ProgressWatchdog::Options watch;
    watch.bound = options.no_progress_timeout;
    watch.rank = controller->topology_.rank;
    watch.terminate = options.terminate ? std::move(options.terminate)
                                        : [comm = controller->comm_](const std::string& report) {
                                            AbortJob(comm, report);
                                          };
    controller->watchdog_ = std::make_unique<ProgressWatchdog>(std::move(watch));
  }
  return controller;
}

MpiController::~MpiController() {
  watchdog_.reset();  // its thread stops before the communicators go
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (data_comm_ != MPI_COMM_NULL) MPI_Comm_free(&data_comm_);
}

absl::Status MpiController::GatherToRoot(const std::string& mine, std::vector<std::string>* all) {
  all->clear();
  // Note [MPI int counts] (ops/mpi/mpi_backend.cc): control messages are far below INT_MAX.
  if (mine.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError("GatherToRoot: message of " + std::to_string(mine.size()) +
                                      " bytes exceeds INT_MAX");
  }
  const bool root = topology_.rank == 0;
  const int my_size = static_cast<int>(mine.size());
  std::vector<int> sizes(root ? static_cast<size_t>(topology_.size) : 0);
  MPI_Request request = MPI_REQUEST_NULL;
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Igather(&my_size, 1, MPI_INT, root ? sizes.data() : nullptr, 1,
                                         MPI_INT, 0, comm_, &request));
  CHORUS_RETURN_IF_ERROR(Await(&request, "MPI_Igather (request sizes to rank 0)"));

  std::vector<int> displs(sizes.size());
  int64_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    displs[r] = static_cast<int>(std::min<int64_t>(total, INT_MAX));
    total += sizes[r];
  }
  if (total > INT_MAX) {
    // Only rank 0 can see this; it reports the error (and the runtime shuts the job down) while
    // the other ranks' sends may stay pending. Unreachable for real negotiation messages.
    return absl::ResourceExhaustedError("GatherToRoot: " + std::to_string(total) +
                                        " bytes in total exceed INT_MAX");
  }
  std::string buffer(root ? static_cast<size_t>(total) : 0, '\0');
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Igatherv(mine.data(), my_size, MPI_BYTE,
                                          root ? buffer.data() : nullptr, sizes.data(),
                                          displs.data(), MPI_BYTE, 0, comm_, &request));
  CHORUS_RETURN_IF_ERROR(Await(&request, "MPI_Igatherv (requests to rank 0)"));
  if (root) {
    all->reserve(sizes.size());
    for (size_t r = 0; r < sizes.size(); ++r) {
      all->emplace_back(buffer, static_cast<size_t>(displs[r]), static_cast<size_t>(sizes[r]));
    }
  }
  return absl::OkStatus();
}

absl::Status MpiController::BroadcastFromRoot(std::string* data) {
  int64_t size = static_cast<int64_t>(data->size());
  MPI_Request request = MPI_REQUEST_NULL;
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Ibcast(&size, 1, MPI_INT64_T, 0, comm_, &request));
  CHORUS_RETURN_IF_ERROR(Await(&request, "MPI_Ibcast (size of rank 0's responses)"));
  if (topology_.rank != 0) data->resize(static_cast<size_t>(size));
  // Every rank knows `size`, so all split the payload into the same int-sized pieces.
  int64_t done = 0;
  while (done < size) {
    const int n = static_cast<int>(std::min<int64_t>(size - done, INT_MAX));
    CHORUS_MPI_RETURN_IF_ERROR(MPI_Ibcast(data->data() + done, n, MPI_BYTE, 0, comm_, &request));
    CHORUS_RETURN_IF_ERROR(Await(&request, "MPI_Ibcast (rank 0's responses)"));
    done += n;
  }
  return absl::OkStatus();
}

absl::Status MpiController::AllreduceBitAnd(absl::Span<uint64_t> bits) {
  if (bits.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError("AllreduceBitAnd: bit vector too long");
  }
  MPI_Request request = MPI_REQUEST_NULL;
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Iallreduce(MPI_IN_PLACE, bits.data(),
                                            static_cast<int>(bits.size()), MPI_UINT64_T, MPI_BAND,
                                            comm_, &request));
  CHORUS_RETURN_IF_ERROR(Await(&request, "MPI_Iallreduce (the cycle's bit vector)"));
  return absl::OkStatus();
}

absl::Status MpiController::Await(MPI_Request* request, const char* call) {
  if (watchdog_ == nullptr) return ops::WaitPolitely(request, call);
  ops::PoliteWait how;
  how.deadline = watchdog_->WaitDeadline();
  absl::Status status;
  {
    ProgressWatchdog::WaitingCall inside(watchdog_.get(), call);
    status = ops::WaitPolitely(request, call, how);
  }
  if (absl::IsDeadlineExceeded(status)) return watchdog_->GiveUp(call, peers_);
  if (status.ok()) watchdog_->Progressed();
  return status;
}

absl::Status MpiController::Barrier() {
  ProgressWatchdog::BlockingCall watch(watchdog_.get(), "MPI_Barrier (control plane)", peers_);
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Barrier(comm_));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> MpiController::CreateBackend(
    absl::Span<const int32_t> ranks) {
  // `ranks` is the same on every rank (negotiated), so every rank fails these checks alike.
  if (ranks.empty()) return absl::InvalidArgumentError("CreateBackend: empty rank set");
  bool member = false;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= topology_.size || (i > 0 && ranks[i] <= ranks[i - 1])) {
      return absl::InvalidArgumentError(
          "CreateBackend: ranks must be ascending, distinct and in [0, " +
          std::to_string(topology_.size) + "); got " + std::to_string(ranks[i]) + " at position " +
          std::to_string(i));
    }
    member = member || ranks[i] == topology_.rank;
  }
  std::vector<int32_t> members(ranks.begin(), ranks.end());
  return Split(member ? 0 : MPI_UNDEFINED, std::move(members),
               "MPI_Comm_split (a process set's communicator)");
}

absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> MpiController::CreateGroupBackend(
    absl::Span<const int32_t> group_of_rank) {
  // The partition is the same on every rank, so every rank fails these checks alike.
  if (group_of_rank.size() != static_cast<size_t>(topology_.size)) {
    return absl::InvalidArgumentError(
        "CreateGroupBackend: " + std::to_string(group_of_rank.size()) +
        " group entries for a world of " + std::to_string(topology_.size));
  }
  for (int32_t g : group_of_rank) {
    if (g < -1) {
      return absl::InvalidArgumentError("CreateGroupBackend: group id " + std::to_string(g) +
                                        " is below -1");
    }
  }
  const int32_t mine = group_of_rank[topology_.rank];
  std::vector<int32_t> members;
  for (int32_t r = 0; r < topology_.size; ++r) {
    if (mine >= 0 && group_of_rank[r] == mine) members.push_back(r);
  }
  return Split(mine >= 0 ? mine : MPI_UNDEFINED, std::move(members),
               "MPI_Comm_split (a hierarchical group's communicator)");
}

absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> MpiController::Split(
    int color, std::vector<int32_t> members, const char* call) {
  // Key = world rank: the group's ranks are in world-rank order.
  MPI_Comm comm = MPI_COMM_NULL;
  {
    ProgressWatchdog::BlockingCall watch(watchdog_.get(), call, peers_);
    CHORUS_MPI_RETURN_IF_ERROR(MPI_Comm_split(data_comm_, color, topology_.rank, &comm));
  }
  if (color == MPI_UNDEFINED || comm == MPI_COMM_NULL) {
    return std::unique_ptr<ops::CollectiveBackend>();
  }
  std::unique_ptr<ops::CollectiveBackend> backend(new ops::MpiBackend(comm, /*owned=*/true));
  if (watchdog_ == nullptr) return backend;
  // The data plane's collectives block: the watchdog's thread bounds them.
  return std::unique_ptr<ops::CollectiveBackend>(
      new WatchedBackend(std::move(backend), watchdog_.get(), members, topology_.rank));
}

}  // namespace chorus::runtime
