// File: test/support/typed_values.h
//
// Reading and writing element i of a host buffer of any chorus dtype as a double (float16 and
// bfloat16 through the runtime's round-to-nearest-even conversions), for tests that sweep
// dtypes. Header-only: the MPI tier and the unit tier both include it.
#ifndef CHORUS_TEST_SUPPORT_TYPED_VALUES_H_
#define CHORUS_TEST_SUPPORT_TYPED_VALUES_H_

#include <cstdint>
#include <cstring>

#include "chorus/types.h"
#include "ops/cpu/reduce_kernels.h"

namespace chorus::testing {

template <typename T>
void Put(void* buf, int64_t i, T v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

template <typename T>
T Take(const void* buf, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

// Writes `v` (converted to dtype `d`) as element i of `buf`.
inline void Store(DataType d, void* buf, int64_t i, double v) {
  switch (d) {
    case DataType::kUint8:
      return Put(buf, i, static_cast<uint8_t>(v));
    case DataType::kInt8:
      return Put(buf, i, static_cast<int8_t>(v));
    case DataType::kInt16:
      return Put(buf, i, static_cast<int16_t>(v));
    case DataType::kInt32:
      return Put(buf, i, static_cast<int32_t>(v));
    case DataType::kInt64:
      return Put(buf, i, static_cast<int64_t>(v));
    case DataType::kFloat16:
      return Put(buf, i, ops::FloatToHalf(static_cast<float>(v)));
    case DataType::kBfloat16:
      return Put(buf, i, ops::FloatToBfloat16(static_cast<float>(v)));
    case DataType::kFloat32:
      return Put(buf, i, static_cast<float>(v));
    default:
      return Put(buf, i, v);
  }
}

// Element i of `buf` (dtype `d`) as a double.
inline double Load(DataType d, const void* buf, int64_t i) {
  switch (d) {
    case DataType::kUint8:
      return Take<uint8_t>(buf, i);
    case DataType::kInt8:
      return Take<int8_t>(buf, i);
    case DataType::kInt16:
      return Take<int16_t>(buf, i);
    case DataType::kInt32:
      return Take<int32_t>(buf, i);
    case DataType::kInt64:
      return static_cast<double>(Take<int64_t>(buf, i));
    case DataType::kFloat16:
      return ops::HalfToFloat(Take<uint16_t>(buf, i));
    case DataType::kBfloat16:
      return ops::Bfloat16ToFloat(Take<uint16_t>(buf, i));
    case DataType::kFloat32:
      return Take<float>(buf, i);
    default:
      return Take<double>(buf, i);
  }
}

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_TYPED_VALUES_H_
