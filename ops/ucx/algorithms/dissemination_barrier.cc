// File: ops/ucx/algorithms/dissemination_barrier.cc
#include "ops/ucx/algorithms/dissemination_barrier.h"

#include "base/status_macros.h"
#include "ops/ucx/algorithms/common.h"

namespace chorus::ops::ucx {

absl::Status DisseminationBarrier::Run(uint64_t tag) {
  const int n = transport_->size(), r = transport_->rank();
  for (int dist = 1; dist < n; dist <<= 1) {
    Outstanding pending(transport_);
    CHORUS_RETURN_IF_ERROR(
        pending.Add(transport_->Irecv((r - dist + n) % n, tag, nullptr, 0)).status());
    CHORUS_RETURN_IF_ERROR(
        pending.Add(transport_->Isend((r + dist) % n, tag, nullptr, 0)).status());
    CHORUS_RETURN_IF_ERROR(pending.WaitAll());
  }
  return absl::OkStatus();
}

}  // namespace chorus::ops::ucx
