// File: chorus/chorus.h
//
// The public C++ API of chorus: one process-wide runtime that runs named collectives
// asynchronously on a background thread.
//
//   CHORUS_RETURN_IF_ERROR(chorus::Init());
//   chorus::OpRequest req;
//   req.type = chorus::OpType::kAllreduce;
//   req.name = "layer1.weight.grad";
//   req.input = {grad.data(), chorus::DataType::kFloat32, {1024}};
//   req.reduce_op = chorus::ReduceOp::kAverage;
//   absl::StatusOr<chorus::Handle> h = chorus::Enqueue(std::move(req));
//   ...
//   absl::Status st = chorus::Wait(*h);  // the gradient now holds the average over all ranks
//
// Thread-safety: every function here is thread-safe. Enqueue never blocks on the network; Wait
// blocks the calling thread only. Callbacks run on the background thread (GPU ops: on the GPU
// completion thread, or on the background thread when the device work was done by the end of the
// cycle that launched it) and must not block or call Wait.
#ifndef CHORUS_CHORUS_H_
#define CHORUS_CHORUS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "chorus/types.h"

namespace chorus {

// Where this process sits in the job. local_* count the ranks on this host; cross_* count the
// hosts, as seen by the ranks that have this local rank.
struct Topology {
  int32_t rank = 0;
  int32_t size = 1;
  int32_t local_rank = 0;
  int32_t local_size = 1;
  int32_t cross_rank = 0;
  int32_t cross_size = 1;
  bool is_homogeneous = true;  // every host runs the same number of ranks
};

// A buffer the runtime allocated for an op's output (allgather, alltoall, reducescatter):
// host memory, or device memory for an op on GPU tensors (on the input's device). Immutable
// once the op completes; shared so that bindings can hand it out without a copy. The memory is
// released with the last reference.
class OutputBuffer {
 public:
  // `bytes` bytes of host memory, uninitialised.
  explicit OutputBuffer(size_t bytes)
      : host_(new std::byte[bytes]), data_(host_.get()), size_(bytes) {}
  // Adopts `data` (`bytes` bytes on `device`); `release(data)` runs on destruction.
  OutputBuffer(std::byte* data, size_t bytes, int32_t device,
               std::function<void(std::byte*)> release)
      : data_(data), size_(bytes), device_(device), release_(std::move(release)) {}
  ~OutputBuffer() {
    if (release_) release_(data_);
  }
  OutputBuffer(const OutputBuffer&) = delete;
  OutputBuffer& operator=(const OutputBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int32_t device() const { return device_; }  // kCpuDevice for host memory

 private:
  std::unique_ptr<std::byte[]> host_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  int32_t device_ = kCpuDevice;
  std::function<void(std::byte*)> release_;
};

// One collective submitted by this rank. Every rank of the process set submits an op with the
// same `name`, `type` and compatible parameters; ranks may submit in any order.
struct OpRequest {
  OpType type = OpType::kAllreduce;
  // Unique among this rank's in-flight ops; identical on every rank. Not empty, except for
  // barrier, join and the process-set ops, which are named by the runtime when left empty.
  std::string name;
  // allreduce, allgather, alltoall, reducescatter: read only. broadcast: read on the root,
  // overwritten with the root's data elsewhere. Unused by barrier and join.
  TensorView input;
  // allreduce only: where the result goes, same dtype and element count as `input`. Leave
  // `output.data` null to reduce in place into `input`.
  TensorView output;
  // allreduce and reducescatter.
  ReduceOp reduce_op = ReduceOp::kSum;
  // allreduce and reducescatter: the input is multiplied by `prescale_factor` before the
  // reduction and the result by `postscale_factor` after it (Average adds 1/size on top,
  // size being the process set's). Integer tensors are scaled in double precision and
  // truncated toward zero, so an integer Average is the truncated mean.
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  // broadcast: the root's world rank (as in Horovod), which must belong to the process set;
  // otherwise the op is refused on every rank that submits it.
  int32_t root_rank = 0;
  int32_t process_set_id = kGlobalProcessSetId;
  // alltoall: rows (first-dimension slices) sent to each rank of the process set, in rank
  // order; empty means an equal split (the first dimension must then divide evenly).
  std::vector<int64_t> splits;
  // add-process-set only: the world ranks of the new set, ascending.
  std::vector<int32_t> process_set_ranks;
  // GPU tensors: the framework stream (a cudaStream_t; null is the legacy default stream) on
  // which `input` (and `output`) are produced. Enqueue records an event on it; chorus reads the
  // tensors only after that event. The op's callback runs once the result is complete on the
  // device, so the framework may use it on any stream afterwards.
  void* stream = nullptr;
  // allreduce of float32 GPU tensors only: the dtype the data is reduced and sent in, float16
  // or bfloat16 (compression inside chorus). The copy into the fusion buffer casts down (with
  // the prescale), the reduction runs in that dtype, the copy out casts back (with the
  // postscale), all in the batched copy kernels. Unset: the input's dtype.
  std::optional<DataType> wire_dtype;
};

// What an op produced. `status` is OK on success; otherwise its code says why:
// InvalidArgument (ranks disagree, bad input), FailedPrecondition (not initialised),
// DeadlineExceeded (stall timeout), Aborted (shutdown), Unavailable (peer lost), Internal (bug).
struct OpResult {
  absl::Status status;
  // allgather, alltoall, reducescatter: the output, row-major, of shape `output_shape`.
  std::shared_ptr<OutputBuffer> output;
  std::vector<int64_t> output_shape;
  // alltoall: rows received from each rank of the process set.
  std::vector<int64_t> received_splits;
  // join: the world rank that joined last.
  int32_t last_joined_rank = -1;
  // add-process-set: the id of the new set.
  int32_t process_set_id = -1;
};

using Handle = int64_t;
// Runs when the op completes, on the background thread (GPU ops: on the GPU completion
// thread); must not block.
using DoneCallback = std::function<void(const OpResult&)>;

struct InitOptions {
  // An MPI communicator (MPI_Comm*, borrowed for the runtime's lifetime) to run on instead of
  // MPI_COMM_WORLD; null uses the world. MPI is initialised by chorus unless already initialised.
  const void* mpi_comm = nullptr;
  // Process sets created during init, each a list of world ranks; ids 1, 2, ... in this order.
  std::vector<std::vector<int32_t>> process_sets;
};

// Starts the runtime: reads the CHORUS_* environment (a bad value is an InvalidArgument naming
// the variable), initialises MPI if needed and starts the background thread. Collective: every
// rank calls it. Calling it again while initialised is a no-op returning OK.
absl::Status Init(const InitOptions& options = {});

// Stops the runtime. As in Horovod, a shutdown on any rank stops every rank after the current
// cycle: ops still pending anywhere complete with Aborted, and later ops on the other ranks get
// FailedPrecondition until they shut down too. So every rank should call it, after its last
// op. Blocks until this rank's background thread has stopped. Safe to call when not initialised
// (no-op). Init may be called again afterwards (collectively).
// `cause`: why this process stops, where it stops for a failure (chorus.torch passes the
// uncaught exception, "RuntimeError: out of memory"): the other ranks' ops that fail because
// of this shutdown say it, with this rank and its host.
absl::Status Shutdown(std::string cause = "");

// Note [Re-forming in place]: an elastic job's reset keeps the runtime and changes its world.
//
// Suspend stops the background loop as Shutdown does (collective over the current world; after
// a failure the loop has stopped already) but keeps the runtime: IsInitialized() stays true,
// handles can still be released (with the error of their op), and new ops fail with
// FailedPrecondition until Reform(). As with Shutdown, a Suspend on any rank stops every rank
// after the current cycle: ops submitted there later fail too, so every rank should submit
// what it must before a reset begins anywhere. Idempotent. FailedPrecondition when not
// initialised.
absl::Status Suspend();

// Re-forms the runtime in place over the world the environment describes now (an elastic
// worker: the generation it adopted, see chorus_elastic_adopt_next; else the launcher's world
// again), Suspend()ing first if needed. Collective over the new world: its new processes call
// Init, the others Reform. Ranks, sizes and the timeline file follow the new world; the cache,
// negotiation state, fusion buffers and GPU communicators start afresh; process sets other than
// the global one are dropped (register them again). Needs a runtime initialised on
// MPI_COMM_WORLD or through a launcher's rendezvous (not on a communicator of the caller's:
// FailedPrecondition). On error chorus is shut down (Init may be called again).
absl::Status Reform();

bool IsInitialized();

// FailedPrecondition when not initialised.
absl::StatusOr<Topology> GetTopology();

// Submits one op; returns its handle at once. Errors detected locally (bad arguments, a
// duplicate in-flight name, a process set this rank is not in, not initialised) are returned
// here and no handle is created. `done`, if set, runs once on completion, before Wait returns.
absl::StatusOr<Handle> Enqueue(OpRequest request, DoneCallback done = nullptr);
// Enqueue that takes `request`'s contents and leaves it holding spare buffers, its fields
// unspecified (success or not) until refilled: a caller that submits every op from one
// OpRequest it refills allocates nothing per op in a steady loop.
absl::StatusOr<Handle> EnqueueFrom(OpRequest& request, DoneCallback done = nullptr);

// Note [Registered ops] (runtime/submit/op_slots.h): an allreduce that a training step submits
// every time under the same name and parameters (a gradient's) can be registered once. Each
// submission then costs a few atomic operations on the submitting thread (no allocation,
// hashing, string copy or lock), and the background loop finds the op's negotiated response
// through its slot.
//
//   CHORUS_ASSIGN_OR_RETURN(chorus::OpSlot slot, chorus::RegisterOp(req));  // once
//   ...
//   CHORUS_ASSIGN_OR_RETURN(chorus::Handle h, chorus::Submit(slot, {grad.data()}));  // each step
//   CHORUS_RETURN_IF_ERROR(chorus::Release(h).status());
using OpSlot = int32_t;

// The tensors of one submission of a registered op: Submit(slot, {grad.data()}) for an
// in-place op.
struct SubmitArgs {
  SubmitArgs() = default;
  SubmitArgs(void* input_data, void* output_data = nullptr)  // NOLINT: implicit on purpose
      : input(input_data), output(output_data) {}

  // The input's data: the dtype, shape and device registered. Not null unless it has no
  // elements.
  void* input = nullptr;
  // Where the result goes (same dtype, shape and device); null reduces in place into `input`.
  // Must be null if the op was registered without an output, and set if it was.
  void* output = nullptr;
  // GPU tensors: the stream that produces them, as OpRequest::stream.
  void* stream = nullptr;
  // As Enqueue's.
  DoneCallback done;
};

// Checks `request` as Enqueue does and registers it; returns its slot. Only allreduces are
// registered (InvalidArgument otherwise). `request.input.data` (and `output.data`) stand for
// the tensors of later submissions, which pass their own. While registered, the op's name is
// in flight whenever its slot's op or an Enqueue of that name is. InvalidArgument when an op
// of this name is in flight or registered already.
absl::StatusOr<OpSlot> RegisterOp(OpRequest request);
// Submits the registered op on `args`' tensors and returns its handle, used as Enqueue's are.
// The op is checked again only when the world re-formed or process sets changed since its
// last check. InvalidArgument while the slot's op (or an Enqueue of its name) is in flight or
// for a null tensor; AlreadyExists while the handle of its last submission is not released;
// NotFound for a slot that is not registered (in this runtime: Init forgets them);
// FailedPrecondition when chorus is not running.
absl::StatusOr<Handle> Submit(OpSlot slot, const SubmitArgs& args);
// Forgets a registered op (its slot may be given to a later registration). FailedPrecondition
// while its op is in flight or its last handle unreleased; NotFound for no such slot.
absl::Status UnregisterOp(OpSlot slot);

// Submits ops that are negotiated and executed as one unit (grouped allreduce, allgather or
// reducescatter); either all are accepted or none. Handles come back in request order.
absl::StatusOr<std::vector<Handle>> EnqueueGroup(std::vector<OpRequest> requests);

// True once the op has completed (successfully or not). NotFound for an unknown handle.
absl::StatusOr<bool> Poll(Handle handle);

// Blocks until the op completes and returns its status; the handle stays valid.
absl::Status Wait(Handle handle);

// Waits for the op, then returns its result and forgets the handle.
absl::StatusOr<OpResult> Release(Handle handle);
// Release of a completed op; nullopt, and the handle stays valid, while the op is in flight.
// NotFound for an unknown handle.
absl::StatusOr<std::optional<OpResult>> TryRelease(Handle handle);

// The controller this process runs on: "MPI" (under mpirun) or "UCX" (chorusrun --gloo, or
// CHORUS_CONTROLLER=ucx).
absl::StatusOr<std::string> ControllerName();

// This process's collectives so far, by op, over every world (an elastic job's re-forms
// included), as JSON (docs/metrics.md): what chorus.metrics serves to Prometheus. Local; never
// waits for the background loop. Empty totals while the flight recorder is off
// (CHORUS_FLIGHT_RECORDER_ENTRIES=0).
absl::StatusOr<std::string> MetricsJson();

// Whether this build has the CUDA/NCCL data plane for GPU tensors (whether or not a GPU is
// visible). Needs no init.
bool CudaBuilt();
// NCCL_VERSION_CODE of the nccl.h this build was compiled with (22809 for NCCL 2.28.9), or 0 for
// a build without the GPU data plane. Needs no init.
int NcclBuildVersion();

// Timelines (docs/timeline.md): records this rank's events into `path` (rank 0 only unless
// CHORUS_TIMELINE_ALL_RANKS or a `{rank}` placeholder) from the next background cycle.
// REQUIRES: CHORUS_TIMELINE (or HOROVOD_TIMELINE) is set, to a path or DYNAMIC, as in Horovod
// (FailedPrecondition otherwise). Not collective.
absl::Status StartTimeline(const std::string& path, bool mark_cycles = false);
// Ends the recording; returns once the file is complete.
absl::Status StopTimeline();

}  // namespace chorus

#endif  // CHORUS_CHORUS_H_
