// File: ops/ucx/algorithms/pairwise_alltoallv.cc
#include "ops/ucx/algorithms/pairwise_alltoallv.h"

#include <cstddef>
#include <cstring>
#include <string>

#include "base/status_macros.h"
#include "ops/ucx/algorithms/common.h"

namespace chorus::ops::ucx {

absl::Status PairwiseAlltoallv::Run(const void* send, absl::Span<const int64_t> send_bytes,
                                    absl::Span<const int64_t> send_offsets, void* recv,
                                    absl::Span<const int64_t> recv_bytes,
                                    absl::Span<const int64_t> recv_offsets, uint64_t tag) {
  const int n = transport_->size(), r = transport_->rank();
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const size_t me = static_cast<size_t>(r);
  if (send_bytes[me] != recv_bytes[me]) {
    return absl::InvalidArgumentError("Alltoallv: rank " + std::to_string(r) + " sends itself " +
                                      std::to_string(send_bytes[me]) + " bytes but expects " +
                                      std::to_string(recv_bytes[me]));
  }
  if (send_bytes[me] > 0) {
    std::memcpy(out + recv_offsets[me], in + send_offsets[me], static_cast<size_t>(send_bytes[me]));
  }
  for (int k = 1; k < n; ++k) {
    const size_t to = static_cast<size_t>((r + k) % n), from = static_cast<size_t>((r - k + n) % n);
    Outstanding pending(transport_);
    CHORUS_RETURN_IF_ERROR(pending
                               .Add(transport_->Irecv(static_cast<int>(from), tag,
                                                      out + recv_offsets[from], recv_bytes[from]))
                               .status());
    CHORUS_RETURN_IF_ERROR(pending
                               .Add(transport_->Isend(static_cast<int>(to), tag,
                                                      in + send_offsets[to], send_bytes[to]))
                               .status());
    CHORUS_RETURN_IF_ERROR(pending.WaitAll());
  }
  return absl::OkStatus();
}

}  // namespace chorus::ops::ucx
