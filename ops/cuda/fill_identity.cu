// The identity fill (ops/cuda/fill_identity.h): a grid-stride kernel writing one machine word
// per element, with the word computed on the host exactly as ops::FillIdentity computes it.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include <cuda_runtime.h>

#include "ops/cuda/fill_identity.h"

namespace chorus::ops::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond 4096 * 256 elements

template <typename T>
uint64_t Bits(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

// ops::FillIdentity's FillTyped: 1, max (+inf), lowest (-inf).
template <typename T>
uint64_t TypedBits(ReduceOp op) {
  using L = std::numeric_limits<T>;
  switch (op) {
    case ReduceOp::kProduct:
      return Bits(T(1));
    case ReduceOp::kMin:
      return Bits(L::has_infinity ? L::infinity() : L::max());
    case ReduceOp::kMax:
      return Bits(L::has_infinity ? T(-L::infinity()) : L::lowest());
    default:
      return 0;
  }
}

// ops::FillIdentity's FillHalfBits.
uint64_t HalfBits(ReduceOp op, uint16_t one, uint16_t inf, uint16_t minus_inf) {
  switch (op) {
    case ReduceOp::kProduct:
      return one;
    case ReduceOp::kMin:
      return inf;
    case ReduceOp::kMax:
      return minus_inf;
    default:
      return 0;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) FillKernel(T* __restrict__ p, int64_t n, T value) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    p[i] = value;
  }
}

template <typename T>
void LaunchFill(void* ptr, int64_t count, uint64_t bits, cudaStream_t stream) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  FillKernel<T>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<T*>(ptr), count, value);
}

absl::Status CudaError(cudaError_t err, const char* what) {
  std::string msg = std::string("LaunchFillIdentity: ") + what + ": " + cudaGetErrorName(err) +
                    " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(std::move(msg));
  return absl::InternalError(std::move(msg));
}

}  // namespace

absl::Status PreloadFillKernels() {
  cudaFuncAttributes attributes;
  const void* kernels[] = {reinterpret_cast<const void*>(&FillKernel<uint8_t>),
                           reinterpret_cast<const void*>(&FillKernel<uint16_t>),
                           reinterpret_cast<const void*>(&FillKernel<uint32_t>),
                           reinterpret_cast<const void*>(&FillKernel<uint64_t>)};
  for (const void* kernel : kernels) {
    if (const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel); err != cudaSuccess) {
      return CudaError(err, "cudaFuncGetAttributes (preloading the fill kernels)");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> IdentityBits(DataType dtype, ReduceOp op) {
  if (!IsReducible(dtype)) {
    return absl::InvalidArgumentError(std::string("a reduction identity for ") +
                                      DataTypeName(dtype) + " (not a reducible dtype)");
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return uint64_t{0};
    case ReduceOp::kMin:
    case ReduceOp::kMax:
    case ReduceOp::kProduct:
      break;
    default:
      return absl::InvalidArgumentError(std::string("a reduction identity for ") +
                                        ReduceOpName(op) + " (only sum, min, max, product)");
  }
  switch (dtype) {
    case DataType::kUint8:
      return TypedBits<uint8_t>(op);
    case DataType::kInt8:
      return TypedBits<int8_t>(op);
    case DataType::kInt16:
      return TypedBits<int16_t>(op);
    case DataType::kInt32:
      return TypedBits<int32_t>(op);
    case DataType::kInt64:
      return TypedBits<int64_t>(op);
    case DataType::kFloat32:
      return TypedBits<float>(op);
    case DataType::kFloat64:
      return TypedBits<double>(op);
    case DataType::kFloat16:
      return HalfBits(op, 0x3C00, 0x7C00, 0xFC00);
    case DataType::kBfloat16:
      return HalfBits(op, 0x3F80, 0x7F80, 0xFF80);
    case DataType::kBool:
      break;
  }
  return absl::InvalidArgumentError("a reduction identity for an unknown dtype");
}

absl::Status LaunchFillIdentity(void* ptr, int64_t count, DataType dtype, ReduceOp op,
                                DeviceStream stream) {
  absl::StatusOr<uint64_t> bits = IdentityBits(dtype, op);
  if (!bits.ok()) return bits.status();
  if (count < 0) {
    return absl::InvalidArgumentError("LaunchFillIdentity: negative count " +
                                      std::to_string(count));
  }
  if (count == 0) return absl::OkStatus();
  const auto size = static_cast<int64_t>(DataTypeSize(dtype));
  if (ptr == nullptr || reinterpret_cast<uintptr_t>(ptr) % static_cast<uintptr_t>(size) != 0) {
    return absl::InvalidArgumentError(std::string("LaunchFillIdentity: ") + DataTypeName(dtype) +
                                      " buffer at a null or misaligned address");
  }
  if (count > std::numeric_limits<int64_t>::max() / size) {
    return absl::InvalidArgumentError("LaunchFillIdentity: " + std::to_string(count) +
                                      " elements overflow the address space");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  if (*bits == 0) {
    const cudaError_t err = cudaMemsetAsync(ptr, 0, static_cast<size_t>(count * size), s);
    return err == cudaSuccess ? absl::OkStatus() : CudaError(err, "cudaMemsetAsync");
  }
  // Discard a stale error of an earlier call on this thread, so that the check reports this
  // launch.
  (void)cudaGetLastError();
  switch (size) {
    case 1:
      LaunchFill<uint8_t>(ptr, count, *bits, s);
      break;
    case 2:
      LaunchFill<uint16_t>(ptr, count, *bits, s);
      break;
    case 4:
      LaunchFill<uint32_t>(ptr, count, *bits, s);
      break;
    default:
      LaunchFill<uint64_t>(ptr, count, *bits, s);
      break;
  }
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? absl::OkStatus() : CudaError(err, "FillKernel launch");
}

}  // namespace chorus::ops::gpu
