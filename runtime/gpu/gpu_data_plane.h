// File: runtime/gpu/gpu_data_plane.h
//
// The GPU half of the data plane, owned by the background loop: per (process set, stream index)
// a Lane (a chorus stream, a communicator, a device fusion buffer) created on first use, and the
// completion thread that finishes launched batches. A launch reads a tensor only after its
// ready event and never waits for the device; the parts of it that talk over the set's CPU
// backend run on every member whatever its state, so no member waits for another there. A
// device-side failure fails the whole GPU data plane (failure()): every communicator is
// aborted and every batch in flight fails with Unavailable. Protocol: Note [GPU launch] in
// docs/gpu.md.
//
// Thread-safety: Launch, Fail and the destructor run on the background thread; failure() is
// thread-safe. Callbacks of GPU ops run on the completion thread.
#ifndef CHORUS_RUNTIME_GPU_GPU_DATA_PLANE_H_
#define CHORUS_RUNTIME_GPU_GPU_DATA_PLANE_H_

#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "base/mutex.h"
#include "ops/collective_backend.h"
#include "ops/cuda/batched_copy_plan.h"
#include "ops/gpu_platform.h"
#include "ops/hierarchical/hierarchical_backend.h"
#include "runtime/gpu/gpu_completion_queue.h"
#include "runtime/gpu/ready_waits.h"
#include "runtime/message.h"

namespace chorus::runtime {

class GpuDataPlane {
 public:
  // `bound`: a launched batch not done after this long is stuck (Config::no_progress_timeout;
  // zero: never), reported as this world rank's no-progress report.
  GpuDataPlane(std::shared_ptr<ops::gpu::GpuPlatform> platform, const SharedConfig& shared,
               absl::Duration bound, int32_t world_rank, GpuCompletionQueue::DeliverFn deliver);
  // Waits for every launched batch (they complete, or fail after a Fail), then destroys the
  // communicators, streams and fusion buffers.
  ~GpuDataPlane();
  GpuDataPlane(const GpuDataPlane&) = delete;
  GpuDataPlane& operator=(const GpuDataPlane&) = delete;

  // Launches `response` (allreduce, allgather, broadcast, alltoall or reducescatter on GPU
  // tensors) of process set `set_id`, whose CPU backend `set_backend` carries the set-up and
  // the alltoall row counts. entries[i] is this rank's entry for response.names[i], or null
  // where it holds none (a joined rank in an allreduce). The entries are always completed
  // (through `deliver`): later by the completion thread, or before returning on error.
  // A non-OK status is a failure of the set's CPU backend (fatal, as on the CPU path).
  // `hierarchy`: the set's hierarchical CPU backend (whose modes are this batch's), or null.
  // `flight_token`: the batch's flight record (FlightRecorder::Begin), passed to `deliver`.
  // An allreduce ChooseAllreduce makes hierarchical runs as NCCL reduce-scatter within the
  // host, NCCL allreduce across hosts and NCCL allgather within the host, on the lane's local
  // and cross communicators (joined over the hierarchy's local and cross CPU backends on its
  // first such launch). Other collectives run on the lane's communicator over the whole set
  // (an allgather too: as in Horovod, only the CPU allgather is hierarchical).
  // `set_ranks`: the set's world ranks (named in the report of a batch that gets stuck).
  // REQUIRES: this rank is a member of the set.
  absl::Status Launch(const Response& response, int32_t set_id, ops::CollectiveBackend& set_backend,
                      const std::vector<int32_t>& set_ranks,
                      std::vector<std::unique_ptr<TensorEntry>> entries,
                      ops::HierarchicalBackend* hierarchy = nullptr, int64_t flight_token = -1);

  // Process set `set_id` is being removed (at the same point of the global order on every
  // member): waits for the batches in flight, then destroys the set's lanes.
  void RemoveSet(int32_t set_id);

  // Aborts the communicators and fails everything in flight with `status` (the runtime is
  // stopping after another failure).
  void Fail(absl::Status status);
  // Hands the batches launched since the last call to the completion thread, completing here
  // those whose device work is done already (GpuCompletionQueue::Settle). The loop calls it at
  // the end of each cycle, before it sleeps.
  void Settle();
  // OK until the GPU data plane failed.
  absl::Status failure() const { return completions_->failure(); }

 private:
  struct Lane {
    int device = 0;
    ops::gpu::StreamHandle stream = nullptr;
    std::unique_ptr<ops::gpu::GpuCommunicator> communicator;
    // Hierarchical allreduce: the communicators of this member's host and of the members with
    // its local index on every host; null until the lane's first hierarchical launch.
    std::unique_ptr<ops::gpu::GpuCommunicator> local;
    std::unique_ptr<ops::gpu::GpuCommunicator> cross;
    void* fusion = nullptr;  // device fusion buffer
    int64_t fusion_bytes = 0;
    // The lane's recent copy plans (fusion-buffer slices and distinct tensors: no overlap).
    ops::gpu::CopyPlanCache plans{ops::gpu::PlanOptions{.check_overlap = false}};
  };
  class Launcher;  // one launch (gpu_data_plane.cc)

  // The lane of the set's next launch, created on first use (collective over the set).
  // `*index` is its stream index, set whether or not the lane could be created.
  absl::StatusOr<Lane*> GetLane(int32_t set_id, int device, ops::CollectiveBackend& set_backend,
                                int32_t* index);
  // Joins the lane's local and cross communicators over the hierarchy's CPU backends, once per
  // lane: on every member whatever its state (`lane` null where the lane could not be made), so
  // none waits for another; every member agrees over the set whether all joined. An error leaves
  // the lane without them.
  absl::Status JoinHierarchy(Lane* lane, int device, ops::CollectiveBackend& set_backend,
                             ops::HierarchicalBackend& hierarchy);
  absl::StatusOr<std::unique_ptr<ops::gpu::GpuCommunicator>> JoinCommunicator(
      int device, bool ready, ops::CollectiveBackend& set_backend);
  // The lane's fusion buffer with room for `bytes` bytes.
  absl::StatusOr<void*> FusionBuffer(Lane& lane, int64_t bytes);
  void AbortAll();
  // Keeps only the batch's held entries (a joined rank's slots carry none), with their results.
  static void DropJoinedSlots(GpuBatch& batch);
  // Completes the batch's held entries now, each with `status`.
  void DeliverFailed(GpuBatch& batch, const absl::Status& status);
  // Destroys the lane's communicator, fusion buffer and stream. REQUIRES: nothing in flight.
  void DestroyLane(Lane& lane);

  const std::shared_ptr<ops::gpu::GpuPlatform> platform_;
  const SharedConfig shared_;
  const absl::Duration bound_;
  const int32_t rank_;  // in the world
  const GpuCompletionQueue::DeliverFn deliver_;

  std::map<std::pair<int32_t, int32_t>, Lane> lanes_;  // (set id, stream index)
  std::map<int32_t, int64_t> launches_;                // per set: GPU responses launched
  // (set id, stream index) whose hierarchical communicators were set up (or tried: a failure
  // fails the data plane), the same on every member.
  std::set<std::pair<int32_t, int32_t>> hierarchy_joined_;
  int device_ = -1;  // the GPU of the first lane (a process drives one GPU)
  // Every communicator, for AbortAll from the completion thread.
  Mutex communicators_mu_;
  std::vector<ops::gpu::GpuCommunicator*> communicators_ ABSL_GUARDED_BY(communicators_mu_);

  // Launch scratch, kept so that a launch allocates none of it (Launcher::Run).
  std::vector<ReadyMark> marks_;
  std::vector<TensorEntry*> marked_;
  std::vector<size_t> waits_;

  std::unique_ptr<GpuCompletionQueue> completions_;  // last: its thread stops first
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_GPU_GPU_DATA_PLANE_H_
