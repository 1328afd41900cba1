// File: chorus/types.h
//
// The tensor model shared by every layer of chorus: element types, reduction ops, collective
// kinds, and the borrowed view of a tensor that callers hand to the runtime.
//
// Thread-safety: everything here is a plain value type (thread-compatible).
#ifndef CHORUS_TYPES_H_
#define CHORUS_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus {

// Element types. The numeric values are part of the C ABI and the wire format: never reuse one.
enum class DataType : int32_t {
  kUint8 = 0,
  kInt8 = 1,
  kInt16 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kFloat16 = 5,
  kBfloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBool = 9,
};
inline constexpr int kNumDataTypes = 10;

// Reduction ops. Values are part of the C ABI and the wire format. Average is Sum followed by a
// division by the number of contributing ranks; Adasum is reserved and rejected for now.
enum class ReduceOp : int32_t {
  kSum = 0,
  kAverage = 1,
  kMin = 2,
  kMax = 3,
  kProduct = 4,
  kAdasum = 5,
};

// Collective kinds. Values are part of the C ABI and the wire format.
enum class OpType : int32_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
  kAddProcessSet = 7,     // internal: negotiated creation of a process set
  kRemoveProcessSet = 8,  // internal: negotiated removal of a process set
};

// Device id of host memory. GPU tensors use their CUDA ordinal (>= 0).
inline constexpr int32_t kCpuDevice = -1;

// The id of the process set holding every rank.
inline constexpr int32_t kGlobalProcessSetId = 0;

// Size in bytes of one element; 0 for an out-of-range value.
size_t DataTypeSize(DataType dtype);
// "float32", "bfloat16", ...; "unknown" for an out-of-range value.
const char* DataTypeName(DataType dtype);
// True for the types a reduction (allreduce, reducescatter) accepts: everything but bool.
bool IsReducible(DataType dtype);
bool IsFloatingPoint(DataType dtype);
// True when `value` names a defined DataType.
bool IsValidDataType(int32_t value);

const char* ReduceOpName(ReduceOp op);
bool IsValidReduceOp(int32_t value);
const char* OpTypeName(OpType type);  // "allreduce", "allgather", ...
// True for the ops that move tensor data: allreduce, allgather, broadcast, alltoall,
// reducescatter.
bool IsDataOp(OpType type);

// Number of elements of `shape` (1 for a scalar, 0 when any dimension is 0).
int64_t NumElements(const std::vector<int64_t>& shape);
// "[2, 3]" style rendering used in error messages.
std::string ShapeToString(const std::vector<int64_t>& shape);

// A borrowed, contiguous, row-major tensor. The caller owns `data` and keeps it alive and
// unmodified until the op that uses it completes.
struct TensorView {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  int32_t device = kCpuDevice;

  int64_t num_elements() const { return NumElements(shape); }
  int64_t num_bytes() const { return num_elements() * static_cast<int64_t>(DataTypeSize(dtype)); }
};

}  // namespace chorus

#endif  // CHORUS_TYPES_H_
