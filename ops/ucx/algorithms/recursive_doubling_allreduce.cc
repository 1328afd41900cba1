// File: ops/ucx/algorithms/recursive_doubling_allreduce.cc
#include "ops/ucx/algorithms/recursive_doubling_allreduce.h"

#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "base/status_macros.h"

namespace chorus::ops::ucx {
namespace {

// Sends `bytes` of `data` to `peer` and waits.
absl::Status Send(TagTransport* t, int peer, uint64_t tag, const void* data, int64_t bytes) {
  Outstanding pending(t);
  CHORUS_RETURN_IF_ERROR(pending.Add(t->Isend(peer, tag, data, bytes)).status());
  return pending.WaitAll();
}

absl::Status Recv(TagTransport* t, int peer, uint64_t tag, void* data, int64_t bytes) {
  Outstanding pending(t);
  CHORUS_RETURN_IF_ERROR(pending.Add(t->Irecv(peer, tag, data, bytes)).status());
  return pending.WaitAll();
}

}  // namespace

absl::Status RecursiveDoublingAllreduce::Run(const void* send, void* recv, int64_t count,
                                             const Reduction& reduction, uint64_t tag) {
  const int64_t bytes = count * reduction.element_bytes();
  if (send != recv && bytes > 0) std::memcpy(recv, send, static_cast<size_t>(bytes));
  const int n = transport_->size(), r = transport_->rank();
  if (n == 1 || count == 0) return absl::OkStatus();
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;

  // `mine` holds this rank's current partial result, `theirs` the partner's; they swap when the
  // combined value lands in `theirs`.
  std::vector<std::byte> own_scratch;
  std::vector<std::byte>& scratch = scratch_ != nullptr ? *scratch_ : own_scratch;
  if (scratch.size() < static_cast<size_t>(bytes)) scratch.resize(static_cast<size_t>(bytes));
  std::byte* mine = static_cast<std::byte*>(recv);
  std::byte* theirs = scratch.data();

  int vrank;  // rank among the p ranks of the doubling; -1 while folded in
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      CHORUS_RETURN_IF_ERROR(Send(transport_, r + 1, tag, mine, bytes));
      vrank = -1;
    } else {
      CHORUS_RETURN_IF_ERROR(Recv(transport_, r - 1, tag, theirs, bytes));
      reduction.Apply(theirs, mine, count);  // op(rank r - 1, rank r)
      std::swap(mine, theirs);
      vrank = r / 2;
    }
  } else {
    vrank = r - rem;
  }

  if (vrank >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int vpartner = vrank ^ mask;
      const int partner = vpartner < rem ? 2 * vpartner + 1 : vpartner + rem;
      Outstanding pending(transport_);
      CHORUS_RETURN_IF_ERROR(pending.Add(transport_->Isend(partner, tag, mine, bytes)).status());
      CHORUS_RETURN_IF_ERROR(pending.Add(transport_->Irecv(partner, tag, theirs, bytes)).status());
      CHORUS_RETURN_IF_ERROR(pending.WaitAll());
      if (vpartner < vrank) {
        reduction.Apply(theirs, mine, count);  // op(partner's lower half, mine)
        std::swap(mine, theirs);
      } else {
        reduction.Apply(mine, theirs, count);  // op(my lower half, partner's)
      }
    }
  }

  if (r < 2 * rem) {
    if (r % 2 == 1) {
      CHORUS_RETURN_IF_ERROR(Send(transport_, r - 1, tag, mine, bytes));
    } else {
      CHORUS_RETURN_IF_ERROR(Recv(transport_, r + 1, tag, mine, bytes));
    }
  }
  if (mine != recv) std::memcpy(recv, mine, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

}  // namespace chorus::ops::ucx
