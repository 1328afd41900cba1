// File: ops/mpi/mpi_backend.cc
//
// Note [MPI int counts]: MPI-3 counts and displacements are `int`. Allreduce and Broadcast split
// larger messages into several calls of at most kMaxMpiCount elements; every rank computes the
// same split from the same count, so the calls pair up. The v-collectives (Allgatherv,
// Alltoallv) and ReduceScatter cannot be split that way and reject byte counts, offsets or
// element totals above INT_MAX with InvalidArgument. Such arguments are identical on every rank
// (negotiated), so every rank rejects them alike and nobody is left waiting in a collective.
#include "ops/mpi/mpi_backend.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "ops/mpi/mpi_datatypes.h"

namespace chorus::ops {
namespace {

constexpr int64_t kMaxMpiCount = INT_MAX;

int64_t ElementBytes64(DataType dtype) { return static_cast<int64_t>(DataTypeSize(dtype)); }

// Validates a reduction's arguments and resolves its MPI datatype and op.
absl::Status ResolveReduction(const char* what, DataType dtype, ReduceOp op,
                              MPI_Datatype* mpi_dtype, MPI_Op* mpi_op) {
  if (ElementBytes64(dtype) == 0) {
    return absl::InvalidArgumentError(std::string(what) + ": unknown data type " +
                                      std::to_string(static_cast<int32_t>(dtype)));
  }
  if (dtype == DataType::kBool) {
    return absl::InvalidArgumentError(std::string(what) + ": bool tensors cannot be reduced");
  }
  absl::StatusOr<MPI_Op> resolved = ToMpiOp(dtype, op);
  if (!resolved.ok()) {
    return absl::Status(resolved.status().code(),
                        std::string(what) + ": " + std::string(resolved.status().message()));
  }
  *mpi_op = *resolved;
  *mpi_dtype = ToMpiDatatype(dtype);
  return absl::OkStatus();
}

// Converts per-rank byte counts and offsets to MPI ints (see Note [MPI int counts]).
absl::Status ToIntArrays(const char* what, const char* side, absl::Span<const int64_t> bytes,
                         absl::Span<const int64_t> offsets, std::vector<int>* int_bytes,
                         std::vector<int>* int_offsets) {
  int_bytes->resize(bytes.size());
  int_offsets->resize(offsets.size());
  for (size_t r = 0; r < bytes.size(); ++r) {
    if (bytes[r] < 0 || bytes[r] > kMaxMpiCount || offsets[r] < 0 || offsets[r] > kMaxMpiCount) {
      return absl::InvalidArgumentError(std::string(what) + ": " + side + " block of rank " +
                                        std::to_string(r) + " (" + std::to_string(bytes[r]) +
                                        " bytes at offset " + std::to_string(offsets[r]) +
                                        ") is negative or exceeds the MPI limit of INT_MAX bytes");
    }
    (*int_bytes)[r] = static_cast<int>(bytes[r]);
    (*int_offsets)[r] = static_cast<int>(offsets[r]);
  }
  return absl::OkStatus();
}

absl::Status CheckSpanSize(const char* what, const char* name, size_t got, int want) {
  if (got != static_cast<size_t>(want)) {
    return absl::InvalidArgumentError(std::string(what) + ": " + name + " has " +
                                      std::to_string(got) + " entries, the communicator has " +
                                      std::to_string(want) + " ranks");
  }
  return absl::OkStatus();
}

}  // namespace

MpiBackend::MpiBackend(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  // Errors must come back as return codes (then Status), not abort the job.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiBackend::~MpiBackend() {
  if (!owned_ || comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

absl::Status MpiBackend::Allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                   ReduceOp op) {
  if (count < 0) return absl::InvalidArgumentError("Allreduce: negative count");
  MPI_Datatype mpi_dtype;
  MPI_Op mpi_op;
  CHORUS_RETURN_IF_ERROR(ResolveReduction("Allreduce", dtype, op, &mpi_dtype, &mpi_op));
  const int64_t elem = ElementBytes64(dtype);
  const bool in_place = send == recv;
  // At least one call, even for count 0: every rank takes part in every collective.
  int64_t done = 0;
  do {
    const int64_t n = std::min(count - done, kMaxMpiCount);
    const std::ptrdiff_t off = static_cast<std::ptrdiff_t>(done * elem);
    const void* s = in_place ? MPI_IN_PLACE : static_cast<const std::byte*>(send) + off;
    CHORUS_MPI_RETURN_IF_ERROR(MPI_Allreduce(s, static_cast<std::byte*>(recv) + off,
                                             static_cast<int>(n), mpi_dtype, mpi_op, comm_));
    done += n;
  } while (done < count);
  return absl::OkStatus();
}

absl::Status MpiBackend::Allgatherv(const void* send, void* recv,
                                    absl::Span<const int64_t> recv_bytes) {
  CHORUS_RETURN_IF_ERROR(CheckSpanSize("Allgatherv", "recv_bytes", recv_bytes.size(), size_));
  std::vector<int64_t> offsets(recv_bytes.size());
  int64_t total = 0;
  for (size_t r = 0; r < recv_bytes.size(); ++r) {
    offsets[r] = total;
    total += recv_bytes[r] < 0 ? 0 : recv_bytes[r];
  }
  std::vector<int> counts, displs;
  CHORUS_RETURN_IF_ERROR(
      ToIntArrays("Allgatherv", "receive", recv_bytes, offsets, &counts, &displs));
  // This rank's block already in place inside `recv` is sent from there.
  std::byte* mine = static_cast<std::byte*>(recv) + offsets[rank_];
  const void* s = send == mine ? MPI_IN_PLACE : send;
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Allgatherv(s, counts[rank_], MPI_BYTE, recv, counts.data(),
                                            displs.data(), MPI_BYTE, comm_));
  return absl::OkStatus();
}

absl::Status MpiBackend::Broadcast(void* buffer, int64_t bytes, int root) {
  if (bytes < 0) return absl::InvalidArgumentError("Broadcast: negative byte count");
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError("Broadcast: root " + std::to_string(root) +
                                      " is not a rank of this communicator of " +
                                      std::to_string(size_));
  }
  int64_t done = 0;
  do {
    const int64_t n = std::min(bytes - done, kMaxMpiCount);
    CHORUS_MPI_RETURN_IF_ERROR(MPI_Bcast(static_cast<std::byte*>(buffer) + done,
                                         static_cast<int>(n), MPI_BYTE, root, comm_));
    done += n;
  } while (done < bytes);
  return absl::OkStatus();
}

absl::Status MpiBackend::Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                                   absl::Span<const int64_t> send_offsets, void* recv,
                                   absl::Span<const int64_t> recv_bytes,
                                   absl::Span<const int64_t> recv_offsets) {
  CHORUS_RETURN_IF_ERROR(CheckSpanSize("Alltoallv", "send_bytes", send_bytes.size(), size_));
  CHORUS_RETURN_IF_ERROR(CheckSpanSize("Alltoallv", "send_offsets", send_offsets.size(), size_));
  CHORUS_RETURN_IF_ERROR(CheckSpanSize("Alltoallv", "recv_bytes", recv_bytes.size(), size_));
  CHORUS_RETURN_IF_ERROR(CheckSpanSize("Alltoallv", "recv_offsets", recv_offsets.size(), size_));
  std::vector<int> scounts, sdispls, rcounts, rdispls;
  CHORUS_RETURN_IF_ERROR(
      ToIntArrays("Alltoallv", "send", send_bytes, send_offsets, &scounts, &sdispls));
  CHORUS_RETURN_IF_ERROR(
      ToIntArrays("Alltoallv", "receive", recv_bytes, recv_offsets, &rcounts, &rdispls));
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Alltoallv(send, scounts.data(), sdispls.data(), MPI_BYTE, recv,
                                           rcounts.data(), rdispls.data(), MPI_BYTE, comm_));
  return absl::OkStatus();
}

absl::Status MpiBackend::ReduceScatter(const void* send, void* recv,
                                       absl::Span<const int64_t> recv_counts, DataType dtype,
                                       ReduceOp op) {
  CHORUS_RETURN_IF_ERROR(CheckSpanSize("ReduceScatter", "recv_counts", recv_counts.size(), size_));
  MPI_Datatype mpi_dtype;
  MPI_Op mpi_op;
  CHORUS_RETURN_IF_ERROR(ResolveReduction("ReduceScatter", dtype, op, &mpi_dtype, &mpi_op));
  std::vector<int> counts(recv_counts.size());
  int64_t total = 0;
  for (size_t r = 0; r < recv_counts.size(); ++r) {
    if (recv_counts[r] < 0) {
      return absl::InvalidArgumentError("ReduceScatter: negative count for rank " +
                                        std::to_string(r));
    }
    total += recv_counts[r];
    counts[r] = static_cast<int>(recv_counts[r]);
  }
  // MPI implementations add the counts up in an int (see Note [MPI int counts]).
  if (total > kMaxMpiCount) {
    return absl::InvalidArgumentError("ReduceScatter: " + std::to_string(total) +
                                      " elements in total exceed the MPI limit of INT_MAX");
  }
  const void* s = send == recv ? MPI_IN_PLACE : send;
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Reduce_scatter(s, recv, counts.data(), mpi_dtype, mpi_op, comm_));
  return absl::OkStatus();
}

absl::Status MpiBackend::Barrier() {
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Barrier(comm_));
  return absl::OkStatus();
}

}  // namespace chorus::ops
