// File: ops/ucx/ucx_backend.cc
#include "ops/ucx/ucx_backend.h"

#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "ops/ucx/algorithms/binomial_broadcast.h"
#include "ops/ucx/algorithms/chain_broadcast.h"
#include "ops/ucx/algorithms/common.h"
#include "ops/ucx/algorithms/dissemination_barrier.h"
#include "ops/ucx/algorithms/pairwise_alltoallv.h"
#include "ops/ucx/algorithms/recursive_doubling_allreduce.h"
#include "ops/ucx/algorithms/ring_allgatherv.h"
#include "ops/ucx/algorithms/ring_allreduce.h"
#include "ops/ucx/algorithms/ring_reduce_scatter.h"

namespace chorus::ops {
namespace {

absl::Status CheckSpan(const char* what, const char* name, absl::Span<const int64_t> values,
                       int ranks) {
  if (values.size() != static_cast<size_t>(ranks)) {
    return absl::InvalidArgumentError(std::string(what) + ": " + name + " has " +
                                      std::to_string(values.size()) + " entries, the set has " +
                                      std::to_string(ranks) + " ranks");
  }
  for (size_t r = 0; r < values.size(); ++r) {
    if (values[r] < 0) {
      return absl::InvalidArgumentError(std::string(what) + ": " + name + "[" + std::to_string(r) +
                                        "] is negative");
    }
  }
  return absl::OkStatus();
}

}  // namespace

UcxBackend::UcxBackend(std::unique_ptr<TagTransport> transport, UcxBackendOptions options)
    : transport_(std::move(transport)), options_(options) {}

uint64_t UcxBackend::NextTag() {
  const uint64_t max = transport_->max_tag();
  const uint64_t tag = max == ~uint64_t{0} ? calls_ : calls_ % (max + 1);
  ++calls_;
  return tag;
}

absl::Status UcxBackend::Allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                   ReduceOp op) {
  if (count < 0) return absl::InvalidArgumentError("Allreduce: negative count");
  CHORUS_ASSIGN_OR_RETURN(const ucx::Reduction reduction,
                          ucx::Reduction::Of("Allreduce", dtype, op));
  if (count == 0) return absl::OkStatus();
  const uint64_t tag = NextTag();
  const int64_t bytes = count * reduction.element_bytes();
  if (bytes <= options_.recursive_doubling_max_bytes || count < size()) {
    return ucx::RecursiveDoublingAllreduce(transport_.get(), &scratch_)
        .Run(send, recv, count, reduction, tag);
  }
  return ucx::RingAllreduce(transport_.get(), {options_.piece_bytes, options_.ring_depth},
                            &ring_scratch_)
      .Run(send, recv, count, reduction, tag);
}

absl::Status UcxBackend::Allgatherv(const void* send, void* recv,
                                    absl::Span<const int64_t> recv_bytes) {
  CHORUS_RETURN_IF_ERROR(CheckSpan("Allgatherv", "recv_bytes", recv_bytes, size()));
  return ucx::RingAllgatherv(transport_.get(), options_.piece_bytes, &ring_scratch_)
      .Run(send, recv, recv_bytes, NextTag());
}

absl::Status UcxBackend::Broadcast(void* buffer, int64_t bytes, int root) {
  if (bytes < 0) return absl::InvalidArgumentError("Broadcast: negative byte count");
  if (root < 0 || root >= size()) {
    return absl::InvalidArgumentError("Broadcast: root " + std::to_string(root) +
                                      " is not a rank of this set of " + std::to_string(size()));
  }
  if (bytes == 0 || size() == 1) return absl::OkStatus();
  const uint64_t tag = NextTag();
  if (bytes <= options_.tree_broadcast_max_bytes) {
    return ucx::BinomialBroadcast(transport_.get()).Run(buffer, bytes, root, tag);
  }
  return ucx::ChainBroadcast(transport_.get(), options_.piece_bytes).Run(buffer, bytes, root, tag);
}

absl::Status UcxBackend::Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                                   absl::Span<const int64_t> send_offsets, void* recv,
                                   absl::Span<const int64_t> recv_bytes,
                                   absl::Span<const int64_t> recv_offsets) {
  CHORUS_RETURN_IF_ERROR(CheckSpan("Alltoallv", "send_bytes", send_bytes, size()));
  CHORUS_RETURN_IF_ERROR(CheckSpan("Alltoallv", "send_offsets", send_offsets, size()));
  CHORUS_RETURN_IF_ERROR(CheckSpan("Alltoallv", "recv_bytes", recv_bytes, size()));
  CHORUS_RETURN_IF_ERROR(CheckSpan("Alltoallv", "recv_offsets", recv_offsets, size()));
  return ucx::PairwiseAlltoallv(transport_.get())
      .Run(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets, NextTag());
}

absl::Status UcxBackend::ReduceScatter(const void* send, void* recv,
                                       absl::Span<const int64_t> recv_counts, DataType dtype,
                                       ReduceOp op) {
  CHORUS_RETURN_IF_ERROR(CheckSpan("ReduceScatter", "recv_counts", recv_counts, size()));
  CHORUS_ASSIGN_OR_RETURN(const ucx::Reduction reduction,
                          ucx::Reduction::Of("ReduceScatter", dtype, op));
  int64_t total = 0;
  for (int64_t c : recv_counts) total += c;
  if (total == 0) return absl::OkStatus();
  const int64_t elem = reduction.element_bytes();
  const size_t me = static_cast<size_t>(rank());
  const int64_t offset = ucx::BlockOffsets(recv_counts)[me] * elem;
  const size_t mine = static_cast<size_t>(recv_counts[me] * elem);
  ucx::RingReduceScatter ring(transport_.get(), {options_.piece_bytes, options_.ring_depth},
                              &ring_scratch_);
  const uint64_t tag = NextTag();
  if (send == recv) {
    // In place: `recv` holds the whole input; this rank's block moves to its front.
    CHORUS_RETURN_IF_ERROR(ring.Run(recv, recv, recv_counts, reduction, tag));
    if (mine > 0 && offset > 0) {
      std::memmove(recv, static_cast<std::byte*>(recv) + offset, mine);
    }
    return absl::OkStatus();
  }
  std::vector<std::byte> work(static_cast<size_t>(total * elem));
  CHORUS_RETURN_IF_ERROR(ring.Run(send, work.data(), recv_counts, reduction, tag));
  if (mine > 0) std::memcpy(recv, work.data() + offset, mine);
  return absl::OkStatus();
}

absl::Status UcxBackend::Barrier() {
  return ucx::DisseminationBarrier(transport_.get()).Run(NextTag());
}

}  // namespace chorus::ops
