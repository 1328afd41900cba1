// MPI-tier tests of stalls and lost peers. Both are hidden ([.]) from the default run: each needs
// its own environment or ends the job, so test/CMakeLists.txt runs them as separate ctest
// entries that check the job's output.
#include <unistd.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <mpi.h>

#include "chorus/chorus.h"

namespace chorus {
namespace {

OpRequest FloatAllreduce(const char* name, std::vector<float>& data) {
  OpRequest r;
  r.type = OpType::kAllreduce;
  r.name = name;
  r.input = {data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}};
  return r;
}

// Run with CHORUS_STALL_CHECK_TIME_SECONDS=1 and CHORUS_STALL_SHUTDOWN_TIME_SECONDS=2: rank 0
// submits a tensor nobody else submits. The coordinator must warn (naming the missing ranks),
// then fail the op with DeadlineExceeded; afterwards the job goes on normally.
TEST_CASE("stalled tensor: warning names the missing ranks, then DeadlineExceeded", "[.][stall]") {
  REQUIRE(Init().ok());
  const Topology topo = *GetTopology();
  if (topo.rank == 0) {
    std::vector<float> lonely(4, 1.0f);
    absl::StatusOr<Handle> h = Enqueue(FloatAllreduce("stall.lonely", lonely));
    REQUIRE(h.ok());
    const absl::Status st = Wait(*h);
    INFO(st.ToString());
    CHECK(absl::IsDeadlineExceeded(st));
    CHECK(st.message().find("stall.lonely") != absl::string_view::npos);
  }
  // The others wait here (raw MPI on the application's communicator) until rank 0 is done.
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<float> together(4, 1.0f);
  absl::StatusOr<Handle> h = Enqueue(FloatAllreduce("stall.together", together));
  REQUIRE(h.ok());
  CHECK(Wait(*h).ok());
  CHECK(together[0] == static_cast<float>(topo.size));
}

// Rank 1 dies in the middle of the job. The job must end (not hang) with a message naming it.
TEST_CASE("a lost peer ends the job with a message naming it", "[.][peer_death]") {
  REQUIRE(Init().ok());
  const Topology topo = *GetTopology();
  std::vector<float> data(1024, 1.0f);
  absl::StatusOr<Handle> h = Enqueue(FloatAllreduce("death.before", data));
  REQUIRE(h.ok());
  REQUIRE(Wait(*h).ok());
  if (topo.rank == 1) _exit(3);
  for (int step = 0; step < 1000; ++step) {
    absl::StatusOr<Handle> again = Enqueue(FloatAllreduce("death.after", data));
    REQUIRE(again.ok());
    if (!Wait(*again).ok()) break;
  }
}

// Run with a malformed CHORUS_CYCLE_TIME_MS on rank 1 only (mpirun's per-rank environment):
// init must fail on EVERY rank, naming the variable where it is bad, and nobody may hang.
TEST_CASE("a bad variable on one rank fails init on every rank", "[.][bad_env]") {
  const absl::Status st = Init();
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  INFO(st.ToString());
  CHECK(absl::IsInvalidArgument(st));
  if (rank == 1) {
    CHECK(st.message().find("CHORUS_CYCLE_TIME_MS") != absl::string_view::npos);
  } else {
    const std::string fine = "chorus init failed on rank 1 (rank " + std::to_string(rank) +
                             " is fine): a CHORUS_*/HOROVOD_* variable there is invalid";
    CHECK(st.message().find(fine) == 0);
  }
  CHECK_FALSE(IsInitialized());
}

}  // namespace
}  // namespace chorus
