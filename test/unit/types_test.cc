#include "chorus/types.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus {
namespace {

TEST_CASE("DataTypeSize and DataTypeName cover every type", "[types]") {
  auto [dtype, size, name] = GENERATE(table<DataType, size_t, std::string>({
      {DataType::kUint8, 1, "uint8"},
      {DataType::kInt8, 1, "int8"},
      {DataType::kInt16, 2, "int16"},
      {DataType::kInt32, 4, "int32"},
      {DataType::kInt64, 8, "int64"},
      {DataType::kFloat16, 2, "float16"},
      {DataType::kBfloat16, 2, "bfloat16"},
      {DataType::kFloat32, 4, "float32"},
      {DataType::kFloat64, 8, "float64"},
      {DataType::kBool, 1, "bool"},
  }));
  CHECK(DataTypeSize(dtype) == size);
  CHECK(std::string(DataTypeName(dtype)) == name);
  CHECK(IsValidDataType(static_cast<int32_t>(dtype)));
  CHECK(IsReducible(dtype) == (dtype != DataType::kBool));
  const bool floating = dtype == DataType::kFloat16 || dtype == DataType::kBfloat16 ||
                        dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
  CHECK(IsFloatingPoint(dtype) == floating);
}

TEST_CASE("Out-of-range DataType values are rejected", "[types]") {
  const int32_t value = GENERATE(-1, kNumDataTypes, 100);
  const auto dtype = static_cast<DataType>(value);
  CHECK_FALSE(IsValidDataType(value));
  CHECK(DataTypeSize(dtype) == 0);
  CHECK(std::string(DataTypeName(dtype)) == "unknown");
  CHECK_FALSE(IsReducible(dtype));
  CHECK_FALSE(IsFloatingPoint(dtype));
}

TEST_CASE("ReduceOpName and IsValidReduceOp", "[types]") {
  auto [op, name] = GENERATE(table<ReduceOp, std::string>({
      {ReduceOp::kSum, "sum"},
      {ReduceOp::kAverage, "average"},
      {ReduceOp::kMin, "min"},
      {ReduceOp::kMax, "max"},
      {ReduceOp::kProduct, "product"},
      {ReduceOp::kAdasum, "adasum"},
  }));
  CHECK(std::string(ReduceOpName(op)) == name);
  CHECK(IsValidReduceOp(static_cast<int32_t>(op)));
  CHECK_FALSE(IsValidReduceOp(-1));
  CHECK_FALSE(IsValidReduceOp(6));
  CHECK(std::string(ReduceOpName(static_cast<ReduceOp>(6))) == "unknown");
}

TEST_CASE("OpTypeName", "[types]") {
  auto [type, name] = GENERATE(table<OpType, std::string>({
      {OpType::kAllreduce, "allreduce"},
      {OpType::kAllgather, "allgather"},
      {OpType::kBroadcast, "broadcast"},
      {OpType::kAlltoall, "alltoall"},
      {OpType::kReducescatter, "reducescatter"},
      {OpType::kBarrier, "barrier"},
      {OpType::kJoin, "join"},
      {OpType::kAddProcessSet, "add_process_set"},
      {OpType::kRemoveProcessSet, "remove_process_set"},
  }));
  CHECK(std::string(OpTypeName(type)) == name);
  CHECK(std::string(OpTypeName(static_cast<OpType>(9))) == "unknown");
}

TEST_CASE("NumElements and ShapeToString", "[types]") {
  auto [shape, elements, text] = GENERATE(table<std::vector<int64_t>, int64_t, std::string>({
      {{}, 1, "[]"},
      {{5}, 5, "[5]"},
      {{2, 3}, 6, "[2, 3]"},
      {{4, 0, 7}, 0, "[4, 0, 7]"},
      {{2, 3, 4, 5}, 120, "[2, 3, 4, 5]"},
  }));
  CHECK(NumElements(shape) == elements);
  CHECK(ShapeToString(shape) == text);
}

TEST_CASE("TensorView sizes follow shape and dtype", "[types]") {
  TensorView view;
  view.dtype = DataType::kFloat64;
  view.shape = {3, 4};
  CHECK(view.num_elements() == 12);
  CHECK(view.num_bytes() == 96);
  view.dtype = DataType::kBfloat16;
  CHECK(view.num_bytes() == 24);
  view.shape = {};
  CHECK(view.num_elements() == 1);
  CHECK(view.num_bytes() == 2);
}

}  // namespace
}  // namespace chorus
