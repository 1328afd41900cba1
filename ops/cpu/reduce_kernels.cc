// File: ops/cpu/reduce_kernels.cc
//
// Note [Vectorisable loops at -O2]: g++ 12 at -O2 vectorises only with the "very cheap" cost
// model, which refuses loops that need an epilogue or a runtime alias check. So every typed loop
// here is written as fixed-size blocks over __restrict pointers (the block loop vectorises
// completely) plus a scalar tail. Because of __restrict, dst == src is routed to a separate
// plain loop; partially overlapping buffers are not supported.
#include "ops/cpu/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace chorus::ops {
namespace {

// ---------------------------------------------------------------------------------------------
// float16 / bfloat16 conversion.

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Tag types for the two 16-bit float formats.
struct Half {};
struct Bf16 {};

// ---------------------------------------------------------------------------------------------
// Element-wise operations. Integer Sum/Product wrap around (two's complement, like MPI), computed
// in an unsigned type at least as wide as int so that no signed overflow (UB) can happen.

template <typename T>
using WideUnsigned =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
struct SumOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WideUnsigned<T>>(a) + static_cast<WideUnsigned<T>>(b));
    } else {
      return a + b;
    }
  }
};

template <typename T>
struct ProductOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WideUnsigned<T>>(a) * static_cast<WideUnsigned<T>>(b));
    } else {
      return a * b;
    }
  }
};

// Min/Max return `a` (the destination's value) on ties and when a comparison is false, so a NaN
// already in dst stays; a NaN in src is not propagated (as std::min/std::max, and MPI_MIN).
template <typename T>
struct MinOp {
  T operator()(T a, T b) const { return b < a ? b : a; }
};

template <typename T>
struct MaxOp {
  T operator()(T a, T b) const { return a < b ? b : a; }
};

// See Note [Vectorisable loops at -O2].
template <typename T, typename F>
void BinaryLoop(T* __restrict dst, const T* __restrict src, int64_t count, F f) {
  constexpr int64_t kBlock = 64 / sizeof(T);
  int64_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    for (int64_t j = 0; j < kBlock; ++j) dst[i + j] = f(dst[i + j], src[i + j]);
  }
  for (; i < count; ++i) dst[i] = f(dst[i], src[i]);
}

template <typename T, typename F>
void BinaryLoopAliased(T* buf, int64_t count, F f) {
  for (int64_t i = 0; i < count; ++i) buf[i] = f(buf[i], buf[i]);
}

template <typename T, typename F>
void ApplyBinary(void* dst, const void* src, int64_t count, F f) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  if (dst == src) {
    BinaryLoopAliased(d, count, f);
  } else {
    BinaryLoop(d, s, count, f);
  }
}

// 16-bit floats: widen both operands to float, apply, round once.
template <typename Fmt, template <typename> class Op>
struct Widened {
  uint16_t operator()(uint16_t a, uint16_t b) const {
    if constexpr (std::is_same_v<Fmt, Half>) {
      return FloatToHalf(Op<float>()(HalfToFloat(a), HalfToFloat(b)));
    } else {
      return FloatToBfloat16(Op<float>()(Bfloat16ToFloat(a), Bfloat16ToFloat(b)));
    }
  }
};

template <typename T, template <typename> class Op>
void Reduce(void* dst, const void* src, int64_t count) {
  ApplyBinary<T>(dst, src, count, Op<T>());
}

template <typename Fmt, template <typename> class Op>
void ReduceWidened(void* dst, const void* src, int64_t count) {
  ApplyBinary<uint16_t>(dst, src, count, Widened<Fmt, Op>());
}

template <template <typename> class Op>
absl::Status ReduceWithOp(void* dst, const void* src, int64_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kUint8:
      Reduce<uint8_t, Op>(dst, src, count);
      return absl::OkStatus();
    case DataType::kInt8:
      Reduce<int8_t, Op>(dst, src, count);
      return absl::OkStatus();
    case DataType::kInt16:
      Reduce<int16_t, Op>(dst, src, count);
      return absl::OkStatus();
    case DataType::kInt32:
      Reduce<int32_t, Op>(dst, src, count);
      return absl::OkStatus();
    case DataType::kInt64:
      Reduce<int64_t, Op>(dst, src, count);
      return absl::OkStatus();
    case DataType::kFloat16:
      ReduceWidened<Half, Op>(dst, src, count);
      return absl::OkStatus();
    case DataType::kBfloat16:
      ReduceWidened<Bf16, Op>(dst, src, count);
      return absl::OkStatus();
    case DataType::kFloat32:
      Reduce<float, Op>(dst, src, count);
      return absl::OkStatus();
    case DataType::kFloat64:
      Reduce<double, Op>(dst, src, count);
      return absl::OkStatus();
    case DataType::kBool:
      return absl::InvalidArgumentError("ReduceInto: bool tensors cannot be reduced");
  }
  return absl::InvalidArgumentError("ReduceInto: unknown data type " +
                                    std::to_string(static_cast<int32_t>(dtype)));
}

// ---------------------------------------------------------------------------------------------
// Scaling.

// static_cast<T>(v) truncates toward zero; values outside T's range saturate, NaN becomes 0
// (a plain cast would be undefined behaviour there).
template <typename T>
T TruncateToInt(double v) {
  // 2^(digits) is exactly representable and is max() + 1 for every integer type here.
  constexpr double kUpper = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
  constexpr double kLower = static_cast<double>(std::numeric_limits<T>::min());
  if (std::isnan(v)) return T{0};
  if (v >= kUpper) return std::numeric_limits<T>::max();
  if (v <= kLower) return std::numeric_limits<T>::min();
  return static_cast<T>(v);
}

template <typename T, typename F>
void UnaryLoop(T* __restrict dst, const T* __restrict src, int64_t count, F f) {
  constexpr int64_t kBlock = 64 / sizeof(T);
  int64_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    for (int64_t j = 0; j < kBlock; ++j) dst[i + j] = f(src[i + j]);
  }
  for (; i < count; ++i) dst[i] = f(src[i]);
}

template <typename T, typename F>
void UnaryLoopInPlace(T* buf, int64_t count, F f) {
  constexpr int64_t kBlock = 64 / sizeof(T);
  int64_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    for (int64_t j = 0; j < kBlock; ++j) buf[i + j] = f(buf[i + j]);
  }
  for (; i < count; ++i) buf[i] = f(buf[i]);
}

template <typename T, typename F>
void ApplyUnary(void* dst, const void* src, int64_t count, F f) {
  if (dst == src) {
    UnaryLoopInPlace(static_cast<T*>(dst), count, f);
  } else {
    UnaryLoop(static_cast<T*>(dst), static_cast<const T*>(src), count, f);
  }
}

template <typename T>
void ScaleInt(void* dst, const void* src, int64_t count, double factor) {
  ApplyUnary<T>(dst, src, count,
                [factor](T x) { return TruncateToInt<T>(static_cast<double>(x) * factor); });
}

void Scale(void* dst, const void* src, int64_t count, DataType dtype, double factor) {
  switch (dtype) {
    case DataType::kUint8:
      return ScaleInt<uint8_t>(dst, src, count, factor);
    case DataType::kInt8:
      return ScaleInt<int8_t>(dst, src, count, factor);
    case DataType::kInt16:
      return ScaleInt<int16_t>(dst, src, count, factor);
    case DataType::kInt32:
      return ScaleInt<int32_t>(dst, src, count, factor);
    case DataType::kInt64:
      return ScaleInt<int64_t>(dst, src, count, factor);
    case DataType::kFloat16: {
      const float f = static_cast<float>(factor);
      return ApplyUnary<uint16_t>(dst, src, count,
                                  [f](uint16_t x) { return FloatToHalf(HalfToFloat(x) * f); });
    }
    case DataType::kBfloat16: {
      const float f = static_cast<float>(factor);
      return ApplyUnary<uint16_t>(
          dst, src, count, [f](uint16_t x) { return FloatToBfloat16(Bfloat16ToFloat(x) * f); });
    }
    case DataType::kFloat32: {
      const float f = static_cast<float>(factor);
      return ApplyUnary<float>(dst, src, count, [f](float x) { return x * f; });
    }
    case DataType::kFloat64:
      return ApplyUnary<double>(dst, src, count, [factor](double x) { return x * factor; });
    case DataType::kBool:
      return;  // not reducible: REQUIRES-violation, left unscaled
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API.

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {
    // Inf (mant == 0) or NaN: keep the payload, which keeps a NaN a NaN.
    return BitsToFloat(sign | 0x7f800000u | (mant << 13));
  }
  if (exp == 0) {
    if (mant == 0) return BitsToFloat(sign);  // +-0
    // Subnormal: value = mant * 2^-24. Normalise so that the implicit bit (0x400) is set.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    // After e+1 shifts, value = 1.m * 2^(-14 - (e + 1)); float exponent field = 127 - 15 - e.
    const uint32_t fexp = static_cast<uint32_t>(127 - 15 - e);
    return BitsToFloat(sign | (fexp << 23) | ((mant & 0x3ffu) << 13));
  }
  return BitsToFloat(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

uint16_t FloatToHalf(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {
    if (abs == 0x7f800000u) return sign | 0x7c00u;  // inf
    // NaN: keep the top payload bits and force the quiet bit so it cannot become inf.
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  // Unbiased float exponent, re-biased for half.
  const int exp = static_cast<int>(abs >> 23) - 127 + 15;
  if (exp >= 0x1f) return sign | 0x7c00u;  // >= 2^16: overflow to inf
  if (exp <= 0) {
    // Half subnormal (or zero). value = m * 2^(exp - 15 - 23) with m = 24-bit significand;
    // in units of the half subnormal step 2^-24 that is m >> (14 - exp), rounded.
    const int shift = 14 - exp;
    if (shift > 24) return sign;  // < 2^-25 (and 2^-25 itself ties to even, i.e. zero)
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    uint32_t result = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (result & 1u))) ++result;  // may carry to 0x400
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = (static_cast<uint32_t>(exp) << 10) | ((abs >> 13) & 0x3ffu);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (result & 1u))) ++result;  // may carry up to inf
  return static_cast<uint16_t>(sign | result);
}

float Bfloat16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBfloat16(float f) {
  const uint32_t bits = FloatBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN: force the quiet bit
  }
  // Round to nearest even; a carry out of the mantissa bumps the exponent (up to inf).
  const uint32_t bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + bias) >> 16);
}

absl::Status ReduceInto(void* dst, const void* src, int64_t count, DataType dtype, ReduceOp op) {
  if (count < 0) {
    return absl::InvalidArgumentError("ReduceInto: negative count " + std::to_string(count));
  }
  switch (op) {
    case ReduceOp::kSum:
      return ReduceWithOp<SumOp>(dst, src, count, dtype);
    case ReduceOp::kMin:
      return ReduceWithOp<MinOp>(dst, src, count, dtype);
    case ReduceOp::kMax:
      return ReduceWithOp<MaxOp>(dst, src, count, dtype);
    case ReduceOp::kProduct:
      return ReduceWithOp<ProductOp>(dst, src, count, dtype);
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum:
      break;
  }
  return absl::InvalidArgumentError("ReduceInto: unsupported reduce op " +
                                    std::to_string(static_cast<int32_t>(op)) +
                                    " (only sum, min, max, product)");
}

void ScaleInPlace(void* buf, int64_t count, DataType dtype, double factor) {
  if (factor == 1.0 || count <= 0) return;
  Scale(buf, buf, count, dtype, factor);
}

void ScaleCopy(void* dst, const void* src, int64_t count, DataType dtype, double factor) {
  if (count <= 0) return;
  if (factor == 1.0) {
    if (dst != src) std::memcpy(dst, src, static_cast<size_t>(count) * DataTypeSize(dtype));
    return;
  }
  Scale(dst, src, count, dtype, factor);
}

namespace {

template <typename T>
void FillTyped(void* buf, int64_t count, ReduceOp op) {
  T value{};
  if (op == ReduceOp::kProduct) {
    value = T(1);
  } else if (op == ReduceOp::kMin) {
    value = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                 : std::numeric_limits<T>::max();
  } else if (op == ReduceOp::kMax) {
    value = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                 : std::numeric_limits<T>::lowest();
  }
  T* p = static_cast<T*>(buf);
  std::fill(p, p + count, value);
}

// float16/bfloat16 bit patterns of 0, 1, +inf and -inf.
void FillHalfBits(void* buf, int64_t count, ReduceOp op, uint16_t one, uint16_t inf,
                  uint16_t minus_inf) {
  uint16_t value = 0;
  if (op == ReduceOp::kProduct) value = one;
  if (op == ReduceOp::kMin) value = inf;
  if (op == ReduceOp::kMax) value = minus_inf;
  uint16_t* p = static_cast<uint16_t*>(buf);
  std::fill(p, p + count, value);
}

}  // namespace

void FillIdentity(void* buf, int64_t count, DataType dtype, ReduceOp op) {
  if (op == ReduceOp::kSum || op == ReduceOp::kAverage) {
    std::memset(buf, 0, static_cast<size_t>(count) * DataTypeSize(dtype));
    return;
  }
  switch (dtype) {
    case DataType::kUint8:
      return FillTyped<uint8_t>(buf, count, op);
    case DataType::kInt8:
      return FillTyped<int8_t>(buf, count, op);
    case DataType::kInt16:
      return FillTyped<int16_t>(buf, count, op);
    case DataType::kInt32:
      return FillTyped<int32_t>(buf, count, op);
    case DataType::kInt64:
      return FillTyped<int64_t>(buf, count, op);
    case DataType::kFloat32:
      return FillTyped<float>(buf, count, op);
    case DataType::kFloat64:
      return FillTyped<double>(buf, count, op);
    case DataType::kFloat16:
      return FillHalfBits(buf, count, op, 0x3C00, 0x7C00, 0xFC00);
    case DataType::kBfloat16:
      return FillHalfBits(buf, count, op, 0x3F80, 0x7F80, 0xFF80);
    case DataType::kBool:
      return;
  }
}

}  // namespace chorus::ops
