// File: test/support/hierarchical_inputs.h
//
// The inputs of the tests of hierarchical collectives (unit tier over simulated hosts, compared
// with the flat ones; MPI tier over MPI and UCX sub-groups, checked against the exact results):
// every reducible dtype, one value per (dtype, op, rank, element), the magnitude that
// test/support/summation_bound.h bounds a floating-point difference by, and the exact result.
//
// Thread-safety: stateless. Header-only.
#ifndef CHORUS_TEST_SUPPORT_HIERARCHICAL_INPUTS_H_
#define CHORUS_TEST_SUPPORT_HIERARCHICAL_INPUTS_H_

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "chorus/types.h"
#include "test/support/typed_values.h"

namespace chorus::testing {

inline constexpr DataType kReducibleDtypes[] = {
    DataType::kUint8,    DataType::kInt8,    DataType::kInt16,
    DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
    DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64};

inline bool IsFloat(DataType d) {
  return d == DataType::kFloat16 || d == DataType::kBfloat16 || d == DataType::kFloat32 ||
         d == DataType::kFloat64;
}

// Rank `rank`'s element i: no integer sum or product overflows on 6 ranks (integers in
// [-20, 20], [0, 40] for uint8, factors 1 or 2 for products); floats in [-1, 1], product factors
// of magnitude 0.5 to 1.5.
inline double HierarchicalInput(DataType d, ReduceOp op, int rank, int64_t i) {
  const int64_t h = (rank * 7919 + i * 104729 + static_cast<int64_t>(d) * 31) % 1000003;
  if (!IsFloat(d)) {
    if (op == ReduceOp::kProduct) return static_cast<double>(1 + h % 2);
    return d == DataType::kUint8 ? static_cast<double>(h % 41) : static_cast<double>(h % 41) - 20;
  }
  const double unit = static_cast<double>(h % 2001) / 1000.0 - 1.0;  // [-1, 1]
  if (op == ReduceOp::kProduct) return (h % 2 == 0 ? 1 : -1) * (0.5 + std::abs(unit));
  return unit;
}

// Element i's sum of magnitudes over `ranks` ranks (their product for a product), of the
// values as the ranks sent them (rounded to `d`): SummationOrderBound's `sum_abs`.
inline double HierarchicalInputMagnitude(DataType d, ReduceOp op, int ranks, int64_t i) {
  double magnitude = op == ReduceOp::kProduct ? 1.0 : 0.0;
  for (int r = 0; r < ranks; ++r) {
    std::byte one[8];
    Store(d, one, 0, HierarchicalInput(d, op, r, i));
    const double x = std::abs(Load(d, one, 0));
    magnitude = op == ReduceOp::kProduct ? magnitude * x : magnitude + x;
  }
  return magnitude;
}

// Element i's exact reduction by `op` (Sum, Min, Max or Product) over `ranks` ranks of the
// values as the ranks sent them (rounded to `d`; integers exactly, floats in long double), with
// its HierarchicalInputMagnitude: what a hierarchical result is checked against without running
// a flat reference.
struct ExactReduction {
  long double value;
  double magnitude;
};

inline ExactReduction HierarchicalExpected(DataType d, ReduceOp op, int ranks, int64_t i) {
  ExactReduction out{op == ReduceOp::kProduct ? 1.0L : 0.0L, op == ReduceOp::kProduct ? 1.0 : 0.0};
  for (int r = 0; r < ranks; ++r) {
    std::byte one[8];
    Store(d, one, 0, HierarchicalInput(d, op, r, i));
    const double x = Load(d, one, 0);
    switch (op) {
      case ReduceOp::kMin:
        out.value = r == 0 || x < out.value ? x : out.value;
        break;
      case ReduceOp::kMax:
        out.value = r == 0 || x > out.value ? x : out.value;
        break;
      case ReduceOp::kProduct:
        out.value *= x;
        break;
      default:
        out.value += x;
    }
    out.magnitude =
        op == ReduceOp::kProduct ? out.magnitude * std::abs(x) : out.magnitude + std::abs(x);
  }
  return out;
}

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_HIERARCHICAL_INPUTS_H_
