// The no-progress report's contract (Note [The no-progress report contract] in
// launcher/mpi/no_progress_report.h): what the runtime renders (runtime::DescribeNoProgress), in
// the line the MPI controller prints, is what chorusrun reads (launcher::ParseNoProgressReport).
// chorusrun does not link the runtime; this test links both to hold them to one shape.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/mpi/no_progress_report.h"
#include "runtime/progress/progress_watchdog.h"

namespace chorus {
namespace {

// The line runtime/mpi/mpi_controller.cc's AbortJob logs: the log prefix, the report, the
// MPI_Abort suffix.
std::string AbortLine(const runtime::NoProgressReport& r) {
  return "[chorus " + std::to_string(r.rank) + "/0 ERROR mpi_controller.cc:106] " +
         runtime::DescribeNoProgress(r) + " (MPI_Abort, exit code 75)";
}

void CheckRoundTrip(const runtime::NoProgressReport& r) {
  const std::string line = AbortLine(r);
  INFO(line);
  std::optional<launcher::NoProgressReport> read = launcher::ParseNoProgressReport(line);
  REQUIRE(read);
  CHECK(read->rank == r.rank);
  CHECK(read->bound == r.bound);
  CHECK(read->exit_code == 75);
  if (r.peers.empty()) {
    CHECK_FALSE(read->peers);
  } else {
    REQUIRE(read->peers);
    CHECK(*read->peers == std::vector<int>(r.peers.begin(), r.peers.end()));
  }
}

TEST_CASE("chorusrun reads every report the runtime renders", "[no_progress][contract]") {
  runtime::NoProgressReport r;
  r.rank = 1;
  r.bound = absl::Seconds(5);
  r.call = "MPI_Iallreduce (the cycle's bit vector)";
  r.work = "the cycle's negotiation, no op pending on this rank";
  for (std::vector<int32_t> peers : {std::vector<int32_t>{0, 2}, std::vector<int32_t>{2},
                                     std::vector<int32_t>{}, std::vector<int32_t>{0, 2, 3, 40}}) {
    r.peers = peers;
    CheckRoundTrip(r);
  }
  for (absl::Duration bound : {absl::Seconds(30), absl::Milliseconds(500), absl::Seconds(90),
                               absl::Milliseconds(2500), absl::Hours(2)}) {
    r.bound = bound;
    CheckRoundTrip(r);
  }
  r.allowance = absl::Seconds(12);
  CheckRoundTrip(r);
}

TEST_CASE("Tensor names in the report do not mislead chorusrun", "[no_progress][contract]") {
  runtime::Response response;
  response.type = OpType::kAllreduce;
  response.names = {"rank 9: no progress for 1s: x", "; it waits on ranks 7, 8",
                    "; it cannot tell which ranks it waits on"};
  runtime::NoProgressReport r;
  r.rank = 17;
  r.bound = absl::Seconds(3);
  r.call = "the MPI data plane's Allreduce";
  r.work = runtime::DescribeResponseWork(response);
  for (std::vector<int32_t> peers :
       {std::vector<int32_t>{0, 2}, std::vector<int32_t>{4}, std::vector<int32_t>{}}) {
    r.peers = peers;
    CheckRoundTrip(r);
  }
}

}  // namespace
}  // namespace chorus
