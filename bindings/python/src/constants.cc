#include "constants.h"

#include <cstdint>

#include "chorus/types.h"

namespace chorus_python {
namespace {

namespace py = pybind11;

template <typename Enum>
void Put(py::dict& table, const char* name, Enum value) {
  table[name] = static_cast<int32_t>(value);
}

}  // namespace

void AddConstants(py::module_& m) {
  py::dict op_types;
  Put(op_types, "allreduce", chorus::OpType::kAllreduce);
  Put(op_types, "allgather", chorus::OpType::kAllgather);
  Put(op_types, "broadcast", chorus::OpType::kBroadcast);
  Put(op_types, "alltoall", chorus::OpType::kAlltoall);
  Put(op_types, "reducescatter", chorus::OpType::kReducescatter);
  Put(op_types, "barrier", chorus::OpType::kBarrier);
  Put(op_types, "join", chorus::OpType::kJoin);
  Put(op_types, "add_process_set", chorus::OpType::kAddProcessSet);
  Put(op_types, "remove_process_set", chorus::OpType::kRemoveProcessSet);
  m.attr("OP_TYPES") = op_types;

  py::dict reduce_ops;
  Put(reduce_ops, "Sum", chorus::ReduceOp::kSum);
  Put(reduce_ops, "Average", chorus::ReduceOp::kAverage);
  Put(reduce_ops, "Min", chorus::ReduceOp::kMin);
  Put(reduce_ops, "Max", chorus::ReduceOp::kMax);
  Put(reduce_ops, "Product", chorus::ReduceOp::kProduct);
  Put(reduce_ops, "Adasum", chorus::ReduceOp::kAdasum);
  m.attr("REDUCE_OPS") = reduce_ops;

  py::dict dtypes;
  Put(dtypes, "uint8", chorus::DataType::kUint8);
  Put(dtypes, "int8", chorus::DataType::kInt8);
  Put(dtypes, "int16", chorus::DataType::kInt16);
  Put(dtypes, "int32", chorus::DataType::kInt32);
  Put(dtypes, "int64", chorus::DataType::kInt64);
  Put(dtypes, "float16", chorus::DataType::kFloat16);
  Put(dtypes, "bfloat16", chorus::DataType::kBfloat16);
  Put(dtypes, "float32", chorus::DataType::kFloat32);
  Put(dtypes, "float64", chorus::DataType::kFloat64);
  Put(dtypes, "bool", chorus::DataType::kBool);
  m.attr("DTYPES") = dtypes;
}

}  // namespace chorus_python
