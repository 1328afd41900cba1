#include "ops/mpi/mpi_wait.h"

#include <algorithm>
#include <string>

#include "ops/mpi/mpi_datatypes.h"

namespace chorus::ops {

absl::Status WaitPolitely(MPI_Request* request, const char* call, const PoliteWait& how) {
  absl::Time last = absl::Now();
  const absl::Time spin_until = last + how.spin;
  absl::Time deadline = how.deadline;
  absl::Duration sleep = how.first_sleep;
  absl::Duration slept = absl::ZeroDuration();  // asked for since `last`
  while (true) {
    int done = 0;
    const int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      return MpiErrorToStatus(rc, (std::string("MPI_Test of ") + call).c_str(), __FILE__, __LINE__);
    }
    if (done != 0) return absl::OkStatus();
    const absl::Time now = absl::Now();
    const absl::Duration frozen = now - last - slept;
    if (frozen > how.frozen_after) deadline += frozen;
    last = now;
    slept = absl::ZeroDuration();
    if (now >= deadline) {
      return absl::DeadlineExceededError(std::string(call) + " did not complete by its deadline");
    }
    if (now < spin_until) continue;
    slept = std::min(sleep, deadline - now);
    absl::SleepFor(slept);
    sleep = std::min(sleep * 2, how.max_sleep);
  }
}

}  // namespace chorus::ops
