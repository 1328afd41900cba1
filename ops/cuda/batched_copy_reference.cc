#include "ops/cuda/batched_copy_reference.h"

#include <cstdint>
#include <cstring>

#include "ops/cpu/reduce_kernels.h"

namespace chorus::ops::gpu {
namespace {

template <typename S, typename D, typename F>
void Convert(const CopyChunk& c, F f) {
  const auto* src = static_cast<const S*>(c.src);
  auto* dst = static_cast<D*>(c.dst);
  for (uint32_t i = 0; i < c.count; ++i) dst[i] = f(src[i]);
}

void RunChunk(const CopyChunk& c, double scale) {
  const float f = static_cast<float>(scale);
  switch (c.kind) {
    case CopyKind::kBytes:
      if (c.dst != c.src) std::memcpy(c.dst, c.src, c.count);
      return;
    case CopyKind::kScaleUint8:
      return ScaleCopy(c.dst, c.src, c.count, DataType::kUint8, scale);
    case CopyKind::kScaleInt8:
      return ScaleCopy(c.dst, c.src, c.count, DataType::kInt8, scale);
    case CopyKind::kScaleInt16:
      return ScaleCopy(c.dst, c.src, c.count, DataType::kInt16, scale);
    case CopyKind::kScaleInt32:
      return ScaleCopy(c.dst, c.src, c.count, DataType::kInt32, scale);
    case CopyKind::kScaleInt64:
      return ScaleCopy(c.dst, c.src, c.count, DataType::kInt64, scale);
    case CopyKind::kScaleFloat16:
      return ScaleCopy(c.dst, c.src, c.count, DataType::kFloat16, scale);
    case CopyKind::kScaleBfloat16:
      return ScaleCopy(c.dst, c.src, c.count, DataType::kBfloat16, scale);
    case CopyKind::kScaleFloat32:
      return ScaleCopy(c.dst, c.src, c.count, DataType::kFloat32, scale);
    case CopyKind::kScaleFloat64:
      return ScaleCopy(c.dst, c.src, c.count, DataType::kFloat64, scale);
    case CopyKind::kFloat32ToFloat16:
      return Convert<float, uint16_t>(c, [f](float x) { return FloatToHalf(x * f); });
    case CopyKind::kFloat16ToFloat32:
      return Convert<uint16_t, float>(c, [f](uint16_t x) { return HalfToFloat(x) * f; });
    case CopyKind::kFloat32ToBfloat16:
      return Convert<float, uint16_t>(c, [f](float x) { return FloatToBfloat16(x * f); });
    case CopyKind::kBfloat16ToFloat32:
      return Convert<uint16_t, float>(c, [f](uint16_t x) { return Bfloat16ToFloat(x) * f; });
  }
}

}  // namespace

void RunBatchedCopyOnHost(const BatchedCopyPlan& plan) {
  for (const CopyChunk& c : plan.chunks) RunChunk(c, plan.scale);
}

}  // namespace chorus::ops::gpu
