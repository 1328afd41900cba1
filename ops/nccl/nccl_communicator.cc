// NcclCommunicator: GpuCommunicator on an ncclComm_t (ops/nccl/nccl_communicator.h).
#include "ops/nccl/nccl_communicator.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "base/status_macros.h"
#include "chorus/types.h"
#include "ops/cuda/cuda_handles.h"

namespace chorus::ops::gpu {
namespace {

// ncclGetLastError's text, or "" when it has none. `comm` may be null.
std::string LastError(ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  return last == nullptr ? std::string() : std::string(last);
}

// The Status of a failed NCCL call (`r` != ncclSuccess); `message` names the call.
absl::Status NcclStatus(ncclResult_t r, std::string message) {
  switch (r) {
    case ncclRemoteError:
    case ncclSystemError:
    case ncclInternalError:
      return absl::UnavailableError(std::move(message));
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(std::move(message));
    default:
      return absl::InternalError(std::move(message));
  }
}

// "<what> failed: <ncclGetErrorString> (<ncclGetLastError>)".
std::string Describe(ncclResult_t r, const char* what, ncclComm_t comm) {
  std::string msg = absl::StrCat(what, " failed: ", ncclGetErrorString(r));
  const std::string last = LastError(comm);
  if (!last.empty()) absl::StrAppend(&msg, " (", last, ")");
  return msg;
}

// The NCCL type of a reduction over `dtype`. NCCL has no 16-bit integers.
absl::StatusOr<ncclDataType_t> ReductionType(DataType dtype) {
  switch (dtype) {
    case DataType::kUint8:
      return ncclUint8;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBfloat16:
      return ncclBfloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kInt16:
    case DataType::kBool:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("NCCL cannot reduce ", DataTypeName(dtype), " tensors (no NCCL type for it)"));
}

absl::StatusOr<ncclRedOp_t> NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("NCCL reductions take sum, min, max or product, not ", ReduceOpName(op)));
}

absl::Status CheckSizes(absl::Span<const int64_t> values, size_t expected, const char* what) {
  if (values.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", values.size(), " entries for a communicator of ", expected));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, "[", i, "] is negative: ", values[i]));
    }
  }
  return absl::OkStatus();
}

bool AllEqual(absl::Span<const int64_t> values) {
  for (int64_t v : values) {
    if (v != values[0]) return false;
  }
  return true;
}

const uint8_t* At(const void* base, int64_t offset) {
  return static_cast<const uint8_t*>(base) + offset;
}
uint8_t* At(void* base, int64_t offset) { return static_cast<uint8_t*>(base) + offset; }

// Makes a device current for its lifetime, then restores the thread's previous device.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    }
    status_ = cudaSetDevice(device);
    if (status_ != cudaSuccess) (void)cudaGetLastError();
  }
  ~ScopedDevice() {
    if (previous_ >= 0 && previous_ != device_ && cudaSetDevice(previous_) != cudaSuccess) {
      (void)cudaGetLastError();
    }
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

  cudaError_t status() const { return status_; }

 private:
  const int device_;
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

class NcclCommunicator final : public GpuCommunicator {
 public:
  // Takes ownership of `comm`, an initialised communicator.
  NcclCommunicator(ncclComm_t comm, int size, int rank, int device)
      : comm_(comm), size_(size), rank_(rank), device_(device) {}

  ~NcclCommunicator() override {
    if (aborted_.load(std::memory_order_acquire)) return;
    ScopedDevice on(device_);
    (void)ncclCommDestroy(comm_);
  }

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int device() const override { return device_; }

  absl::Status Allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                         StreamHandle stream) override {
    CHORUS_ASSIGN_OR_RETURN(const ncclDataType_t type, ReductionType(dtype));
    CHORUS_ASSIGN_OR_RETURN(const ncclRedOp_t nccl_op, NcclOp(op));
    if (count < 0)
      return absl::InvalidArgumentError(absl::StrCat("Allreduce of ", count, " elements"));
    return Issue([&] {
      if (count == 0) return absl::OkStatus();
      return Check(ncclAllReduce(send, recv, static_cast<size_t>(count), type, nccl_op, comm_,
                                 Stream(stream)),
                   "ncclAllReduce");
    });
  }

  absl::Status Allgatherv(const void* send, void* recv, absl::Span<const int64_t> recv_bytes,
                          StreamHandle stream) override {
    CHORUS_RETURN_IF_ERROR(
        CheckSizes(recv_bytes, static_cast<size_t>(size_), "Allgatherv recv_bytes"));
    return Issue([&] {
      if (AllEqual(recv_bytes)) {
        if (recv_bytes[0] == 0) return absl::OkStatus();
        return Check(ncclAllGather(send, recv, static_cast<size_t>(recv_bytes[0]), ncclUint8, comm_,
                                   Stream(stream)),
                     "ncclAllGather");
      }
      return Grouped([&] {
        int64_t offset = 0;
        for (int r = 0; r < size_; ++r) {
          const int64_t n = recv_bytes[static_cast<size_t>(r)];
          if (n > 0) {
            CHORUS_RETURN_IF_ERROR(
                Check(ncclBroadcast(send, At(recv, offset), static_cast<size_t>(n), ncclUint8, r,
                                    comm_, Stream(stream)),
                      "ncclBroadcast (Allgatherv)"));
          }
          offset += n;
        }
        return absl::OkStatus();
      });
    });
  }

  absl::Status Broadcast(void* buffer, int64_t bytes, int root, StreamHandle stream) override {
    if (bytes < 0)
      return absl::InvalidArgumentError(absl::StrCat("Broadcast of ", bytes, " bytes"));
    if (root < 0 || root >= size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("Broadcast root ", root, " is not a rank of a communicator of ", size_));
    }
    return Issue([&] {
      if (bytes == 0) return absl::OkStatus();
      return Check(ncclBroadcast(buffer, buffer, static_cast<size_t>(bytes), ncclUint8, root, comm_,
                                 Stream(stream)),
                   "ncclBroadcast");
    });
  }

  absl::Status Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                         absl::Span<const int64_t> send_offsets, void* recv,
                         absl::Span<const int64_t> recv_bytes,
                         absl::Span<const int64_t> recv_offsets, StreamHandle stream) override {
    const auto n = static_cast<size_t>(size_);
    CHORUS_RETURN_IF_ERROR(CheckSizes(send_bytes, n, "Alltoallv send_bytes"));
    CHORUS_RETURN_IF_ERROR(CheckSizes(send_offsets, n, "Alltoallv send_offsets"));
    CHORUS_RETURN_IF_ERROR(CheckSizes(recv_bytes, n, "Alltoallv recv_bytes"));
    CHORUS_RETURN_IF_ERROR(CheckSizes(recv_offsets, n, "Alltoallv recv_offsets"));
    bool any = false;
    for (size_t p = 0; p < n; ++p) any = any || send_bytes[p] > 0 || recv_bytes[p] > 0;
    return Issue([&] {
      if (!any) return absl::OkStatus();
      return Grouped([&] {
        for (int p = 0; p < size_; ++p) {
          const auto i = static_cast<size_t>(p);
          if (send_bytes[i] > 0) {
            CHORUS_RETURN_IF_ERROR(
                Check(ncclSend(At(send, send_offsets[i]), static_cast<size_t>(send_bytes[i]),
                               ncclUint8, p, comm_, Stream(stream)),
                      "ncclSend (Alltoallv)"));
          }
          if (recv_bytes[i] > 0) {
            CHORUS_RETURN_IF_ERROR(
                Check(ncclRecv(At(recv, recv_offsets[i]), static_cast<size_t>(recv_bytes[i]),
                               ncclUint8, p, comm_, Stream(stream)),
                      "ncclRecv (Alltoallv)"));
          }
        }
        return absl::OkStatus();
      });
    });
  }

  absl::Status ReduceScatter(const void* send, void* recv, absl::Span<const int64_t> recv_counts,
                             DataType dtype, ReduceOp op, StreamHandle stream) override {
    CHORUS_ASSIGN_OR_RETURN(const ncclDataType_t type, ReductionType(dtype));
    CHORUS_ASSIGN_OR_RETURN(const ncclRedOp_t nccl_op, NcclOp(op));
    CHORUS_RETURN_IF_ERROR(
        CheckSizes(recv_counts, static_cast<size_t>(size_), "ReduceScatter recv_counts"));
    const auto element = static_cast<int64_t>(DataTypeSize(dtype));
    return Issue([&] {
      if (AllEqual(recv_counts)) {
        if (recv_counts[0] == 0) return absl::OkStatus();
        return Check(ncclReduceScatter(send, recv, static_cast<size_t>(recv_counts[0]), type,
                                       nccl_op, comm_, Stream(stream)),
                     "ncclReduceScatter");
      }
      return Grouped([&] {
        int64_t offset = 0;  // elements
        for (int r = 0; r < size_; ++r) {
          const int64_t count = recv_counts[static_cast<size_t>(r)];
          if (count > 0) {
            // recv is only written on the root (rank r), where it is this rank's block.
            CHORUS_RETURN_IF_ERROR(
                Check(ncclReduce(At(send, offset * element), recv, static_cast<size_t>(count), type,
                                 nccl_op, r, comm_, Stream(stream)),
                      "ncclReduce (ReduceScatter)"));
          }
          offset += count;
        }
        return absl::OkStatus();
      });
    });
  }

  absl::Status AsyncError() override {
    if (aborted_.load(std::memory_order_acquire)) return AbortedError();
    // Never waits for an Abort in progress (it has set aborted_ before taking the lock).
    std::shared_lock<std::shared_mutex> lock(life_mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      if (aborted_.load(std::memory_order_acquire)) return AbortedError();
      lock.lock();  // a spurious try-lock failure
    }
    if (aborted_.load(std::memory_order_acquire)) return AbortedError();
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &async);
    if (r != ncclSuccess) {
      return absl::UnavailableError(
          absl::StrCat(Who(), ": ", Describe(r, "ncclCommGetAsyncError", comm_)));
    }
    if (async == ncclSuccess || async == ncclInProgress) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrCat(Who(), ": ", Describe(async, "an asynchronous NCCL operation", comm_)));
  }

  void Abort() override {
    aborted_.store(true, std::memory_order_release);
    std::call_once(abort_once_, [this] {
      // See Note [Abort versus enqueue] in docs/nccl_communicator.md.
      std::unique_lock<std::shared_mutex> lock(life_mu_);
      ScopedDevice on(device_);
      (void)ncclCommAbort(comm_);
    });
  }

 private:
  // "NCCL rank 1 of 4 on GPU 0".
  std::string Who() const {
    return absl::StrCat("NCCL rank ", rank_, " of ", size_, " on GPU ", device_);
  }

  absl::Status AbortedError() const {
    return absl::UnavailableError(absl::StrCat(Who(), ": the communicator was aborted"));
  }

  // OK for ncclSuccess, else the Status of `what`'s failure. Only inside Issue.
  absl::Status Check(ncclResult_t r, const char* what) {
    if (r == ncclSuccess) return absl::OkStatus();
    return NcclStatus(r, absl::StrCat(Who(), ": ", Describe(r, what, comm_)));
  }

  // Runs `issue` (NCCL calls on comm_) with device_ current and the communicator alive; fails
  // without running it once the communicator is aborted (Note [Abort versus enqueue] in
  // docs/nccl_communicator.md).
  template <typename F>
  absl::Status Issue(F&& issue) {
    std::shared_lock<std::shared_mutex> lock(life_mu_);
    if (aborted_.load(std::memory_order_acquire)) return AbortedError();
    ScopedDevice on(device_);
    if (on.status() != cudaSuccess) {
      return absl::FailedPreconditionError(
          absl::StrCat(Who(), ": cudaSetDevice failed: ", cudaGetErrorString(on.status())));
    }
    return issue();
  }

  // Runs `body` (NCCL calls) between ncclGroupStart and ncclGroupEnd. The group is closed even
  // when `body` fails (NCCL then launches none of it); the first failure is returned.
  template <typename F>
  absl::Status Grouped(F&& body) {
    CHORUS_RETURN_IF_ERROR(Check(ncclGroupStart(), "ncclGroupStart"));
    const absl::Status issued = body();
    const absl::Status ended = Check(ncclGroupEnd(), "ncclGroupEnd");
    CHORUS_RETURN_IF_ERROR(issued);
    return ended;
  }

  const ncclComm_t comm_;
  const int size_;
  const int rank_;
  const int device_;
  std::atomic<bool> aborted_{false};
  std::once_flag abort_once_;
  // Shared while comm_ is in use, exclusive for ncclCommAbort (Note [Abort versus enqueue] in
  // docs/nccl_communicator.md).
  std::shared_mutex life_mu_;
};

}  // namespace

absl::StatusOr<std::string> NewNcclUniqueId() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return NcclStatus(r, Describe(r, "ncclGetUniqueId", nullptr));
  return std::string(id.internal, NCCL_UNIQUE_ID_BYTES);
}

absl::StatusOr<std::unique_ptr<GpuCommunicator>> CreateNcclCommunicator(const std::string& id,
                                                                        int size, int rank,
                                                                        int device) {
  if (id.size() != NCCL_UNIQUE_ID_BYTES) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an NCCL communicator id has ", NCCL_UNIQUE_ID_BYTES, " bytes, not ", id.size()));
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL communicator: rank ", rank, " of ", size, " is not a valid rank"));
  }
  if (const cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat("NCCL communicator: cudaSetDevice(", device,
                                                      ") failed: ", cudaGetErrorString(err)));
  }
  ncclUniqueId unique_id;
  std::memcpy(unique_id.internal, id.data(), NCCL_UNIQUE_ID_BYTES);
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRank(&comm, size, unique_id, rank);
  if (r != ncclSuccess) {
    absl::Status status =
        NcclStatus(r, absl::StrCat("NCCL rank ", rank, " of ", size, " on GPU ", device, ": ",
                                   Describe(r, "ncclCommInitRank", comm)));
    // A communicator whose initialisation failed late is still allocated.
    if (comm != nullptr) (void)ncclCommAbort(comm);
    return status;
  }
  return std::unique_ptr<GpuCommunicator>(
      std::make_unique<NcclCommunicator>(comm, size, rank, device));
}

}  // namespace chorus::ops::gpu
