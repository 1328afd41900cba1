// File: ops/mpi/mpi_datatypes.cc
#include "ops/mpi/mpi_datatypes.h"

#include <string>

#include "ops/cpu/reduce_kernels.h"

namespace chorus::ops {
namespace {

// MPI_User_function for a 16-bit float format: inout[i] = op(in[i], inout[i]). The op is
// commutative, so the operand order does not matter. ReduceInto cannot fail for these
// (dtype, op) pairs, and an MPI user function has no way to report an error anyway.
template <DataType kDtype, ReduceOp kOp>
void Reduce16(void* in, void* inout, int* len, MPI_Datatype* /*datatype*/) {
  (void)ReduceInto(inout, in, *len, kDtype, kOp);
}

constexpr int kNumCustomOps = 4;  // sum, min, max, product

int OpSlot(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return 0;
    case ReduceOp::kMin:
      return 1;
    case ReduceOp::kMax:
      return 2;
    case ReduceOp::kProduct:
      return 3;
    default:
      return -1;
  }
}

template <DataType kDtype>
MPI_User_function* UserFunction(int slot) {
  switch (slot) {
    case 0:
      return &Reduce16<kDtype, ReduceOp::kSum>;
    case 1:
      return &Reduce16<kDtype, ReduceOp::kMin>;
    case 2:
      return &Reduce16<kDtype, ReduceOp::kMax>;
    default:
      return &Reduce16<kDtype, ReduceOp::kProduct>;
  }
}

// Lazily created custom ops, [0] float16, [1] bfloat16. Background thread only (see header).
MPI_Op g_custom_ops[2][kNumCustomOps] = {
    {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL},
    {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL},
};

std::string DtypeText(DataType dtype) {
  return "data type " + std::to_string(static_cast<int32_t>(dtype));
}

}  // namespace

MPI_Datatype ToMpiDatatype(DataType dtype) {
  switch (dtype) {
    case DataType::kUint8:
      return MPI_UINT8_T;
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kInt16:
      return MPI_INT16_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return MPI_UINT16_T;  // data movement only; reductions use the custom ops
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kBool:
      return MPI_C_BOOL;
  }
  return MPI_DATATYPE_NULL;
}

absl::StatusOr<MPI_Op> ToMpiOp(DataType dtype, ReduceOp op) {
  const int slot = OpSlot(op);
  if (slot < 0) {
    return absl::InvalidArgumentError("no MPI reduction for reduce op " +
                                      std::to_string(static_cast<int32_t>(op)) +
                                      " (only sum, min, max, product)");
  }
  switch (dtype) {
    case DataType::kUint8:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kFloat32:
    case DataType::kFloat64:
      switch (op) {
        case ReduceOp::kSum:
          return MPI_SUM;
        case ReduceOp::kMin:
          return MPI_MIN;
        case ReduceOp::kMax:
          return MPI_MAX;
        default:
          return MPI_PROD;
      }
    case DataType::kFloat16:
    case DataType::kBfloat16: {
      const int fmt = dtype == DataType::kFloat16 ? 0 : 1;
      MPI_Op& cached = g_custom_ops[fmt][slot];
      if (cached == MPI_OP_NULL) {
        MPI_User_function* fn = fmt == 0 ? UserFunction<DataType::kFloat16>(slot)
                                         : UserFunction<DataType::kBfloat16>(slot);
        MPI_Op created = MPI_OP_NULL;
        CHORUS_MPI_RETURN_IF_ERROR(MPI_Op_create(fn, /*commute=*/1, &created));
        cached = created;
      }
      return cached;
    }
    case DataType::kBool:
      break;
    default:
      return absl::InvalidArgumentError("no MPI reduction for unknown " + DtypeText(dtype));
  }
  return absl::InvalidArgumentError("bool tensors cannot be reduced");
}

void FreeMpiCustomOps() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  for (auto& per_format : g_custom_ops) {
    for (MPI_Op& op : per_format) {
      if (op != MPI_OP_NULL && !finalized) MPI_Op_free(&op);
      op = MPI_OP_NULL;
    }
  }
}

absl::Status MpiErrorToStatus(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  std::string detail;
  if (MPI_Error_string(code, text, &len) == MPI_SUCCESS && len > 0) {
    detail.assign(text, static_cast<size_t>(len));
  } else {
    detail = "MPI error code " + std::to_string(code);
  }
  return absl::InternalError(std::string(call) + " failed (" + file + ":" + std::to_string(line) +
                             "): " + detail);
}

}  // namespace chorus::ops
