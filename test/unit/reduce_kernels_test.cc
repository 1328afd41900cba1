// Tests of ops/cpu/reduce_kernels: every dtype x op against an independent float64/int128
// reference, scaling, and the float16/bfloat16 conversions (exhaustively where feasible).
//
// The 16-bit float reference rounds by searching a table of every finite value of the format, so
// it shares no code with the bit-twiddling conversions under test.
#include "ops/cpu/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::ops {
namespace {

// ---------------------------------------------------------------------------------------------
// Independent reference for the 16-bit formats.

struct Format16 {
  int mant_bits;  // 10 for float16, 7 for bfloat16
  int exp_bias;   // 15 / 127
  int exp_max;    // all-ones exponent field: 31 / 255
  uint16_t inf;   // 0x7c00 / 0x7f80
};
constexpr Format16 kHalf{10, 15, 31, 0x7c00};
constexpr Format16 kBf16{7, 127, 255, 0x7f80};

// Value of a non-NaN 16-bit pattern, by the textbook formula.
double RefDecode(const Format16& fmt, uint16_t bits) {
  const bool neg = (bits & 0x8000) != 0;
  const int exp = (bits & 0x7fff) >> fmt.mant_bits;
  const int mant = bits & ((1 << fmt.mant_bits) - 1);
  double v;
  if (exp == fmt.exp_max) {
    v = std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - fmt.exp_bias - fmt.mant_bits);
  } else {
    v = std::ldexp(static_cast<double>(mant + (1 << fmt.mant_bits)),
                   exp - fmt.exp_bias - fmt.mant_bits);
  }
  return neg ? -v : v;
}

bool RefIsNan(const Format16& fmt, uint16_t bits) {
  return (bits & fmt.inf) == fmt.inf && (bits & ((1 << fmt.mant_bits) - 1)) != 0;
}

// Every finite non-negative value of the format, in bit order (= value order).
std::vector<double> BuildFiniteTable(const Format16& fmt) {
  std::vector<double> t;
  for (uint32_t b = 0; b < fmt.inf; ++b) t.push_back(RefDecode(fmt, static_cast<uint16_t>(b)));
  return t;
}

const std::vector<double>& FiniteTable(const Format16& fmt) {
  static const std::vector<double> half = BuildFiniteTable(kHalf);
  static const std::vector<double> bf16 = BuildFiniteTable(kBf16);
  return fmt.mant_bits == kHalf.mant_bits ? half : bf16;
}

// Round-to-nearest-even of a finite or infinite double into the format (not NaN).
uint16_t RefRound(const Format16& fmt, double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  const std::vector<double>& t = FiniteTable(fmt);
  const double max = t.back();
  const double overflow = max + (max - t[t.size() - 2]) / 2;  // tie goes to inf (max is odd)
  if (a >= overflow) return sign | fmt.inf;
  auto it = std::lower_bound(t.begin(), t.end(), a);  // first >= a
  if (it == t.end()) return static_cast<uint16_t>(sign | (t.size() - 1));
  size_t hi = static_cast<size_t>(it - t.begin());
  if (t[hi] == a || hi == 0) return static_cast<uint16_t>(sign | hi);
  const size_t lo = hi - 1;
  const double dlo = a - t[lo], dhi = t[hi] - a;
  size_t pick = dlo < dhi ? lo : (dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi));
  return static_cast<uint16_t>(sign | pick);
}

// ---------------------------------------------------------------------------------------------
// Conversions.

TEST_CASE("HalfToFloat decodes every float16 pattern", "[reduce_kernels]") {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = HalfToFloat(h);
    if (RefIsNan(kHalf, h)) {
      if (!std::isnan(f)) FAIL("pattern " << b << " should decode to NaN");
      continue;
    }
    if (static_cast<double>(f) != RefDecode(kHalf, h) || std::signbit(f) != ((h & 0x8000) != 0)) {
      FAIL("pattern " << b << " decoded to " << f << ", want " << RefDecode(kHalf, h));
    }
    // Round trip: every float16 is exactly representable as float.
    if (FloatToHalf(f) != h) FAIL("round trip of " << b << " gave " << FloatToHalf(f));
  }
  SUCCEED();
}

TEST_CASE("Bfloat16ToFloat decodes every bfloat16 pattern", "[reduce_kernels]") {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = Bfloat16ToFloat(h);
    if (RefIsNan(kBf16, h)) {
      if (!std::isnan(f)) FAIL("pattern " << b << " should decode to NaN");
      continue;
    }
    if (static_cast<double>(f) != RefDecode(kBf16, h) || std::signbit(f) != ((h & 0x8000) != 0)) {
      FAIL("pattern " << b << " decoded to " << f << ", want " << RefDecode(kBf16, h));
    }
    if (FloatToBfloat16(f) != h) FAIL("round trip of " << b << " gave " << FloatToBfloat16(f));
  }
  SUCCEED();
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

TEST_CASE("FloatToHalf and FloatToBfloat16 round like the reference over many floats",
          "[reduce_kernels]") {
  // A deterministic walk over float bit patterns: every exponent, pseudo-random mantissas, plus
  // the exact midpoints between neighbouring 16-bit values (where ties-to-even matters).
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 32);
  };
  int checked = 0;
  for (uint32_t exp = 0; exp < 255; ++exp) {
    for (int k = 0; k < 200; ++k) {
      uint32_t mant = next() & 0x7fffff;
      if (k % 4 == 1) mant = (mant & ~0x1fffu) | 0x1000u;  // float16 normal-range midpoint
      if (k % 4 == 2) mant = (mant & ~0xffffu) | 0x8000u;  // bfloat16 midpoint
      for (uint32_t sign : {0u, 0x80000000u}) {
        const float f = FromBits(sign | (exp << 23) | mant);
        const uint16_t h = FloatToHalf(f), want_h = RefRound(kHalf, f);
        const uint16_t b = FloatToBfloat16(f), want_b = RefRound(kBf16, f);
        if (h != want_h) FAIL("FloatToHalf(" << f << ") = " << h << ", want " << want_h);
        if (b != want_b) FAIL("FloatToBfloat16(" << f << ") = " << b << ", want " << want_b);
        ++checked;
      }
    }
  }
  // Every float16 subnormal midpoint and its neighbours.
  for (uint32_t m = 0; m < 0x400; ++m) {
    for (double off : {-0.25, 0.0, 0.5, 0.75}) {
      const float f = static_cast<float>(std::ldexp(m + 0.5 + off, -24));
      const uint16_t want = RefRound(kHalf, f);
      if (FloatToHalf(f) != want) FAIL("FloatToHalf(" << f << ") = " << FloatToHalf(f));
      ++checked;
    }
  }
  CHECK(checked > 100000);
}

TEST_CASE("float16 ties, subnormals, overflow and specials", "[reduce_kernels]") {
  CHECK(FloatToHalf(1.0f) == 0x3c00);
  CHECK(FloatToHalf(-2.0f) == 0xc000);
  CHECK(FloatToHalf(1.0f + 0x1p-11f) == 0x3c00);             // tie -> even (down)
  CHECK(FloatToHalf(1.0f + 3 * 0x1p-11f) == 0x3c02);         // tie -> even (up)
  CHECK(FloatToHalf(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);  // above the tie
  CHECK(FloatToHalf(65504.0f) == 0x7bff);
  CHECK(FloatToHalf(65519.0f) == 0x7bff);
  CHECK(FloatToHalf(65520.0f) == 0x7c00);  // tie with odd max -> inf
  CHECK(FloatToHalf(1e10f) == 0x7c00);
  CHECK(FloatToHalf(-1e10f) == 0xfc00);
  CHECK(FloatToHalf(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(FloatToHalf(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(FloatToHalf(0.0f) == 0x0000);
  CHECK(FloatToHalf(-0.0f) == 0x8000);
  CHECK(FloatToHalf(0x1p-14f) == 0x0400);  // smallest normal
  CHECK(FloatToHalf(0x1p-24f) == 0x0001);  // smallest subnormal
  CHECK(FloatToHalf(0x1p-25f) == 0x0000);  // tie -> even (zero)
  CHECK(FloatToHalf(0x1.8p-25f) == 0x0001);
  CHECK(FloatToHalf(3 * 0x1p-25f) == 0x0002);        // tie -> even (up)
  CHECK(FloatToHalf(1023.5f * 0x1p-24f) == 0x0400);  // largest subnormal rounds up to normal
  CHECK(FloatToHalf(-0x1p-30f) == 0x8000);           // underflow keeps the sign
  CHECK(FloatToHalf(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(HalfToFloat(0x0001) == 0x1p-24f);
  CHECK(HalfToFloat(0x03ff) == 1023 * 0x1p-24f);
  CHECK(HalfToFloat(0x7bff) == 65504.0f);
  CHECK(std::isinf(HalfToFloat(0xfc00)));
  CHECK(HalfToFloat(0xfc00) < 0);
  for (uint32_t nan_bits : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7f802000u}) {
    const uint16_t h = FloatToHalf(FromBits(nan_bits));
    CHECK((h & 0x7c00) == 0x7c00);
    CHECK((h & 0x03ff) != 0);
    CHECK(std::isnan(HalfToFloat(h)));
  }
}

TEST_CASE("bfloat16 ties, overflow and specials", "[reduce_kernels]") {
  CHECK(FloatToBfloat16(1.0f) == 0x3f80);
  CHECK(FloatToBfloat16(1.0f + 0x1p-8f) == 0x3f80);                     // tie -> even (down)
  CHECK(FloatToBfloat16(1.0f + 3 * 0x1p-8f) == 0x3f82);                 // tie -> even (up)
  CHECK(FloatToBfloat16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds to inf
  CHECK(FloatToBfloat16(FromBits(0x7f7f7fffu)) == 0x7f7f);
  CHECK(FloatToBfloat16(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(FloatToBfloat16(-0.0f) == 0x8000);
  CHECK(FloatToBfloat16(std::numeric_limits<float>::denorm_min()) == 0x0000);  // tie -> zero
  CHECK(FloatToBfloat16(FromBits(0x00018000u)) == 0x0002);  // subnormal tie -> even (up)
  for (uint32_t nan_bits : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    const uint16_t b = FloatToBfloat16(FromBits(nan_bits));
    CHECK(std::isnan(Bfloat16ToFloat(b)));
    CHECK((b & 0x8000) == ((nan_bits >> 16) & 0x8000));
  }
}

// ---------------------------------------------------------------------------------------------
// Reductions.

size_t SizeOf(DataType dtype) {
  switch (dtype) {
    case DataType::kUint8:
    case DataType::kInt8:
    case DataType::kBool:
      return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

bool IsInt(DataType d) {
  return d == DataType::kUint8 || d == DataType::kInt8 || d == DataType::kInt16 ||
         d == DataType::kInt32 || d == DataType::kInt64;
}

// A buffer of `count` elements of `dtype`, read and written through doubles / int64s.
class Buffer {
 public:
  Buffer(DataType dtype, int64_t count)
      : dtype_(dtype), bytes_(static_cast<size_t>(count) * SizeOf(dtype) + 1) {}
  void* data() { return bytes_.data(); }

  void SetInt(int64_t i, int64_t v) {  // modular for narrow types (C++20)
    switch (dtype_) {
      case DataType::kUint8:
        return Put(i, static_cast<uint8_t>(v));
      case DataType::kInt8:
        return Put(i, static_cast<int8_t>(v));
      case DataType::kInt16:
        return Put(i, static_cast<int16_t>(v));
      case DataType::kInt32:
        return Put(i, static_cast<int32_t>(v));
      default:
        return Put(i, v);
    }
  }
  int64_t GetInt(int64_t i) const {
    switch (dtype_) {
      case DataType::kUint8:
        return Get<uint8_t>(i);
      case DataType::kInt8:
        return Get<int8_t>(i);
      case DataType::kInt16:
        return Get<int16_t>(i);
      case DataType::kInt32:
        return Get<int32_t>(i);
      default:
        return Get<int64_t>(i);
    }
  }
  // Stores the nearest value of the dtype (reference rounding for the 16-bit floats).
  void SetFloat(int64_t i, double v) {
    switch (dtype_) {
      case DataType::kFloat16:
        return Put(i, RefRound(kHalf, v));
      case DataType::kBfloat16:
        return Put(i, RefRound(kBf16, v));
      case DataType::kFloat32:
        return Put(i, static_cast<float>(v));
      default:
        return Put(i, v);
    }
  }
  double GetFloat(int64_t i) const {
    switch (dtype_) {
      case DataType::kFloat16:
        return RefDecode(kHalf, Get<uint16_t>(i));
      case DataType::kBfloat16:
        return RefDecode(kBf16, Get<uint16_t>(i));
      case DataType::kFloat32:
        return Get<float>(i);
      default:
        return Get<double>(i);
    }
  }
  uint16_t Raw16(int64_t i) const { return Get<uint16_t>(i); }

 private:
  template <typename T>
  void Put(int64_t i, T v) {
    std::memcpy(bytes_.data() + i * sizeof(T), &v, sizeof(T));
  }
  template <typename T>
  T Get(int64_t i) const {
    T v;
    std::memcpy(&v, bytes_.data() + i * sizeof(T), sizeof(T));
    return v;
  }
  DataType dtype_;
  std::vector<unsigned char> bytes_;
};

int64_t IntValue(DataType dtype, int64_t i, int which) {
  // Signed types get negatives; int64 gets magnitudes whose products overflow.
  const int64_t k = (i * 37 + which * 101 + 13) % 251;
  switch (dtype) {
    case DataType::kUint8:
      return k;
    case DataType::kInt8:
      return k - 125;
    case DataType::kInt16:
      return (k - 125) * 250;
    case DataType::kInt32:
      return (k - 125) * 17000000;
    default:
      return (k - 125) * (int64_t{1} << 56) / 3 + k;
  }
}

double FloatValue(int64_t i, int which) {
  // |v| in [1/64, 64] or 0: sums and products of such 16-bit values are exact in float, so
  // rounding once from float equals rounding the exact result.
  const int64_t k = (i * 29 + which * 53 + 7) % 97;
  if (k == 0) return 0.0;
  const double mant = 1.0 + static_cast<double>((k * 7919) % 1000) / 1000.0;
  return (k % 2 == 0 ? -1.0 : 1.0) * std::ldexp(mant, static_cast<int>(k % 13) - 6);
}

int64_t RefIntOp(DataType dtype, ReduceOp op, int64_t a, int64_t b) {
  __int128 r;
  switch (op) {
    case ReduceOp::kSum:
      r = static_cast<__int128>(a) + b;
      break;
    case ReduceOp::kProduct:
      r = static_cast<__int128>(a) * b;
      break;
    case ReduceOp::kMin:
      r = std::min(a, b);
      break;
    default:
      r = std::max(a, b);
      break;
  }
  // Wrap into the dtype's width (two's complement, as MPI's integer ops).
  const int bits = static_cast<int>(SizeOf(dtype)) * 8;
  unsigned __int128 u = static_cast<unsigned __int128>(r);
  if (bits < 128) u &= (static_cast<unsigned __int128>(1) << bits) - 1;
  if (dtype == DataType::kUint8) return static_cast<int64_t>(u);
  if (bits < 64 && (u >> (bits - 1)) != 0) return static_cast<int64_t>(u) - (int64_t{1} << bits);
  return static_cast<int64_t>(static_cast<uint64_t>(u));
}

double RefFloatOp(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kProduct:
      return a * b;
    case ReduceOp::kMin:
      return std::min(a, b);
    default:
      return std::max(a, b);
  }
}

TEST_CASE("ReduceInto matches the reference for every dtype, op and count", "[reduce_kernels]") {
  const DataType dtype = GENERATE(DataType::kUint8, DataType::kInt8, DataType::kInt16,
                                  DataType::kInt32, DataType::kInt64, DataType::kFloat16,
                                  DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64);
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct);
  const int64_t count = GENERATE(0, 1, 7, 1000);
  const bool in_place = GENERATE(false, true);  // dst == src takes a separate loop
  CAPTURE(static_cast<int>(dtype), static_cast<int>(op), count, in_place);

  Buffer dst(dtype, count), src(dtype, count);
  for (int64_t i = 0; i < count; ++i) {
    if (IsInt(dtype)) {
      dst.SetInt(i, IntValue(dtype, i, 0));
      src.SetInt(i, in_place ? IntValue(dtype, i, 0) : IntValue(dtype, i, 1));
    } else {
      dst.SetFloat(i, FloatValue(i, 0));
      src.SetFloat(i, in_place ? FloatValue(i, 0) : FloatValue(i, 1));
    }
  }
  Buffer before = dst;
  REQUIRE(ReduceInto(dst.data(), in_place ? dst.data() : src.data(), count, dtype, op).ok());

  int mismatches = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (IsInt(dtype)) {
      const int64_t want = RefIntOp(dtype, op, before.GetInt(i), src.GetInt(i));
      if (dst.GetInt(i) != want && mismatches++ < 5) {
        FAIL_CHECK("element " << i << ": got " << dst.GetInt(i) << ", want " << want);
      }
    } else {
      Buffer want(dtype, 1);
      want.SetFloat(0, RefFloatOp(op, before.GetFloat(i), src.GetFloat(i)));
      if (dst.GetFloat(i) != want.GetFloat(0) && mismatches++ < 5) {
        FAIL_CHECK("element " << i << ": got " << dst.GetFloat(i) << ", want " << want.GetFloat(0));
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("ReduceInto leaves elements past count alone", "[reduce_kernels]") {
  std::vector<float> dst(40, 1.0f), src(40, 2.0f);
  REQUIRE(ReduceInto(dst.data(), src.data(), 33, DataType::kFloat32, ReduceOp::kSum).ok());
  for (int i = 0; i < 40; ++i) CHECK(dst[i] == (i < 33 ? 3.0f : 1.0f));
}

TEST_CASE("ReduceInto wraps integer overflow", "[reduce_kernels]") {
  int32_t d[2] = {std::numeric_limits<int32_t>::max(), 1 << 20};
  const int32_t s[2] = {1, 1 << 12};
  REQUIRE(ReduceInto(d, s, 1, DataType::kInt32, ReduceOp::kSum).ok());
  CHECK(d[0] == std::numeric_limits<int32_t>::min());
  REQUIRE(ReduceInto(d + 1, s + 1, 1, DataType::kInt32, ReduceOp::kProduct).ok());
  CHECK(d[1] == 0);  // 2^32 wraps to 0
}

TEST_CASE("16-bit float sums round once per step", "[reduce_kernels]") {
  // 2048 + 1 is a tie in float16 (spacing 2 above 2048): rounds to even, i.e. stays 2048.
  uint16_t d = FloatToHalf(2048.0f);
  const uint16_t one = FloatToHalf(1.0f);
  REQUIRE(ReduceInto(&d, &one, 1, DataType::kFloat16, ReduceOp::kSum).ok());
  CHECK(HalfToFloat(d) == 2048.0f);
  // Overflow becomes inf.
  d = FloatToHalf(60000.0f);
  const uint16_t big = FloatToHalf(10000.0f);
  REQUIRE(ReduceInto(&d, &big, 1, DataType::kFloat16, ReduceOp::kSum).ok());
  CHECK(d == 0x7c00);
  uint16_t b = FloatToBfloat16(256.0f);
  const uint16_t b1 = FloatToBfloat16(1.0f);
  REQUIRE(ReduceInto(&b, &b1, 1, DataType::kBfloat16, ReduceOp::kSum).ok());
  CHECK(Bfloat16ToFloat(b) == 256.0f);  // 257 ties to even
}

TEST_CASE("ReduceInto rejects bool, average, adasum and bad dtypes", "[reduce_kernels]") {
  unsigned char d[4] = {0, 1, 0, 1}, s[4] = {1, 1, 0, 0};
  absl::Status st = ReduceInto(d, s, 4, DataType::kBool, ReduceOp::kSum);
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(d[0] == 0);
  CHECK(ReduceInto(d, s, 1, DataType::kFloat32, ReduceOp::kAverage).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(ReduceInto(d, s, 1, DataType::kFloat32, ReduceOp::kAdasum).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(ReduceInto(d, s, 1, static_cast<DataType>(42), ReduceOp::kSum).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(ReduceInto(d, s, -1, DataType::kUint8, ReduceOp::kSum).code() ==
        absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Scaling.

TEST_CASE("ScaleInPlace and ScaleCopy scale every dtype", "[reduce_kernels]") {
  const DataType dtype = GENERATE(DataType::kUint8, DataType::kInt8, DataType::kInt16,
                                  DataType::kInt32, DataType::kInt64, DataType::kFloat16,
                                  DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64);
  const double factor = GENERATE(0.5, 0.125, 3.0, -1.25, 1.0);
  const int64_t count = GENERATE(0, 1, 7, 1000);
  const bool copy = GENERATE(false, true);
  CAPTURE(static_cast<int>(dtype), factor, count, copy);

  const bool is_unsigned = dtype == DataType::kUint8;
  if (is_unsigned && factor < 0) return;
  Buffer src(dtype, count), dst(dtype, count);
  for (int64_t i = 0; i < count; ++i) {
    if (IsInt(dtype)) {
      // Small enough that factor 3 does not overflow, odd values so halving truncates.
      const int64_t v = IntValue(dtype, i, 0) / 4;
      src.SetInt(i, v);
      dst.SetInt(i, v);
    } else {
      src.SetFloat(i, FloatValue(i, 0));
      dst.SetFloat(i, FloatValue(i, 0));
    }
  }
  if (copy) {
    Buffer out(dtype, count);
    ScaleCopy(out.data(), src.data(), count, dtype, factor);
    dst = out;
  } else {
    ScaleInPlace(dst.data(), count, dtype, factor);
  }
  int mismatches = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (IsInt(dtype)) {
      // factor 1 is an exact no-op; otherwise the product is taken in double (int64 values
      // above 2^53 lose low bits, as documented).
      const int64_t want =
          factor == 1.0 ? src.GetInt(i) : static_cast<int64_t>(std::trunc(src.GetInt(i) * factor));
      if (dst.GetInt(i) != want && mismatches++ < 5) {
        FAIL_CHECK("element " << i << ": got " << dst.GetInt(i) << ", want " << want);
      }
    } else {
      Buffer want(dtype, 1);
      const double f = dtype == DataType::kFloat64 ? factor : static_cast<float>(factor);
      want.SetFloat(0, src.GetFloat(i) * f);
      if (dst.GetFloat(i) != want.GetFloat(0) && mismatches++ < 5) {
        FAIL_CHECK("element " << i << ": got " << dst.GetFloat(i) << ", want " << want.GetFloat(0));
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("Integer scaling truncates toward zero and saturates", "[reduce_kernels]") {
  int32_t v[6] = {-7, 7, -1, 5, std::numeric_limits<int32_t>::max(), -3};
  ScaleInPlace(v, 6, DataType::kInt32, 0.5);
  CHECK(v[0] == -3);
  CHECK(v[1] == 3);
  CHECK(v[2] == 0);
  CHECK(v[3] == 2);
  CHECK(v[4] == std::numeric_limits<int32_t>::max() / 2);
  CHECK(v[5] == -1);
  int8_t s[3] = {100, -100, 3};
  ScaleInPlace(s, 3, DataType::kInt8, 2.0);
  CHECK(s[0] == 127);
  CHECK(s[1] == -128);
  CHECK(s[2] == 6);
  uint8_t u[2] = {10, 200};
  ScaleInPlace(u, 2, DataType::kUint8, -1.0);
  CHECK(u[0] == 0);
  CHECK(u[1] == 0);
  int64_t w[2] = {1, -1};
  ScaleInPlace(w, 2, DataType::kInt64, 1e30);
  CHECK(w[0] == std::numeric_limits<int64_t>::max());
  CHECK(w[1] == std::numeric_limits<int64_t>::min());
  int16_t n[1] = {5};
  ScaleInPlace(n, 1, DataType::kInt16, std::nan(""));
  CHECK(n[0] == 0);
}

TEST_CASE("float32 scaling multiplies by the factor rounded to float", "[reduce_kernels]") {
  float v[3] = {1.0f, 3.0f, -10.0f};
  ScaleInPlace(v, 3, DataType::kFloat32, 0.1);
  CHECK(v[0] == 0.1f);
  CHECK(v[1] == 3.0f * 0.1f);
  CHECK(v[2] == -10.0f * 0.1f);
}

TEST_CASE("ScaleCopy with factor 1 copies, including bool; in place is allowed",
          "[reduce_kernels]") {
  const unsigned char src[5] = {1, 0, 1, 1, 0};
  unsigned char dst[6] = {9, 9, 9, 9, 9, 9};
  ScaleCopy(dst, src, 5, DataType::kBool, 1.0);
  for (int i = 0; i < 5; ++i) CHECK(dst[i] == src[i]);
  CHECK(dst[5] == 9);
  double d[3] = {1.5, -2.0, 4.0};
  ScaleCopy(d, d, 3, DataType::kFloat64, 2.0);
  CHECK(d[0] == 3.0);
  CHECK(d[1] == -4.0);
  CHECK(d[2] == 8.0);
  ScaleInPlace(d, 3, DataType::kFloat64, 1.0);
  CHECK(d[0] == 3.0);
  uint16_t h[2] = {FloatToHalf(1.5f), FloatToHalf(-3.0f)};
  uint16_t out[2] = {0, 0};
  ScaleCopy(out, h, 2, DataType::kFloat16, 1.0);
  CHECK(out[0] == h[0]);
  CHECK(out[1] == h[1]);
  ScaleCopy(out, h, 2, DataType::kFloat16, 0.5);
  CHECK(HalfToFloat(out[0]) == 0.75f);
  CHECK(HalfToFloat(out[1]) == -1.5f);
}

}  // namespace
}  // namespace chorus::ops
