// Free functions of chorus/types.h.
#include "chorus/types.h"

#include <string>
#include <vector>

#include "base/op_kind.h"

namespace chorus {

size_t DataTypeSize(DataType dtype) {
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

const char* DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kUint8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBfloat16:
      return "bfloat16";
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kBool:
      return "bool";
  }
  return "unknown";
}

bool IsReducible(DataType dtype) {
  return IsValidDataType(static_cast<int32_t>(dtype)) && dtype != DataType::kBool;
}

bool IsFloatingPoint(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
    case DataType::kBfloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      return true;
    default:
      return false;
  }
}

bool IsValidDataType(int32_t value) { return value >= 0 && value < kNumDataTypes; }

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "average";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "product";
    case ReduceOp::kAdasum:
      return "adasum";
  }
  return "unknown";
}

bool IsValidReduceOp(int32_t value) {
  return value >= static_cast<int32_t>(ReduceOp::kSum) &&
         value <= static_cast<int32_t>(ReduceOp::kAdasum);
}

const char* OpTypeName(OpType type) {
  return IsValidOpType(static_cast<int32_t>(type)) ? KindOf(type).name : "unknown";
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  out += "]";
  return out;
}

bool IsDataOp(OpType type) {
  return IsValidOpType(static_cast<int32_t>(type)) && KindOf(type).moves_data;
}

}  // namespace chorus
