// File: runtime/loop/thread_affinity.h
//
// CHORUS_THREAD_AFFINITY (HOROVOD_THREAD_AFFINITY): the background thread of local rank i is
// pinned to the i-th core of the list, as Horovod pins its own. A list shorter than the local
// size is ignored with a warning (Horovod's rule).
//
// Thread-safety: PinCallingThread acts on the calling thread only.
#ifndef CHORUS_RUNTIME_LOOP_THREAD_AFFINITY_H_
#define CHORUS_RUNTIME_LOOP_THREAD_AFFINITY_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace chorus::runtime {

// The core local rank `local_rank` of `local_size` is pinned to: nullopt when `cores` is empty;
// FailedPrecondition naming the sizes when the list is shorter than the local size.
absl::StatusOr<std::optional<int>> CoreFor(const std::vector<int>& cores, int local_rank,
                                           int local_size);

// Pins the calling thread to `core`. InvalidArgument when the kernel refuses it (a core this
// process may not use).
absl::Status PinCallingThread(int core);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_LOOP_THREAD_AFFINITY_H_
