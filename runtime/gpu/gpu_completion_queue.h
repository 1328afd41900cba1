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
// The background loop parks the batches it launches in a cycle and settles them at the cycle's
// end (Park, Settle): a batch whose device work is done by then (a small one, on a fast device)
// completes on the loop thread, without waking this thread; the others are handed to it.
//
// Batches complete in any order (different streams progress independently). Callbacks run on
// the completion thread, or on the loop's for a batch settled done, through `deliver`.
//
// Thread-safety: thread-safe. Park, Settle and Drain are called by the background thread; Fail and
// failure() by any thread.
#ifndef CHORUS_RUNTIME_GPU_GPU_COMPLETION_QUEUE_H_
#define CHORUS_RUNTIME_GPU_GPU_COMPLETION_QUEUE_H_

#include <condition_variable>
#include <cstdint>
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
  // Completes a batch's entries: forgets their names, runs their callbacks, completes their
  // handles; ends the batch's flight record (GpuBatch::flight_token). Empties both vectors.
  using DeliverFn = std::function<void(std::vector<std::unique_ptr<TensorEntry>>* entries,
                                       std::vector<OpResult>* results, int64_t flight_token)>;
  // Aborts every communicator of the data plane (GpuCommunicator::Abort is thread-safe).
  using AbortFn = std::function<void()>;

  GpuCompletionQueue(std::shared_ptr<ops::gpu::GpuPlatform> platform, DeliverFn deliver,
                     AbortFn abort_all);
  // Drains (see Drain), then stops the thread.
  ~GpuCompletionQueue();
  GpuCompletionQueue(const GpuCompletionQueue&) = delete;
  GpuCompletionQueue& operator=(const GpuCompletionQueue&) = delete;

  // Queues on `stream`, behind `batch`'s work, the host callback that wakes the completion
  // thread; sets batch.wakes when the platform took it. Call before Park.
  void ArmWake(GpuBatch& batch, ops::gpu::StreamHandle stream);
  // Hands a launched batch over, to be settled (below) by the caller before it sleeps; the
  // completion thread does not know of it until then. The background loop parks the batches it
  // launches in a cycle and settles them at the cycle's end.
  void Park(GpuBatch batch) ABSL_LOCKS_EXCLUDED(mu_);
  // The parked batches: those whose device work is already done complete here, on the calling
  // thread (a batch whose device work ended within the cycle costs no hand-off to the
  // completion thread and no wake-up of it); the rest go to the completion thread.
  void Settle() ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until every pushed or parked batch has completed or failed (settles first).
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

  // What wakes the completion thread: Settle, Fail, the destructor and the device's host
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
  std::vector<GpuBatch> parked_ ABSL_GUARDED_BY(mu_);  // Park'ed, not yet settled
  // The batches a Settle works on (the background thread's only: it settles and drains), kept
  // with parked_'s buffer so that settling a cycle's batches allocates nothing.
  std::vector<GpuBatch> settling_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // pushed or parked and not yet finished
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_GPU_GPU_COMPLETION_QUEUE_H_
