// File: ops/cpu/reduce_kernels.h
//
// CPU element-wise kernels for every DataType: reduction of one buffer into another, scaling,
// and float16/bfloat16 conversion. Used by the MPI backend's custom float16/bfloat16 MPI ops,
// the in-process test fabric, the executor (Average, prescale/postscale) and later by the UCX
// collectives.
//
// float16 and bfloat16 are computed in float32 and rounded to nearest-even once per element
// and per step. Integer scaling multiplies in double and truncates toward zero (as Horovod).
//
// Thread-safety: stateless, thread-safe.
#ifndef CHORUS_OPS_CPU_REDUCE_KERNELS_H_
#define CHORUS_OPS_CPU_REDUCE_KERNELS_H_

#include <cstdint>

#include "absl/status/status.h"

#include "chorus/types.h"

namespace chorus::ops {

// dst[i] = op(dst[i], src[i]) for i < count. op: kSum, kMin, kMax, kProduct.
// InvalidArgument for bool, Average/Adasum or an unknown dtype.
absl::Status ReduceInto(void* dst, const void* src, int64_t count, DataType dtype, ReduceOp op);

// buf[i] *= factor. No-op when factor == 1. REQUIRES: IsReducible(dtype).
void ScaleInPlace(void* buf, int64_t count, DataType dtype, double factor);

// dst[i] = src[i] * factor (a plain copy when factor == 1). dst and src may be equal but must
// not otherwise overlap. REQUIRES: IsReducible(dtype) unless factor == 1.
void ScaleCopy(void* dst, const void* src, int64_t count, DataType dtype, double factor);

// buf[i] = the identity of `op`: 0 for Sum, the largest value (+inf for floating point) for
// Min, the lowest (-inf) for Max, 1 for Product. What a rank without data (a joined rank)
// contributes. REQUIRES: IsReducible(dtype); op is kSum, kMin, kMax or kProduct.
void FillIdentity(void* buf, int64_t count, DataType dtype, ReduceOp op);

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);  // round to nearest even; overflow to inf; NaN stays NaN
float Bfloat16ToFloat(uint16_t b);
uint16_t FloatToBfloat16(float f);  // round to nearest even; NaN stays NaN

}  // namespace chorus::ops

#endif  // CHORUS_OPS_CPU_REDUCE_KERNELS_H_
