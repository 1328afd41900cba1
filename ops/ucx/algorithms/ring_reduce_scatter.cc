// File: ops/ucx/algorithms/ring_reduce_scatter.cc
#include "ops/ucx/algorithms/ring_reduce_scatter.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "base/status_macros.h"
#include "ops/ucx/algorithms/common.h"

namespace chorus::ops::ucx {
absl::Status RingReduceScatter::Run(const void* local, void* work, absl::Span<const int64_t> blocks,
                                    const Reduction& reduction, uint64_t tag) {
  const int n = transport_->size(), r = transport_->rank();
  const int64_t elem = reduction.element_bytes();
  RingScratch own_scratch;
  RingScratch& s = scratch_ != nullptr ? *scratch_ : own_scratch;
  std::vector<int64_t>& offsets = s.offsets;
  BlockOffsetsInto(blocks, &offsets);
  const auto* in = static_cast<const std::byte*>(local);
  auto* acc = static_cast<std::byte*>(work);
  const bool in_place = local == work;
  const auto bn = [&](int b) { return static_cast<size_t>(b); };
  if (n == 1) {
    if (!in_place && blocks[0] > 0) std::memcpy(acc, in, static_cast<size_t>(blocks[0] * elem));
    return absl::OkStatus();
  }
  const int next = RingIndex(r + 1, n), prev = RingIndex(r - 1, n);
  const int64_t piece = std::max<int64_t>(1, options_.piece_bytes / elem);

  // The predecessor's outgoing stream, which is this rank's incoming one: its pieces and the
  // ring step of each.
  std::vector<Piece>& incoming = s.incoming;
  std::vector<int>& step_of = s.step_of;
  incoming.clear();
  step_of.clear();
  for (int step = 0; step < n - 1; ++step) {
    const int b = RingIndex(r - step - 2, n);
    AppendPieces(offsets[bn(b)], blocks[bn(b)], piece, &incoming);
    step_of.resize(incoming.size(), step);
  }
  int64_t largest = 0;
  for (const Piece& p : incoming) largest = std::max(largest, p.length);

  Outstanding pending(transport_);
  // Step 0: this rank's own copy of block r - 1 goes out at once.
  {
    const int b = RingIndex(r - 1, n);
    std::vector<Piece>& pieces = s.own;
    pieces.clear();
    AppendPieces(offsets[bn(b)], blocks[bn(b)], piece, &pieces);
    for (const Piece& p : pieces) {
      CHORUS_RETURN_IF_ERROR(
          pending.Add(transport_->Isend(next, tag, in + p.offset * elem, p.length * elem))
              .status());
    }
  }

  // Pieces arrive in `depth` cache-resident scratch slots, so at most depth receives from the
  // predecessor are posted at a time (Note [Ring scratch slots] in docs/ucx_transport.md).
  const size_t depth = static_cast<size_t>(std::max(1, options_.depth));
  const int64_t slot_bytes = largest * elem;
  std::vector<std::byte>& scratch = s.slots;
  if (scratch.size() < depth * static_cast<size_t>(slot_bytes)) {
    scratch.resize(depth * static_cast<size_t>(slot_bytes));
  }
  auto slot = [&](size_t j) {
    return scratch.data() + (j % depth) * static_cast<size_t>(slot_bytes);
  };
  std::vector<RequestId>& recv_ids = s.recv_ids;
  recv_ids.assign(incoming.size(), RequestId{});
  auto post = [&](size_t j) -> absl::Status {
    CHORUS_ASSIGN_OR_RETURN(
        recv_ids[j], pending.Add(transport_->Irecv(prev, tag, slot(j), incoming[j].length * elem)));
    return absl::OkStatus();
  };
  size_t posted = 0;
  for (; posted < std::min(depth, incoming.size()); ++posted) CHORUS_RETURN_IF_ERROR(post(posted));

  for (size_t j = 0; j < incoming.size(); ++j) {
    CHORUS_RETURN_IF_ERROR(pending.Wait(recv_ids[j]));
    const Piece& p = incoming[j];
    std::byte* dst = acc + p.offset * elem;
    const size_t bytes = static_cast<size_t>(p.length * elem);
    if (!in_place) std::memcpy(dst, in + p.offset * elem, bytes);
    reduction.Apply(dst, slot(j), p.length);  // op(mine, predecessor's)
    // Slot j % depth is free again: the receive `depth` places later takes it.
    if (posted < incoming.size()) CHORUS_RETURN_IF_ERROR(post(posted++));
    // The block reduced at step s is the one sent at step s + 1.
    if (step_of[j] < n - 2) {
      CHORUS_RETURN_IF_ERROR(
          pending.Add(transport_->Isend(next, tag, dst, p.length * elem)).status());
    }
  }
  return pending.WaitAll();
}

}  // namespace chorus::ops::ucx
