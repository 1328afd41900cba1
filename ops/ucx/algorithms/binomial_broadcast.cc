// File: ops/ucx/algorithms/binomial_broadcast.cc
#include "ops/ucx/algorithms/binomial_broadcast.h"

#include "base/status_macros.h"
#include "ops/ucx/algorithms/common.h"

namespace chorus::ops::ucx {

absl::Status BinomialBroadcast::Run(void* buffer, int64_t bytes, int root, uint64_t tag) {
  const int n = transport_->size();
  const int v = (transport_->rank() - root + n) % n;
  auto real = [&](int vrank) { return (vrank + root) % n; };
  int mask = 1;
  Outstanding pending(transport_);
  for (; mask < n; mask <<= 1) {
    if (v & mask) {
      CHORUS_RETURN_IF_ERROR(
          pending.Add(transport_->Irecv(real(v - mask), tag, buffer, bytes)).status());
      CHORUS_RETURN_IF_ERROR(pending.WaitAll());
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) {
      CHORUS_RETURN_IF_ERROR(
          pending.Add(transport_->Isend(real(v + mask), tag, buffer, bytes)).status());
    }
  }
  return pending.WaitAll();
}

}  // namespace chorus::ops::ucx
