// File: runtime/gpu/gpu_completion_queue.h
//
// The GPU completion thread: watches launched batches (GpuBatch) and completes each one once
// its done event has passed, so the background loop never waits for the device.
//
// A batch's launch queues a host callback behind its work (ArmWake: cudaLaunchHostFunc) that
// wakes the thread the moment the device is done, so completion costs no polling delay. While a
// batch waits, the thread also polls its done event, its communicator's asynchronous error
// (ncclCommGetAsyncError) and its deadline: every 10 ms when every batch it watches has its
// callback, else with a backoff from 10 us to 1 ms (a platform without host callbacks). A faulted
// event, a communicator error or a passed deadline is fatal for the whole GPU data plane:
// `abort_all` aborts every communicator (so no NCCL kernel stays stuck), every batch in flight and
// every later one fails with Unavailable naming the batch and the cause, and failure() reports it,
// so that the background loop stops and fails everything else pending with the same status.
//
// Batches complete in any order (different streams progress independently). Callbacks run on
// the completion thread, through `deliver`.
//
// Thread-safety: thread-safe. Push and Drain are called by the background thread; Fail and
// failure() by any thread.
#ifndef CHORUS_RUNTIME_GPU_GPU_COMPLETION_QUEUE_H_
#define CHORUS_RUNTIME_GPU_GPU_COMPLETION_QUEUE_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"

#include "base/mutex.h"
#include "ops/gpu_platform.h"
#include "runtime/gpu/gpu_batch.h"

namespace chorus::runtime {

class GpuCompletionQueue {
 public:
  // Completes entries: forgets their names, runs their callbacks, completes their handles.
  // Empties both vectors.
  using DeliverFn = std::function<void(std::vector<std::unique_ptr<TensorEntry>>* entries,
                                       std::vector<OpResult>* results)>;
  // Aborts every communicator of the data plane (GpuCommunicator::Abort is thread-safe).
  using AbortFn = std::function<void()>;

  GpuCompletionQueue(std::shared_ptr<ops::gpu::GpuPlatform> platform, DeliverFn deliver,
                     AbortFn abort_all);
  // Drains (see Drain), then stops the thread.
  ~GpuCompletionQueue();
  GpuCompletionQueue(const GpuCompletionQueue&) = delete;
  GpuCompletionQueue& operator=(const GpuCompletionQueue&) = delete;

  // Queues on `stream`, behind `batch`'s work, the host callback that wakes the completion
  // thread; sets batch.wakes when the platform took it. Call before Push.
  void ArmWake(GpuBatch& batch, ops::gpu::StreamHandle stream);
  // Hands a launched batch over. After a failure the batch fails at once.
  void Push(GpuBatch batch) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until every pushed batch has completed or failed.
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);
  // Makes the data plane fail with `status` (the first failure wins): aborts the
  // communicators and fails what is in flight. Does not wait.
  void Fail(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // OK until a failure.
  absl::Status failure() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void ThreadMain();
  // Polls `batch`; true when it is finished (delivered or failed).
  bool Poll(GpuBatch& batch);
  // After a failure: true once the batch's device work is over, or has had long enough.
  bool Drained(GpuBatch& batch);
  void Finish(GpuBatch& batch, const absl::Status& status);
  // Records the first failure and aborts the communicators (once).
  void SetFailure(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);

  // What wakes the completion thread: Push, Fail, the destructor and the device's host
  // callbacks ring it. Shared with the callbacks, which may run after the queue is gone.
  class Doorbell;
  static void RingFromDevice(void* doorbell);

  const std::shared_ptr<ops::gpu::GpuPlatform> platform_;
  const DeliverFn deliver_;
  const AbortFn abort_all_;
  const std::shared_ptr<Doorbell> doorbell_;

  mutable Mutex mu_;
  std::condition_variable cv_;  // "nothing in flight", for Drain
  std::vector<GpuBatch> incoming_ ABSL_GUARDED_BY(mu_);
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // pushed and not yet finished
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_GPU_GPU_COMPLETION_QUEUE_H_
