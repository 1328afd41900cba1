// File: ops/mpi/mpi_datatypes.h
//
// Mapping of chorus DataType/ReduceOp to MPI, including user-defined MPI_Ops for float16 and
// bfloat16 (MPI has neither). The custom ops are created on first use and freed by
// FreeMpiCustomOps() (called before MPI_Finalize). Thread-compatible: background thread only.
#ifndef CHORUS_OPS_MPI_MPI_DATATYPES_H_
#define CHORUS_OPS_MPI_MPI_DATATYPES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <mpi.h>

#include "chorus/types.h"

namespace chorus::ops {

MPI_Datatype ToMpiDatatype(DataType dtype);
// REQUIRES: op in {kSum, kMin, kMax, kProduct}. For float16/bfloat16 returns a custom op.
absl::StatusOr<MPI_Op> ToMpiOp(DataType dtype, ReduceOp op);
void FreeMpiCustomOps();

// Turns an MPI error code into a Status carrying the call text and MPI_Error_string.
absl::Status MpiErrorToStatus(int code, const char* call, const char* file, int line);

}  // namespace chorus::ops

#define CHORUS_MPI_RETURN_IF_ERROR(call)                                                 \
  do {                                                                                   \
    int chorus_mpi_rc_ = (call);                                                         \
    if (chorus_mpi_rc_ != MPI_SUCCESS) {                                                 \
      return ::chorus::ops::MpiErrorToStatus(chorus_mpi_rc_, #call, __FILE__, __LINE__); \
    }                                                                                    \
  } while (0)

#endif  // CHORUS_OPS_MPI_MPI_DATATYPES_H_
