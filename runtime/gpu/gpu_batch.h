// File: runtime/gpu/gpu_batch.h
//
// One fused response launched on a GPU stream, from the moment its work is queued on the
// device until its callbacks fire: what the completion thread (gpu_completion_queue.h) watches.
//
// Thread-safety: a plain value, owned by one thread at a time (built by the background thread,
// then handed to the completion thread).
#ifndef CHORUS_RUNTIME_GPU_GPU_BATCH_H_
#define CHORUS_RUNTIME_GPU_GPU_BATCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "chorus/chorus.h"
#include "ops/gpu_platform.h"
#include "runtime/progress/progress_watchdog.h"
#include "runtime/submit/tensor_entry.h"

namespace chorus::runtime {

struct GpuBatch {
  int device = 0;
  // The batch's flight record (FlightRecorder::Begin; -1: none), ended when it is delivered.
  int64_t flight_token = -1;
  // Recorded on the chorus stream after the batch's last work (copy-out): done means every
  // output is final on the device.
  ops::gpu::EventHandle done = nullptr;
  // A host callback queued after `done` wakes the completion thread (GpuCompletionQueue::ArmWake).
  bool wakes = false;
  // The communicators the batch's collectives run on (the lane's; a hierarchical allreduce's
  // local and cross ones too), polled for asynchronous errors while the batch waits. Borrowed:
  // the GPU data plane keeps them alive until the completion queue is drained.
  std::vector<ops::gpu::GpuCommunicator*> communicators;
  // For error messages: "allreduce of 3 tensors ('a', 'b', 'c')".
  std::string what;
  // This rank's entries of the batch and their results (parallel vectors).
  std::vector<std::unique_ptr<TensorEntry>> entries;
  std::vector<OpResult> results;
  // Device buffers used only by this batch, freed once it is done.
  std::vector<void*> scratch;
  // Past this, the batch is declared stuck (Config::no_progress_timeout from its launch), with
  // this report (DescribeNoProgress; Note [No-progress bound]): its rank, bound and peers are set
  // at the launch, what did not complete (the device) and the work (`what`) only then.
  absl::Time deadline = absl::InfiniteFuture();
  NoProgressReport stuck;
  // Once the data plane failed: how long the batch may still wait for its queued device work
  // (which an abort lets finish) before its entries fail anyway.
  absl::Time abandon_at = absl::InfinitePast();
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_GPU_GPU_BATCH_H_
