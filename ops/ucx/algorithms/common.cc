// File: ops/ucx/algorithms/common.cc
#include "ops/ucx/algorithms/common.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "ops/cpu/reduce_kernels.h"

namespace chorus::ops::ucx {

absl::StatusOr<Reduction> Reduction::Of(const char* what, DataType dtype, ReduceOp op) {
  const int64_t bytes = static_cast<int64_t>(DataTypeSize(dtype));
  if (bytes == 0) {
    return absl::InvalidArgumentError(std::string(what) + ": unknown data type " +
                                      std::to_string(static_cast<int32_t>(dtype)));
  }
  if (!IsReducible(dtype)) {
    return absl::InvalidArgumentError(std::string(what) + ": " + DataTypeName(dtype) +
                                      " tensors cannot be reduced");
  }
  if (op != ReduceOp::kSum && op != ReduceOp::kMin && op != ReduceOp::kMax &&
      op != ReduceOp::kProduct) {
    return absl::InvalidArgumentError(std::string(what) + ": reduce op " + ReduceOpName(op) +
                                      " is not one of sum, min, max and product");
  }
  return Reduction(dtype, op, /*bit_and=*/false, bytes);
}

Reduction Reduction::BitAnd64() {
  return Reduction(DataType::kInt64, ReduceOp::kSum, /*bit_and=*/true, sizeof(uint64_t));
}

void Reduction::Apply(void* dst, const void* src, int64_t count) const {
  if (count <= 0) return;
  if (bit_and_) {
    // memcpy in and out: the buffers need not be 8-byte aligned.
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    for (int64_t i = 0; i < count; ++i) {
      uint64_t a, b;
      std::memcpy(&a, d + i * 8, 8);
      std::memcpy(&b, s + i * 8, 8);
      a &= b;
      std::memcpy(d + i * 8, &a, 8);
    }
    return;
  }
  // Cannot fail: Of() accepted the dtype and op.
  ReduceInto(dst, src, count, dtype_, op_).IgnoreError();
}

void AppendPieces(int64_t offset, int64_t length, int64_t max_piece, std::vector<Piece>* out) {
  const int64_t step = std::max<int64_t>(1, max_piece);
  for (int64_t done = 0; done < length; done += step) {
    out->push_back(Piece{offset + done, std::min(step, length - done)});
  }
}

void EvenBlocksInto(int64_t count, int n, std::vector<int64_t>* out) {
  out->assign(static_cast<size_t>(n), count / n);
  for (int64_t b = 0; b < count % n; ++b) ++(*out)[static_cast<size_t>(b)];
}

std::vector<int64_t> EvenBlocks(int64_t count, int n) {
  std::vector<int64_t> blocks;
  EvenBlocksInto(count, n, &blocks);
  return blocks;
}

void BlockOffsetsInto(absl::Span<const int64_t> lengths, std::vector<int64_t>* out) {
  out->resize(lengths.size());
  int64_t total = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    (*out)[b] = total;
    total += lengths[b];
  }
}

std::vector<int64_t> BlockOffsets(absl::Span<const int64_t> lengths) {
  std::vector<int64_t> offsets;
  BlockOffsetsInto(lengths, &offsets);
  return offsets;
}

Outstanding::~Outstanding() { WaitAll().IgnoreError(); }

absl::StatusOr<RequestId> Outstanding::Add(absl::StatusOr<RequestId> started) {
  if (started.ok()) ids_.push_back(*started);
  return started;
}

absl::Status Outstanding::Wait(RequestId id) {
  // Algorithms wait for their receives roughly in the order they started them: search from the
  // front.
  auto it = std::find(ids_.begin(), ids_.end(), id);
  if (it != ids_.end()) ids_.erase(it);
  const RequestId one[1] = {id};
  return transport_->Wait(one);
}

absl::Status Outstanding::WaitAll() {
  if (ids_.empty()) return absl::OkStatus();
  const absl::Status waited = transport_->Wait(ids_);
  ids_.clear();
  return waited;
}

}  // namespace chorus::ops::ucx
