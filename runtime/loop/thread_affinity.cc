#include "runtime/loop/thread_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chorus::runtime {

absl::StatusOr<std::optional<int>> CoreFor(const std::vector<int>& cores, int local_rank,
                                           int local_size) {
  if (cores.empty()) return std::optional<int>();
  if (static_cast<int>(cores.size()) < local_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CHORUS_THREAD_AFFINITY=", absl::StrJoin(cores, ","), " names ", cores.size(),
        " core(s) for ", local_size, " local ranks (one per local rank); it is ignored"));
  }
  return std::optional<int>(cores[static_cast<size_t>(local_rank)]);
}

absl::Status PinCallingThread(int core) {
  if (core < 0 || core >= CPU_SETSIZE) {
    return absl::InvalidArgumentError(absl::StrCat("core ", core, " is out of range"));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  const int error = ::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set);
  if (error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pinning the background thread to core ", core, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace chorus::runtime
