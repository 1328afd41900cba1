// NoGpuPlatform (ops/gpu_platform.h): a platform without devices. Every call fails with the
// same FailedPrecondition, so a GPU tensor is refused with the build's reason.
#include <utility>

#include "ops/gpu_platform.h"

namespace chorus::ops::gpu {
namespace {

class NoGpu final : public GpuPlatform {
 public:
  explicit NoGpu(std::string reason) : reason_(std::move(reason)) {}

  std::string name() const override { return "none"; }
  absl::Status CheckDevice(int) override { return Refused(); }
  absl::StatusOr<StreamHandle> CreateStream(int) override { return Refused(); }
  void DestroyStream(int, StreamHandle) override {}
  absl::StatusOr<EventHandle> CreateEvent(int) override { return Refused(); }
  void DestroyEvent(int, EventHandle) override {}
  absl::Status RecordEvent(int, EventHandle, StreamHandle) override { return Refused(); }
  absl::Status StreamWaitEvent(int, StreamHandle, EventHandle) override { return Refused(); }
  absl::StatusOr<bool> EventDone(int, EventHandle) override { return Refused(); }
  absl::StatusOr<void*> Allocate(int, int64_t) override { return Refused(); }
  void Free(int, void*) override {}
  absl::Status EnqueueCopy(int, const BatchedCopyPlan&, StreamHandle) override { return Refused(); }
  absl::Status EnqueueFillIdentity(int, void*, int64_t, DataType, ReduceOp, StreamHandle) override {
    return Refused();
  }
  absl::StatusOr<std::string> NewCommunicatorId() override { return Refused(); }
  absl::StatusOr<std::unique_ptr<GpuCommunicator>> CreateCommunicator(const std::string&, int, int,
                                                                      int) override {
    return Refused();
  }

 private:
  absl::Status Refused() const { return absl::FailedPreconditionError(reason_); }

  const std::string reason_;
};

}  // namespace

std::shared_ptr<GpuPlatform> NoGpuPlatform(std::string reason) {
  return std::make_shared<NoGpu>(std::move(reason));
}

}  // namespace chorus::ops::gpu
