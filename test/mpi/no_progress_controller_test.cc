// The no-progress bound on real MPI calls (Note [No-progress bound] in
// runtime/progress/progress_watchdog.h), without ending the job: a wait's deadline
// (ops::WaitPolitely), a negotiation call that gives up on the loop thread, and a blocking
// data-plane call reported by the watchdog's thread. Rank 0 waits on peers that deliberately
// come late; its terminator records the report instead of calling MPI_Abort, and the peers come
// only once it has. The job-ending paths run in test/mpi/no_progress_job.cc.
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>
#include <mpi.h>

#include "base/mutex.h"
#include "ops/mpi/mpi_wait.h"
#include "runtime/mpi/mpi_controller.h"
#include "runtime/progress/progress_watchdog.h"
#include "test/support/catch_session.h"

namespace chorus {
namespace {

constexpr int kReleaseTag = 7301;  // rank 0's "I gave up" to the late ranks

int Rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int Size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// "1, 2, ..., size-1": the ranks rank 0 waits on.
std::string OtherRanks() {
  std::string ranks;
  for (int r = 1; r < Size(); ++r) absl::StrAppend(&ranks, r == 1 ? "" : ", ", r);
  return ranks;
}

TEST_CASE("WaitPolitely gives up at its deadline and completes requests before it",
          "[mpi][no_progress]") {
  const int rank = Rank();
  const int size = Size();
  // A receive nobody matches.
  int value = 0;
  MPI_Request never = MPI_REQUEST_NULL;
  REQUIRE(MPI_Irecv(&value, 1, MPI_INT, (rank + 1) % size, 9999, MPI_COMM_WORLD, &never) ==
          MPI_SUCCESS);
  ops::PoliteWait how;
  const absl::Time start = absl::Now();
  how.deadline = start + absl::Milliseconds(200);
  const absl::Status status = ops::WaitPolitely(&never, "MPI_Irecv of nothing", how);
  INFO(status.ToString());
  CHECK(absl::IsDeadlineExceeded(status));
  CHECK(absl::StrContains(status.message(), "MPI_Irecv of nothing did not complete"));
  CHECK(absl::Now() >= how.deadline);  // not before it
  MPI_Cancel(&never);
  MPI_Wait(&never, MPI_STATUS_IGNORE);

  // A collective every rank joins completes well before a distant deadline.
  MPI_Request barrier = MPI_REQUEST_NULL;
  REQUIRE(MPI_Ibarrier(MPI_COMM_WORLD, &barrier) == MPI_SUCCESS);
  how.deadline = absl::Now() + absl::Seconds(600);
  CHECK(ops::WaitPolitely(&barrier, "MPI_Ibarrier", how).ok());
}

// Records the report; with `release`, then tells every other rank to come (from whichever
// thread gave up).
struct Recorder {
  Mutex mu;
  std::vector<std::string> reports ABSL_GUARDED_BY(mu);
  std::function<void(const std::string&)> Terminator(bool release) {
    return [this, release](const std::string& report) {
      {
        MutexLock lock(&mu);
        reports.push_back(report);
      }
      if (!release) return;
      int token = 1;
      for (int r = 1; r < Size(); ++r) {
        MPI_Send(&token, 1, MPI_INT, r, kReleaseTag, MPI_COMM_WORLD);
      }
    };
  }
  std::vector<std::string> Reports() {
    MutexLock lock(&mu);
    return reports;
  }
};

void AwaitRelease() {
  int token = 0;
  MPI_Recv(&token, 1, MPI_INT, 0, kReleaseTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

TEST_CASE("A negotiation call whose peers do not come gives up, naming them",
          "[mpi][no_progress]") {
  const int rank = Rank();
  Recorder recorder;
  runtime::MpiControllerOptions options;
  options.no_progress_timeout = absl::Milliseconds(300);
  options.terminate = recorder.Terminator(/*release=*/false);
  absl::StatusOr<std::unique_ptr<runtime::MpiController>> controller =
      runtime::MpiController::Create(nullptr, options);
  REQUIRE(controller.ok());
  runtime::ProgressWatchdog* watchdog = (*controller)->progress_watchdog();
  REQUIRE(watchdog != nullptr);
  CHECK(watchdog->bound() == absl::Milliseconds(300));

  std::vector<uint64_t> bits = {~uint64_t{0}};
  if (rank == 0) {
    watchdog->Arm([] { return std::string("the test's negotiation"); });
    const absl::Status status = (*controller)->AllreduceBitAnd(absl::MakeSpan(bits));
    INFO(status.ToString());
    CHECK(absl::IsDeadlineExceeded(status));
    watchdog->Disarm();
    const std::vector<std::string> reports = recorder.Reports();
    CHECK(reports.size() == 1);
    const std::string report = reports.empty() ? "" : reports[0];
    INFO(report);
    CHECK(absl::StartsWith(
        report, absl::StrCat("rank 0: no progress for 300ms: MPI_Iallreduce (the cycle's bit "
                             "vector) has not completed, running the test's negotiation; it "
                             "waits on rank",
                             Size() > 2 ? "s " : " ", OtherRanks())));
    CHECK(status.message() == report);
  }
  // The late ranks come once rank 0 gave up; rank 0's abandoned request completes with theirs
  // while it is in the barriers.
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) CHECK((*controller)->AllreduceBitAnd(absl::MakeSpan(bits)).ok());
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) CHECK(recorder.Reports().empty());
}

TEST_CASE("A blocking data-plane call whose peers do not come is reported by the watchdog",
          "[mpi][no_progress]") {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided != MPI_THREAD_MULTIPLE) {
    chorus::testing::SkipCase(
        "the watchdog's thread releases the late ranks, which needs MPI_THREAD_MULTIPLE");
    return;
  }
  const int rank = Rank();
  Recorder recorder;
  runtime::MpiControllerOptions options;
  options.no_progress_timeout = absl::Milliseconds(300);
  options.terminate = recorder.Terminator(/*release=*/true);
  absl::StatusOr<std::unique_ptr<runtime::MpiController>> controller =
      runtime::MpiController::Create(nullptr, options);
  REQUIRE(controller.ok());
  std::vector<int32_t> world;
  for (int r = 0; r < Size(); ++r) world.push_back(r);
  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> backend =
      (*controller)->CreateBackend(world);
  REQUIRE(backend.ok());  // every rank alike: before any rank-dependent step
  REQUIRE(*backend != nullptr);
  runtime::ProgressWatchdog* watchdog = (*controller)->progress_watchdog();

  int64_t x = rank + 1;
  if (rank == 0) {
    watchdog->Arm([] { return std::string("allreduce of tensor 'late' (process set 0)"); });
  } else {
    AwaitRelease();  // rank 0's watchdog gave up on us
  }
  CHECK((*backend)->Allreduce(&x, &x, 1, DataType::kInt64, ReduceOp::kSum).ok());
  CHECK(x == int64_t{Size()} * (Size() + 1) / 2);
  if (rank == 0) {
    watchdog->Disarm();
    const std::vector<std::string> reports = recorder.Reports();
    CHECK(reports.size() == 1);
    const std::string report = reports.empty() ? "" : reports[0];
    INFO(report);
    CHECK(absl::StartsWith(
        report,
        absl::StrCat("rank 0: no progress for 300ms: the MPI data plane's Allreduce has not "
                     "completed, running allreduce of tensor 'late' (process set 0); it waits on "
                     "rank",
                     Size() > 2 ? "s " : " ", OtherRanks())));
  } else {
    CHECK(recorder.Reports().empty());
  }
  backend->reset();
  MPI_Barrier(MPI_COMM_WORLD);
}

// Rank 0 stops rank 1 (SIGSTOP) while rank 1 waits for it, for twice the bound, then resumes it
// and arrives: rank 1 was frozen itself, its peer's answer is there at once, and it must not
// report a lost peer (Note [No-progress bound]). `wait` is rank 1's call (armed); `arrive` is
// every other rank's.
void FrozenWaiterDoesNotBlame(runtime::MpiController& controller, Recorder& recorder,
                              const std::function<absl::Status()>& wait,
                              const std::function<absl::Status()>& arrive) {
  const int rank = Rank();
  const absl::Duration bound = controller.progress_watchdog()->bound();
  int pid = static_cast<int>(::getpid());
  if (rank == 1) MPI_Send(&pid, 1, MPI_INT, 0, kReleaseTag, MPI_COMM_WORLD);
  if (rank == 0) MPI_Recv(&pid, 1, MPI_INT, 1, kReleaseTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (rank == 1) {
    controller.progress_watchdog()->Arm([] { return std::string("the frozen rank's work"); });
    CHECK(wait().ok());
    controller.progress_watchdog()->Disarm();
    CHECK(recorder.Reports().empty());
  } else {
    if (rank == 0) {
      absl::SleepFor(absl::Milliseconds(200));  // rank 1 is in its wait by now (else no harm)
      CHECK(::kill(pid, SIGSTOP) == 0);
      absl::SleepFor(2 * bound);
      CHECK(::kill(pid, SIGCONT) == 0);
    }
    CHECK(arrive().ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Whether every rank runs on this host (rank 0 can signal rank 1).
bool OneHost() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  std::vector<char> all(static_cast<size_t>(Size()) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 0; r < Size(); ++r) {
    if (std::string(all.data() + r * MPI_MAX_PROCESSOR_NAME) != name) return false;
  }
  return true;
}

TEST_CASE("A rank frozen while it waits does not blame the peers that waited on it",
          "[mpi][no_progress]") {
  if (!OneHost()) {
    chorus::testing::SkipCase("rank 0 stops and resumes rank 1, which needs one host");
    return;
  }
  Recorder recorder;
  runtime::MpiControllerOptions options;
  options.no_progress_timeout = absl::Milliseconds(1500);
  options.terminate = recorder.Terminator(/*release=*/false);
  absl::StatusOr<std::unique_ptr<runtime::MpiController>> controller =
      runtime::MpiController::Create(nullptr, options);
  REQUIRE(controller.ok());
  runtime::MpiController& c = **controller;
  std::vector<int32_t> world;
  for (int r = 0; r < Size(); ++r) world.push_back(r);
  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> backend = c.CreateBackend(world);
  REQUIRE(backend.ok());
  REQUIRE(*backend != nullptr);

  SECTION("in a negotiation wait") {
    std::vector<uint64_t> bits = {~uint64_t{0}};
    auto call = [&] { return c.AllreduceBitAnd(absl::MakeSpan(bits)); };
    FrozenWaiterDoesNotBlame(c, recorder, call, call);
  }
  SECTION("in a blocking data-plane call") {
    int64_t x = 1;
    auto call = [&] { return (*backend)->Allreduce(&x, &x, 1, DataType::kInt64, ReduceOp::kSum); };
    FrozenWaiterDoesNotBlame(c, recorder, call, call);
    CHECK(x == Size());
  }
  backend->reset();
}

}  // namespace
}  // namespace chorus
