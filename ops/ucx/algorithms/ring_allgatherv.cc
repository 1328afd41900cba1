// File: ops/ucx/algorithms/ring_allgatherv.cc
#include "ops/ucx/algorithms/ring_allgatherv.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "base/status_macros.h"
#include "ops/ucx/algorithms/common.h"

namespace chorus::ops::ucx {
absl::Status RingAllgatherv::Run(const void* send, void* recv,
                                 absl::Span<const int64_t> block_bytes, uint64_t tag) {
  const int n = transport_->size(), r = transport_->rank();
  RingScratch own_scratch;
  RingScratch& s = scratch_ != nullptr ? *scratch_ : own_scratch;
  std::vector<int64_t>& offsets = s.offsets;
  BlockOffsetsInto(block_bytes, &offsets);
  auto* buf = static_cast<std::byte*>(recv);
  const auto bn = [](int b) { return static_cast<size_t>(b); };
  std::byte* mine = buf + offsets[bn(r)];
  if (send != mine && block_bytes[bn(r)] > 0) {
    std::memcpy(mine, send, static_cast<size_t>(block_bytes[bn(r)]));
  }
  if (n == 1) return absl::OkStatus();
  const int next = RingIndex(r + 1, n), prev = RingIndex(r - 1, n);

  Outstanding pending(transport_);
  // Every incoming piece, in the predecessor's sending order, and its step.
  std::vector<Piece>& incoming = s.incoming;
  std::vector<int>& step_of = s.step_of;
  incoming.clear();
  step_of.clear();
  for (int t = 0; t < n - 1; ++t) {
    const int b = RingIndex(r - t - 1, n);
    AppendPieces(offsets[bn(b)], block_bytes[bn(b)], piece_bytes_, &incoming);
    step_of.resize(incoming.size(), t);
  }
  std::vector<RequestId>& recv_ids = s.recv_ids;
  recv_ids.assign(incoming.size(), RequestId{});
  for (size_t j = 0; j < incoming.size(); ++j) {
    CHORUS_ASSIGN_OR_RETURN(
        recv_ids[j],
        pending.Add(transport_->Irecv(prev, tag, buf + incoming[j].offset, incoming[j].length)));
  }
  std::vector<Piece>& own = s.own;
  own.clear();
  AppendPieces(offsets[bn(r)], block_bytes[bn(r)], piece_bytes_, &own);
  for (const Piece& p : own) {
    CHORUS_RETURN_IF_ERROR(
        pending.Add(transport_->Isend(next, tag, buf + p.offset, p.length)).status());
  }
  for (size_t j = 0; j < incoming.size(); ++j) {
    CHORUS_RETURN_IF_ERROR(pending.Wait(recv_ids[j]));
    // The block received at step t is the one sent at step t + 1; the last one stops here.
    if (step_of[j] < n - 2) {
      CHORUS_RETURN_IF_ERROR(
          pending.Add(transport_->Isend(next, tag, buf + incoming[j].offset, incoming[j].length))
              .status());
    }
  }
  return pending.WaitAll();
}

}  // namespace chorus::ops::ucx
