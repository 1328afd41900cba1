// File: test/support/summation_bound.h
//
// How far a floating-point sum over `ranks` ranks computed in one order (the flat algorithm) may
// be from the same sum computed in another (the hierarchical one: each host first, then across
// hosts). Recursive summation of k + 1 terms in any order is within gamma_k * sum |x_i| of the
// exact sum (gamma_k = k u / (1 - k u), u the unit roundoff; Higham, Accuracy and Stability of
// Numerical Algorithms, 2nd ed., eq. 4.4), so two orders differ by at most twice that. float16
// and bfloat16 are reduced in float32 and rounded to 16 bits after each step, so their u is the
// 16-bit one plus float32's. A scaling applied to both afterwards (Average's 1/size, a
// postscale) adds one rounding of each result: 2 u |result|. A product of k + 1 factors in any
// order is within gamma_k of the exact one relatively: pass the product of the magnitudes as
// `sum_abs`. docs/hierarchical.md states the
// same bound; test/python and test/cluster use it too (hierarchical_job.py).
//
// Thread-safety: stateless. Header-only (the unit and MPI tiers include it).
#ifndef CHORUS_TEST_SUPPORT_SUMMATION_BOUND_H_
#define CHORUS_TEST_SUPPORT_SUMMATION_BOUND_H_

#include <cmath>

#include "chorus/types.h"

namespace chorus::testing {

// Unit roundoff of a floating-point dtype as chorus reduces it (0 for integers: exact).
inline double UnitRoundoff(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return std::ldexp(1.0, -11) + std::ldexp(1.0, -24);
    case DataType::kBfloat16:
      return std::ldexp(1.0, -8) + std::ldexp(1.0, -24);
    case DataType::kFloat32:
      return std::ldexp(1.0, -24);
    case DataType::kFloat64:
      return std::ldexp(1.0, -53);
    default:
      return 0.0;
  }
}

// The largest difference between two summation orders of `ranks` terms whose magnitudes add up
// to `sum_abs`, whose results are about `result_abs` and then scaled (`scaled`).
inline double SummationOrderBound(DataType dtype, int ranks, double sum_abs, double result_abs,
                                  bool scaled = false) {
  const double u = UnitRoundoff(dtype);
  const double k = ranks > 1 ? ranks - 1 : 0;
  const double gamma = k * u / (1.0 - k * u);
  return 2.0 * gamma * sum_abs + (scaled ? 2.0 * u * result_abs : 0.0);
}

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_SUMMATION_BOUND_H_
