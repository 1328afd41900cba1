// File: runtime/execute/collective_math.h
//
// Arithmetic every data plane (CPU executor, GPU launcher) derives identically from a Response,
// so that the ranks' collectives line up.
//
// Thread-safety: pure functions.
#ifndef CHORUS_RUNTIME_EXECUTE_COLLECTIVE_MATH_H_
#define CHORUS_RUNTIME_EXECUTE_COLLECTIVE_MATH_H_

#include <cstdint>
#include <vector>

#include "chorus/types.h"
#include "runtime/message.h"

namespace chorus::runtime {

// The reduction the backend runs for `op` (Average is a Sum followed by scaling).
inline ReduceOp BackendOp(ReduceOp op) { return op == ReduceOp::kAverage ? ReduceOp::kSum : op; }

// The factor applied after the reduction: the response's postscale, and 1/size for Average.
inline double PostscaleFor(const Response& response, int set_size) {
  double factor = response.postscale_factor;
  if (response.reduce_op == ReduceOp::kAverage) factor /= set_size;
  return factor;
}

// Elements of one first-dimension slice of `shape` (1 for a vector).
inline int64_t RowElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t d = 1; d < shape.size(); ++d) n *= shape[d];
  return n;
}

// Elements each rank receives from a reducescatter of `shape` over `size` ranks: the first
// dimension split as evenly as possible, the first (dim0 % size) ranks taking one row more.
inline std::vector<int64_t> ReducescatterCounts(const std::vector<int64_t>& shape, int size) {
  const int64_t dim0 = shape[0];
  const int64_t row = RowElements(shape);
  std::vector<int64_t> counts(size);
  for (int r = 0; r < size; ++r) counts[r] = (dim0 / size + (r < dim0 % size ? 1 : 0)) * row;
  return counts;
}

// One rank's alltoall splits for a first dimension of `rows` in a set of `set_size` ranks: one
// non-negative count per rank summing to `rows`, or none for an even split. Counted down, never
// summed: the splits come from users and peers, and a sum of them could overflow.
inline bool AreValidSplits(const std::vector<int64_t>& splits, int64_t rows, size_t set_size) {
  if (splits.empty()) return set_size > 0 && rows % static_cast<int64_t>(set_size) == 0;
  if (splits.size() != set_size) return false;
  int64_t left = rows;  // rows no split has taken yet
  for (int64_t s : splits) {
    if (s < 0 || s > left) return false;
    left -= s;
  }
  return left == 0;
}

// Byte counts and offsets of one alltoall on this rank: send_rows[r] rows go to rank r,
// recv_rows[r] rows come from it, each row `row_bytes` bytes, packed in rank order.
struct AlltoallLayout {
  std::vector<int64_t> send_bytes, send_offsets, recv_bytes, recv_offsets;
  int64_t send_total = 0;  // bytes
  int64_t recv_total = 0;  // bytes
  int64_t recv_rows = 0;   // the output's first dimension
};
inline AlltoallLayout MakeAlltoallLayout(const std::vector<int64_t>& send_rows,
                                         const std::vector<int64_t>& recv_rows, int64_t row_bytes) {
  const size_t size = send_rows.size();
  AlltoallLayout l;
  l.send_bytes.resize(size);
  l.send_offsets.resize(size);
  l.recv_bytes.resize(size);
  l.recv_offsets.resize(size);
  for (size_t r = 0; r < size; ++r) {
    l.send_bytes[r] = send_rows[r] * row_bytes;
    l.send_offsets[r] = l.send_total;
    l.send_total += l.send_bytes[r];
    l.recv_bytes[r] = recv_rows[r] * row_bytes;
    l.recv_offsets[r] = l.recv_total;
    l.recv_total += l.recv_bytes[r];
    l.recv_rows += recv_rows[r];
  }
  return l;
}

// The gathered buffer of a fused allgather of m tensors is rank-major: rank 0's rows of tensor
// 0, 1, ..., m-1, then rank 1's, ... Calls fn(k, gathered_offset, output_offset, bytes) for every
// non-empty block, in buffer order: tensor k's bytes at gathered_offset go to output_offset of
// its output. first_dim(k, r) is tensor k's first dimension on rank r; row_bytes[k] its row size.
template <typename FirstDim, typename Fn>
void ForEachAllgatherBlock(int size, const std::vector<int64_t>& row_bytes, FirstDim first_dim,
                           Fn fn) {
  const size_t m = row_bytes.size();
  std::vector<int64_t> out_off(m, 0);
  int64_t src = 0;
  for (int r = 0; r < size; ++r) {
    for (size_t k = 0; k < m; ++k) {
      const int64_t bytes = first_dim(k, r) * row_bytes[k];
      if (bytes > 0) fn(k, src, out_off[k], bytes);
      out_off[k] += bytes;
      src += bytes;
    }
  }
}

// Rows rank `rank` keeps of a reducescatter of first dimension `dim0` over `size` ranks.
inline int64_t ReducescatterRows(int64_t dim0, int size, int rank) {
  return dim0 / size + (rank < dim0 % size ? 1 : 0);
}

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_EXECUTE_COLLECTIVE_MATH_H_
