#include "ops/mpi/mpi_wait.h"

#include <algorithm>
#include <string>

#include "ops/mpi/mpi_datatypes.h"

namespace chorus::ops {

absl::Status WaitPolitely(MPI_Request* request, const char* call, const PoliteWait& how) {
  const absl::Time spin_until = absl::Now() + how.spin;
  absl::Duration sleep = how.first_sleep;
  while (true) {
    int done = 0;
    const int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      return MpiErrorToStatus(rc, (std::string("MPI_Test of ") + call).c_str(), __FILE__, __LINE__);
    }
    if (done != 0) return absl::OkStatus();
    if (absl::Now() < spin_until) continue;
    absl::SleepFor(sleep);
    sleep = std::min(sleep * 2, how.max_sleep);
  }
}

}  // namespace chorus::ops
