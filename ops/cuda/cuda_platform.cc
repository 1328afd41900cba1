// CudaPlatform (ops/cuda/cuda_platform.h): GpuPlatform on the CUDA runtime API, the batched
// copy kernels and NCCL.
//
// Every CUDA error is cleared from the thread's last-error slot (cudaGetLastError) right after
// it is turned into a Status, so a failed GPU call (no driver, no device) leaves nothing behind
// for later CUDA users of the thread, the batched-copy launcher's own checks included.
#include "ops/cuda/cuda_platform.h"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include <cuda_runtime_api.h>

#include "base/mutex.h"
#include "base/status_macros.h"
#include "ops/cuda/batched_copy.h"
#include "ops/cuda/cuda_handles.h"
#include "ops/cuda/fill_identity.h"
#include "ops/nccl/nccl_communicator.h"

namespace chorus::ops::gpu {
namespace {

// The Status of a failed CUDA call `what` (clears the thread's last error).
absl::Status CudaStatus(cudaError_t err, const std::string& what) {
  (void)cudaGetLastError();
  std::string msg =
      absl::StrCat(what, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(std::move(msg));
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
      return absl::FailedPreconditionError(std::move(msg));
    default:
      return absl::InternalError(std::move(msg));
  }
}

// The scratch of EnqueueCopy on one device, for plans larger than kMaxInlineChunks.
struct DeviceScratch {
  Mutex mu;  // serialises the launches that use `scratch` (it is thread-compatible)
  std::unique_ptr<BatchedCopyScratch> scratch ABSL_GUARDED_BY(mu);
};

class CudaPlatform final : public GpuPlatform {
 public:
  CudaPlatform() = default;
  ~CudaPlatform() override {
    // Each scratch waits for its launches and frees its buffers on its own device.
    MutexLock map_lock(&mu_);
    for (auto& [device, entry] : scratches_) {
      if (cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
      MutexLock lock(&entry->mu);
      entry->scratch.reset();
    }
  }
  CudaPlatform(const CudaPlatform&) = delete;
  CudaPlatform& operator=(const CudaPlatform&) = delete;

  std::string name() const override { return "CUDA"; }

  absl::Status CheckDevice(int device) override {
    CHORUS_ASSIGN_OR_RETURN(const int count, DeviceCount());
    if (device < 0 || device >= count) {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", device, " is not visible: ", count, " CUDA device(s)"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<StreamHandle> CreateStream(int device) override {
    CHORUS_RETURN_IF_ERROR(UseDevice(device));
    CHORUS_RETURN_IF_ERROR(LoadKernels(device));
    cudaStream_t stream = nullptr;
    if (const cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        err != cudaSuccess) {
      return CudaStatus(err, "cudaStreamCreateWithFlags");
    }
    return static_cast<StreamHandle>(stream);
  }

  void DestroyStream(int device, StreamHandle stream) override {
    if (stream == nullptr || !UseDevice(device).ok()) return;
    if (cudaStreamDestroy(Stream(stream)) != cudaSuccess) (void)cudaGetLastError();
  }

  absl::StatusOr<EventHandle> CreateEvent(int device) override {
    CHORUS_RETURN_IF_ERROR(UseDevice(device));
    cudaEvent_t event = nullptr;
    if (const cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
        err != cudaSuccess) {
      return CudaStatus(err, "cudaEventCreateWithFlags");
    }
    return static_cast<EventHandle>(event);
  }

  void DestroyEvent(int device, EventHandle event) override {
    if (event == nullptr || !UseDevice(device).ok()) return;
    if (cudaEventDestroy(Event(event)) != cudaSuccess) (void)cudaGetLastError();
  }

  absl::Status RecordEvent(int device, EventHandle event, StreamHandle stream) override {
    CHORUS_RETURN_IF_ERROR(UseDevice(device));
    if (const cudaError_t err = cudaEventRecord(Event(event), Stream(stream)); err != cudaSuccess) {
      return CudaStatus(err, "cudaEventRecord");
    }
    return absl::OkStatus();
  }

  absl::Status StreamWaitEvent(int device, StreamHandle stream, EventHandle event) override {
    CHORUS_RETURN_IF_ERROR(UseDevice(device));
    if (const cudaError_t err = cudaStreamWaitEvent(Stream(stream), Event(event), 0);
        err != cudaSuccess) {
      return CudaStatus(err, "cudaStreamWaitEvent");
    }
    return absl::OkStatus();
  }

  absl::Status EnqueueHostCallback(int device, StreamHandle stream, void (*fn)(void*),
                                   void* arg) override {
    CHORUS_RETURN_IF_ERROR(UseDevice(device));
    if (const cudaError_t err = cudaLaunchHostFunc(Stream(stream), fn, arg); err != cudaSuccess) {
      return CudaStatus(err, "cudaLaunchHostFunc");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> EventDone(int device, EventHandle event) override {
    CHORUS_RETURN_IF_ERROR(UseDevice(device));
    const cudaError_t err = cudaEventQuery(Event(event));
    if (err == cudaSuccess) return true;
    if (err == cudaErrorNotReady) return false;
    return CudaStatus(err, "cudaEventQuery");
  }

  absl::StatusOr<void*> Allocate(int device, int64_t bytes) override {
    if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("Allocate of ", bytes, " bytes"));
    CHORUS_RETURN_IF_ERROR(UseDevice(device));
    CHORUS_RETURN_IF_ERROR(LoadKernels(device));
    void* ptr = nullptr;
    // At least one byte, so that every allocation has a distinct non-null address.
    const auto size = static_cast<size_t>(bytes > 0 ? bytes : 1);
    if (const cudaError_t err = cudaMalloc(&ptr, size); err != cudaSuccess) {
      return CudaStatus(err, absl::StrCat("cudaMalloc of ", bytes, " bytes on GPU ", device));
    }
    return ptr;
  }

  void Free(int device, void* ptr) override {
    if (ptr == nullptr || !UseDevice(device).ok()) return;
    if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
  }

  absl::Status EnqueueCopy(int device, const BatchedCopyPlan& plan, StreamHandle stream) override {
    CHORUS_RETURN_IF_ERROR(UseDevice(device));
    if (plan.chunks.size() <= kMaxInlineChunks) {
      return LaunchBatchedCopy(plan, nullptr, static_cast<DeviceStream>(stream));
    }
    DeviceScratch* entry = ScratchOf(device);
    MutexLock lock(&entry->mu);
    if (entry->scratch == nullptr) {
      absl::StatusOr<std::unique_ptr<BatchedCopyScratch>> created = BatchedCopyScratch::Create();
      if (!created.ok()) {
        (void)cudaGetLastError();
        return created.status();
      }
      entry->scratch = *std::move(created);
    }
    return LaunchBatchedCopy(plan, entry->scratch.get(), static_cast<DeviceStream>(stream));
  }

  absl::Status EnqueueFillIdentity(int device, void* ptr, int64_t count, DataType dtype,
                                   ReduceOp op, StreamHandle stream) override {
    CHORUS_RETURN_IF_ERROR(UseDevice(device));
    return LaunchFillIdentity(ptr, count, dtype, op, static_cast<DeviceStream>(stream));
  }

  absl::StatusOr<std::string> NewCommunicatorId() override {
    CHORUS_RETURN_IF_ERROR(DeviceCount().status());
    return NewNcclUniqueId();
  }

  absl::StatusOr<std::unique_ptr<GpuCommunicator>> CreateCommunicator(const std::string& id,
                                                                      int size, int rank,
                                                                      int device) override {
    CHORUS_RETURN_IF_ERROR(CheckDevice(device));
    return CreateNcclCommunicator(id, size, rank, device);
  }

 private:
  // The number of visible devices (>= 1), or FailedPrecondition saying why there is none.
  static absl::StatusOr<int> DeviceCount() {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::FailedPreconditionError(
          absl::StrCat("no CUDA device visible to chorus: ", cudaGetErrorString(err), " (",
                       cudaGetErrorName(err), ")"));
    }
    if (count <= 0) {
      return absl::FailedPreconditionError(
          "no CUDA device visible to chorus: cudaGetDeviceCount found 0 devices");
    }
    return count;
  }

  // Makes `device` current on the calling thread. Errors: CheckDevice's when the device is not
  // usable, else the cudaSetDevice failure.
  absl::Status UseDevice(int device) {
    const cudaError_t err = cudaSetDevice(device);
    if (err == cudaSuccess) return absl::OkStatus();
    (void)cudaGetLastError();
    CHORUS_RETURN_IF_ERROR(CheckDevice(device));
    return CudaStatus(err, absl::StrCat("cudaSetDevice(", device, ")"));
  }

  // Loads chorus's kernels into the context of `device` (the current device) once. CUDA would
  // load each at its first launch, which may wait for all work on the device: a hang when that
  // work waits on this thread (ops/cuda/batched_copy.h, PreloadBatchedCopyKernels). Called where
  // a device is first used for chorus's work: its streams and buffers are made before any launch.
  absl::Status LoadKernels(int device) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    if (kernels_loaded_.count(device) != 0) return absl::OkStatus();
    CHORUS_RETURN_IF_ERROR(PreloadBatchedCopyKernels());
    CHORUS_RETURN_IF_ERROR(PreloadFillKernels());
    kernels_loaded_.insert(device);
    return absl::OkStatus();
  }

  DeviceScratch* ScratchOf(int device) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    std::unique_ptr<DeviceScratch>& entry = scratches_[device];
    if (entry == nullptr) entry = std::make_unique<DeviceScratch>();
    return entry.get();
  }

  Mutex mu_;
  // Entries are never removed before destruction, so their addresses stay valid unlocked.
  std::map<int, std::unique_ptr<DeviceScratch>> scratches_ ABSL_GUARDED_BY(mu_);
  std::set<int> kernels_loaded_ ABSL_GUARDED_BY(mu_);  // devices LoadKernels has prepared
};

}  // namespace

std::shared_ptr<GpuPlatform> NewCudaPlatform() { return std::make_shared<CudaPlatform>(); }

}  // namespace chorus::ops::gpu
