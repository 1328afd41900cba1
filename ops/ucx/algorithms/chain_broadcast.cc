// File: ops/ucx/algorithms/chain_broadcast.cc
#include "ops/ucx/algorithms/chain_broadcast.h"

#include <cstddef>
#include <vector>

#include "base/status_macros.h"
#include "ops/ucx/algorithms/common.h"

namespace chorus::ops::ucx {

absl::Status ChainBroadcast::Run(void* buffer, int64_t bytes, int root, uint64_t tag) {
  const int n = transport_->size(), r = transport_->rank();
  const int v = (r - root + n) % n;
  const int prev = (r - 1 + n) % n, next = (r + 1) % n;
  const bool last = v == n - 1;
  auto* buf = static_cast<std::byte*>(buffer);
  if (n == 1 || bytes == 0) return absl::OkStatus();
  std::vector<Piece> pieces;
  AppendPieces(0, bytes, piece_bytes_, &pieces);
  Outstanding pending(transport_);
  if (v == 0) {
    for (const Piece& p : pieces) {
      CHORUS_RETURN_IF_ERROR(
          pending.Add(transport_->Isend(next, tag, buf + p.offset, p.length)).status());
    }
    return pending.WaitAll();
  }
  std::vector<RequestId> recv_ids(pieces.size());
  for (size_t j = 0; j < pieces.size(); ++j) {
    CHORUS_ASSIGN_OR_RETURN(recv_ids[j], pending.Add(transport_->Irecv(
                                             prev, tag, buf + pieces[j].offset, pieces[j].length)));
  }
  for (size_t j = 0; j < pieces.size(); ++j) {
    CHORUS_RETURN_IF_ERROR(pending.Wait(recv_ids[j]));
    if (!last) {
      CHORUS_RETURN_IF_ERROR(
          pending.Add(transport_->Isend(next, tag, buf + pieces[j].offset, pieces[j].length))
              .status());
    }
  }
  return pending.WaitAll();
}

}  // namespace chorus::ops::ucx
