// File: test/support/fake_gpu.h
//
// A GpuPlatform (ops/gpu_platform.h) without a GPU, for the unit tier: the runtime's whole GPU
// path (ready events, lanes, fusion copies, communicators, the completion thread, failures)
// runs against it with N simulated ranks in one process. It keeps CUDA's ordering rules (each
// stream a worker thread running its work in order; events as in CUDA), NCCL's blocking rule
// (a collective waits for every member's matching call) and the kernels' exact results (the
// host reference executor); how it models each: docs/gpu.md. Faults are injected on the
// cluster (HoldCollectives, InjectAsyncError, FailAllocations).
//
// Thread-safety: thread-safe, like every GpuPlatform.
#ifndef CHORUS_TEST_SUPPORT_FAKE_GPU_H_
#define CHORUS_TEST_SUPPORT_FAKE_GPU_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ops/gpu_platform.h"

namespace chorus::testing {

class FakeGpuCluster {
 public:
  FakeGpuCluster();
  ~FakeGpuCluster();
  FakeGpuCluster(const FakeGpuCluster&) = delete;
  FakeGpuCluster& operator=(const FakeGpuCluster&) = delete;

  // From now on every collective blocks before it runs, until ReleaseCollectives or until its
  // communicator is aborted (which makes it return without touching any buffer).
  void HoldCollectives();
  void ReleaseCollectives();
  // Blocks until at least `n` collectives have been held since the cluster was made (some may
  // have been released or aborted since).
  void WaitUntilHeld(int n);
  // Every communicator's AsyncError reports `message` (as Unavailable) from now on.
  void InjectAsyncError(std::string message);

  struct State;

 private:
  friend class FakeGpuPlatform;
  std::shared_ptr<State> state_;
};

class FakeGpuPlatform final : public ops::gpu::GpuPlatform {
 public:
  // `num_devices` devices; 0 makes CheckDevice fail with "no CUDA device visible ...".
  FakeGpuPlatform(FakeGpuCluster& cluster, int num_devices = 1);
  ~FakeGpuPlatform() override;

  // Test hook: runs `work` on `stream` (from CreateStream, or null) in order with its other
  // work; a framework producing a tensor asynchronously.
  void EnqueueHostWork(ops::gpu::StreamHandle stream, std::function<void()> work);

  struct Counters {
    int64_t copy_launches = 0;    // EnqueueCopy calls with a non-empty plan
    int64_t stream_waits = 0;     // StreamWaitEvent calls
    int64_t host_callbacks = 0;   // EnqueueHostCallback calls that queued their callback
    int64_t collectives = 0;      // collectives enqueued on communicators
    int64_t allreduce_bytes = 0;  // bytes this rank put into allreduces (count * dtype size)
    int64_t communicators_created = 0;
    int64_t communicators_destroyed = 0;  // destroyed without an abort
    int64_t communicators_aborted = 0;
    int64_t live_allocations = 0;
    int64_t live_events = 0;
    int64_t live_streams = 0;  // created and not destroyed (the null stream not counted)
    int64_t queued_work = 0;   // stream work queued and not yet started, over all streams
  };
  Counters counters() const;
  // True when [p, p + bytes) lies in one live allocation of this platform.
  bool IsDeviceMemory(const void* p, int64_t bytes) const;
  // Makes every later Allocate fail with ResourceExhausted.
  void FailAllocations();
  // Makes every later EnqueueHostCallback fail with Unimplemented (a platform without them).
  void DisableHostCallbacks();

  // GpuPlatform.
  std::string name() const override { return "fake"; }
  absl::Status CheckDevice(int device) override;
  absl::StatusOr<ops::gpu::StreamHandle> CreateStream(int device) override;
  void DestroyStream(int device, ops::gpu::StreamHandle stream) override;
  absl::StatusOr<ops::gpu::EventHandle> CreateEvent(int device) override;
  void DestroyEvent(int device, ops::gpu::EventHandle event) override;
  absl::Status RecordEvent(int device, ops::gpu::EventHandle event,
                           ops::gpu::StreamHandle stream) override;
  absl::Status StreamWaitEvent(int device, ops::gpu::StreamHandle stream,
                               ops::gpu::EventHandle event) override;
  absl::StatusOr<bool> EventDone(int device, ops::gpu::EventHandle event) override;
  absl::Status EnqueueHostCallback(int device, ops::gpu::StreamHandle stream, void (*fn)(void*),
                                   void* arg) override;
  absl::StatusOr<void*> Allocate(int device, int64_t bytes) override;
  void Free(int device, void* ptr) override;
  absl::Status EnqueueCopy(int device, const ops::gpu::BatchedCopyPlan& plan,
                           ops::gpu::StreamHandle stream) override;
  absl::Status EnqueueFillIdentity(int device, void* ptr, int64_t count, DataType dtype,
                                   ReduceOp op, ops::gpu::StreamHandle stream) override;
  absl::StatusOr<std::string> NewCommunicatorId() override;
  absl::StatusOr<std::unique_ptr<ops::gpu::GpuCommunicator>> CreateCommunicator(
      const std::string& id, int size, int rank, int device) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_FAKE_GPU_H_
