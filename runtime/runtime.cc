#include "runtime/runtime.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "base/logging.h"
#include "base/op_kind.h"
#include "base/status_macros.h"
#include "runtime/execute/collective_math.h"
#include "runtime/message.h"
#include "runtime/negotiate/process_set_ranks.h"

namespace chorus::runtime {
namespace {

std::string DeviceName(int32_t device) {
  return device == kCpuDevice ? std::string("cpu") : absl::StrCat("GPU ", device);
}

absl::Status Invalid(const OpRequest& r, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(OpTypeName(r.type), " of tensor '", r.name, "': ", what));
}

absl::Status ValidateTensor(const OpRequest& r, const TensorView& t, const char* which) {
  if (!IsValidDataType(static_cast<int32_t>(t.dtype))) {
    return Invalid(
        r, absl::StrCat(which, " has an unknown dtype (", static_cast<int32_t>(t.dtype), ")"));
  }
  for (int64_t d : t.shape) {
    if (d < 0)
      return Invalid(
          r, absl::StrCat(which, " has a negative dimension in shape ", ShapeToString(t.shape)));
  }
  if (!IsValidShape(t.shape)) {
    return Invalid(r, absl::StrCat(which, " shape ", ShapeToString(t.shape),
                                   " is too large: its non-zero dimensions multiply past 2^56"));
  }
  if (t.data == nullptr && t.num_elements() > 0) {
    return Invalid(r, absl::StrCat(which, " has no data but shape ", ShapeToString(t.shape)));
  }
  if (t.device < kCpuDevice) {
    return Invalid(r, absl::StrCat(which, " has an invalid device ", t.device));
  }
  return absl::OkStatus();
}

bool Reduces(OpType type) { return KindOf(type).reduces; }

// allreduce, reducescatter: a known reduce op other than Adasum, on a reducible dtype.
absl::Status CheckReduceOp(const OpRequest& r) {
  if (!Reduces(r.type)) return absl::OkStatus();
  if (!IsValidReduceOp(static_cast<int32_t>(r.reduce_op))) {
    return Invalid(r, absl::StrCat("unknown reduce op ", static_cast<int32_t>(r.reduce_op)));
  }
  if (r.reduce_op == ReduceOp::kAdasum) {
    return absl::UnimplementedError(
        absl::StrCat(OpTypeName(r.type), " of tensor '", r.name, "': Adasum is not implemented"));
  }
  if (!IsReducible(r.input.dtype)) {
    return Invalid(r, absl::StrCat("cannot reduce ", DataTypeName(r.input.dtype), " tensors"));
  }
  return absl::OkStatus();
}

// allreduce with an output tensor: a valid tensor of the input's dtype, element count and
// device.
absl::Status CheckAllreduceOutput(const OpRequest& r) {
  if (r.type != OpType::kAllreduce || r.output.data == nullptr) return absl::OkStatus();
  if (r.output.dtype != r.input.dtype || r.output.num_elements() != r.input.num_elements()) {
    return Invalid(
        r, absl::StrCat("output (", DataTypeName(r.output.dtype), " ",
                        ShapeToString(r.output.shape), ") does not match input (",
                        DataTypeName(r.input.dtype), " ", ShapeToString(r.input.shape), ")"));
  }
  CHORUS_RETURN_IF_ERROR(ValidateTensor(r, r.output, "output"));
  if (r.output.device != r.input.device) {
    return Invalid(r, absl::StrCat("output is on ", DeviceName(r.output.device), " but input on ",
                                   DeviceName(r.input.device)));
  }
  return absl::OkStatus();
}

// A wire dtype applies only to allreduces of float32 GPU tensors, in float16 or bfloat16.
absl::Status CheckWireDtype(const OpRequest& r) {
  if (!r.wire_dtype.has_value()) return absl::OkStatus();
  const DataType w = *r.wire_dtype;
  if (r.type == OpType::kAllreduce && r.input.dtype == DataType::kFloat32 &&
      r.input.device != kCpuDevice && (w == DataType::kFloat16 || w == DataType::kBfloat16)) {
    return absl::OkStatus();
  }
  return Invalid(r, absl::StrCat("a wire dtype (", DataTypeName(w),
                                 ") applies to allreduces of float32 GPU tensors, in "
                                 "float16 or bfloat16; this is a ",
                                 DataTypeName(r.input.dtype), " ", OpTypeName(r.type), " on ",
                                 DeviceName(r.input.device),
                                 " (compress on the host with Compression.fp16 instead)"));
}

// GPU reductions run on NCCL, which has no int16.
absl::Status CheckGpuReduction(const OpRequest& r) {
  if (Reduces(r.type) && r.input.device != kCpuDevice && r.input.dtype == DataType::kInt16) {
    return Invalid(r, "GPU reductions of int16 tensors are not supported (NCCL has no int16)");
  }
  return absl::OkStatus();
}

// allgather, alltoall and reducescatter split or concatenate along the first dimension.
absl::Status CheckHasFirstDimension(const OpRequest& r) {
  if (KindOf(r.type).needs_first_dim && r.input.shape.empty()) {
    return Invalid(r, "needs a tensor with at least one dimension, not a scalar");
  }
  return absl::OkStatus();
}

// alltoall in a set of `set_size` ranks: without splits the first dimension divides evenly
// among the ranks; with splits, one non-negative count per rank summing to it. REQUIRES: the
// input has a first dimension (CheckHasFirstDimension).
absl::Status CheckAlltoallSplits(const OpRequest& r, int set_size) {
  const int64_t rows = r.input.shape[0];
  if (AreValidSplits(r.splits, rows, static_cast<size_t>(set_size))) return absl::OkStatus();
  if (r.splits.empty()) {
    return Invalid(r, absl::StrCat("first dimension ", rows, " does not divide evenly among ",
                                   set_size, " ranks; pass splits"));
  }
  return Invalid(r,
                 absl::StrCat("splits [", absl::StrJoin(r.splits, ", "), "] must hold ", set_size,
                              " non-negative values summing to the first dimension ", rows));
}

// The wire request (what the coordinator negotiates) of `r` from rank `rank`. Ops without a
// tensor carry a uint8 dtype and no shape.
void FillWireRequest(const OpRequest& r, int32_t rank, const std::string& group_key,
                     int32_t group_size, Request* q) {
  q->request_rank = rank;
  q->type = r.type;
  q->name = r.name;
  q->dtype = r.input.dtype;
  q->shape = r.input.shape;
  q->reduce_op = r.reduce_op;
  q->prescale_factor = r.prescale_factor;
  q->postscale_factor = r.postscale_factor;
  q->root_rank = r.root_rank;
  q->device = r.input.device;
  q->process_set_id = r.process_set_id;
  q->group_key = group_key;
  q->group_size = group_size;
  q->splits = r.splits;
  q->process_set_ranks = r.process_set_ranks;
  q->wire_dtype = r.wire_dtype.has_value() ? static_cast<int32_t>(*r.wire_dtype) : -1;
  if (!IsDataOp(r.type)) {
    q->dtype = DataType::kUint8;
    q->shape.clear();
  }
}

}  // namespace

Runtime::Runtime(Config config)
    : config_(std::move(config)), stamp_submissions_(!config_.timeline.empty()) {}

std::unique_ptr<timeline::Timeline> Runtime::MakeTimeline(const Config& config,
                                                          const Topology& topology) {
  timeline::Timeline::Settings settings;
  settings.rank = topology.rank;
  settings.size = topology.size;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) settings.hostname = host;
  settings.all_ranks = config.timeline_all_ranks;
  settings.max_bytes = config.timeline_max_bytes;
  settings.queue_events = static_cast<size_t>(config.timeline_queue_events);
  settings.start_cycle = config.timeline_start_cycle;
  settings.stop_cycle = config.timeline_stop_cycle;
  return std::make_unique<timeline::Timeline>(std::move(settings));
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(
    Config config, std::unique_ptr<Controller> controller,
    std::vector<std::vector<int32_t>> process_sets,
    std::shared_ptr<ops::gpu::GpuPlatform> gpu_platform) {
  std::unique_ptr<Runtime> runtime(new Runtime(config));
  runtime->gpu_platform_ =
      gpu_platform != nullptr ? std::move(gpu_platform) : ops::gpu::DefaultGpuPlatform();
  MutexLock serial(&runtime->shutdown_mu_);
  WriterMutexLock world(&runtime->world_mu_);
  runtime->topology_ = controller->topology();
  runtime->controller_name_ = controller->name();
  runtime->timeline_ = MakeTimeline(config, runtime->topology_);
  CHORUS_RETURN_IF_ERROR(runtime->StartLoop(std::move(controller), std::move(process_sets)));
  return runtime;
}

absl::Status Runtime::StartLoop(std::unique_ptr<Controller> controller,
                                std::vector<std::vector<int32_t>> process_sets) {
  // The loop re-opens the queue once its handshake succeeded, before its first cycle (a closed
  // queue asks every rank to stop). Enqueues wait for world_mu_, held by the caller until the
  // loop has started (or failed to); registered ops are refused until the queue is open.
  loop_ = std::make_unique<BackgroundLoop>(config_, std::move(controller), &queue_, &entry_pool_,
                                           &slots_, &registry_, &handles_, timeline_.get(),
                                           gpu_platform_, &autotune_memory_, &metrics_);
  absl::Status started = loop_->Start(std::move(process_sets));
  if (!started.ok()) {
    queue_.Fail(absl::StrCat("chorus failed to start: ", started.ToString()));
    loop_.reset();  // its thread has exited
  }
  return started;
}

Runtime::~Runtime() {
  Shutdown();
  // Every op has completed: the registered ones' entries are back in their slots.
  slots_.ForEachEntry([this](TensorEntry& entry) { DropReadyEvent(entry); });
}

Topology Runtime::topology() const {
  ReaderMutexLock lock(&world_mu_);
  return topology_;
}

std::string Runtime::controller_name() const {
  ReaderMutexLock lock(&world_mu_);
  return controller_name_;
}

absl::Status Runtime::StartTimeline(const std::string& path, bool mark_cycles) {
  ReaderMutexLock lock(&world_mu_);
  if (config_.timeline.empty()) {
    return absl::FailedPreconditionError(
        "Set CHORUS_TIMELINE=DYNAMIC (or HOROVOD_TIMELINE=DYNAMIC) to enable dynamic timeline "
        "usage.");
  }
  if (path.empty()) return absl::InvalidArgumentError("start_timeline: the file path is empty");
  return timeline_->Start(path, mark_cycles);
}

std::string Runtime::MetricsJson() const {
  const BatchTotals totals = metrics_.Read();
  ReaderMutexLock lock(&world_mu_);
  return FormatBatchTotals(totals, topology_.rank, topology_.size, controller_name_);
}

absl::Status Runtime::StopTimeline() {
  ReaderMutexLock lock(&world_mu_);
  timeline_->Stop();
  return absl::OkStatus();
}

void Runtime::Shutdown(std::string why, std::string cause) {
  MutexLock lock(&shutdown_mu_);
  StopLoop(std::move(why), std::move(cause));
}

void Runtime::StopLoop(std::string why, std::string cause) {
  if (loop_ == nullptr) return;
  queue_.Close(std::move(why), std::move(cause));
  loop_.reset();  // joins the thread once every rank has agreed to stop
}

absl::Status Runtime::Reform(Config config, std::unique_ptr<Controller> controller) {
  MutexLock serial(&shutdown_mu_);
  StopLoop("chorus is re-forming its world");
  // No loop runs: nothing reads the old timeline or writes the registry any more, and the
  // queue is closed and empty (the loop failed what it held).
  std::unique_ptr<timeline::Timeline> timeline = MakeTimeline(config, controller->topology());
  {
    MutexLock lock(&name_mu_);
    auto_names_.clear();
  }
  WriterMutexLock world(&world_mu_);
  const Topology old = topology_;
  topology_ = controller->topology();
  controller_name_ = controller->name();
  config_ = std::move(config);
  stamp_submissions_.store(!config_.timeline.empty(), std::memory_order_relaxed);
  timeline_ = std::move(timeline);
  registry_.Clear();
  world_generation_.fetch_add(1, std::memory_order_release);
  CHORUS_LOG(INFO) << "re-forming in place: rank " << old.rank << " of " << old.size
                   << " becomes rank " << topology_.rank << " of " << topology_.size;
  return StartLoop(std::move(controller), {});
}

void Runtime::AutoName(OpRequest& request) {
  if (!request.name.empty()) return;
  const char* prefix = KindOf(request.type).default_name;
  if (prefix == nullptr) return;  // a tensor op: named by its caller
  // The k-th unnamed op of a kind and set gets the same name on every rank.
  MutexLock lock(&name_mu_);
  int64_t& counter = auto_names_[{static_cast<int32_t>(request.type), request.process_set_id}];
  request.name = absl::StrCat(prefix, ".", request.process_set_id, ".", counter++);
}

absl::StatusOr<std::unique_ptr<TensorEntry>> Runtime::MakeEntry(OpRequest& r,
                                                                const std::string& group_key,
                                                                int32_t group_size) {
  CHORUS_RETURN_IF_ERROR(ValidateRequest(r));
  std::unique_ptr<TensorEntry> entry = TranslateRequest(r, group_key, group_size);
  if (IsDataOp(entry->op.type) && entry->op.input.device != kCpuDevice) {
    CHORUS_RETURN_IF_ERROR(PrepareGpuEntry(*entry));
  }
  return entry;
}

absl::Status Runtime::ValidateRequest(OpRequest& r) {
  if (!IsValidOpType(static_cast<int32_t>(r.type))) {
    return absl::InvalidArgumentError(absl::StrCat("unknown op type ", static_cast<int32_t>(r.type),
                                                   " for tensor '", r.name, "'"));
  }
  AutoName(r);
  if (r.name.empty()) return Invalid(r, "tensor names must not be empty");
  CHORUS_ASSIGN_OR_RETURN(const ProcessSetView set, CheckProcessSetMembership(r));
  if (IsDataOp(r.type)) CHORUS_RETURN_IF_ERROR(ValidateDataOp(r, set));
  if (r.type == OpType::kAddProcessSet) {
    const absl::Status ranks = CheckProcessSetRanks(r.process_set_ranks, topology_.size);
    if (!ranks.ok()) return Invalid(r, std::string(ranks.message()));
  }
  return absl::OkStatus();
}

// The global set (every rank, from Start until Shutdown, never removed) needs no registry
// lookup: that is the common case, and the lookup takes a lock.
absl::StatusOr<Runtime::ProcessSetView> Runtime::CheckProcessSetMembership(
    const OpRequest& r) const {
  ProcessSetView set{r.process_set_id == kGlobalProcessSetId, topology_.size};
  if (r.type == OpType::kRemoveProcessSet && set.global) {
    return Invalid(r, "the global process set (id 0) cannot be removed");
  }
  if (r.type == OpType::kAddProcessSet || r.type == OpType::kJoin || set.global) return set;
  const ProcessSetRegistry::Membership found = registry_.Find(r.process_set_id, topology_.rank);
  if (!found.exists) {
    return Invalid(r, absl::StrCat("process set ", r.process_set_id, " does not exist"));
  }
  if (r.type != OpType::kRemoveProcessSet && !found.member) {
    std::optional<std::vector<int32_t>> ranks = registry_.Ranks(r.process_set_id);
    return Invalid(
        r, absl::StrCat("rank ", topology_.rank, " is not in process set ", r.process_set_id,
                        " (ranks [", absl::StrJoin(ranks.value_or(std::vector<int32_t>{}), ", "),
                        "])"));
  }
  set.size = found.size;
  return set;
}

absl::Status Runtime::ValidateDataOp(const OpRequest& r, const ProcessSetView& set) const {
  CHORUS_RETURN_IF_ERROR(ValidateTensor(r, r.input, "input"));
  CHORUS_RETURN_IF_ERROR(CheckReduceOp(r));
  CHORUS_RETURN_IF_ERROR(CheckAllreduceOutput(r));
  CHORUS_RETURN_IF_ERROR(CheckWireDtype(r));
  CHORUS_RETURN_IF_ERROR(CheckGpuReduction(r));
  CHORUS_RETURN_IF_ERROR(CheckHasFirstDimension(r));
  if (r.type == OpType::kBroadcast) CHORUS_RETURN_IF_ERROR(CheckRootRank(r, set.global));
  if (r.type == OpType::kAlltoall) CHORUS_RETURN_IF_ERROR(CheckAlltoallSplits(r, set.size));
  return absl::OkStatus();
}

std::unique_ptr<TensorEntry> Runtime::TranslateRequest(OpRequest& r, const std::string& group_key,
                                                       int32_t group_size) {
  std::unique_ptr<TensorEntry> entry = entry_pool_.Take();
  FillWireRequest(r, topology_.rank, group_key, group_size, &entry->request);
  // The entry takes the request; the request keeps the entry's emptied buffers for its refill.
  std::swap(entry->op, r);
  // Read only by the timeline (a rank's request known at submission) and the stall check of
  // cached entries (seconds-scale). Without a timeline the loop stamps the entry when it takes
  // it (one clock read per cycle), saving a clock read per op here.
  if (!config_.timeline.empty()) entry->enqueued_at = absl::Now();
  return entry;
}

// The root is a world rank (as in Horovod) that must belong to the op's process set. The check
// needs nothing from other ranks: ranks passing the same bad root all fail at once, none waits.
absl::Status Runtime::CheckRootRank(const OpRequest& r, bool global_set) const {
  if (global_set) {
    if (r.root_rank >= 0 && r.root_rank < topology_.size) return absl::OkStatus();
    return Invalid(
        r, absl::StrCat("root rank ", r.root_rank, " is outside [0, ", topology_.size, ")"));
  }
  if (registry_.Find(r.process_set_id, r.root_rank).member) return absl::OkStatus();
  const std::vector<int32_t> ranks =
      registry_.Ranks(r.process_set_id).value_or(std::vector<int32_t>{});
  return Invalid(r, absl::StrCat("root rank ", r.root_rank, " is not in process set ",
                                 r.process_set_id, " (ranks [", absl::StrJoin(ranks, ", "), "])"));
}

absl::Status Runtime::CheckGpuDevice(const OpRequest& r) {
  const int32_t device = r.input.device;
  absl::Status usable = gpu_platform_->CheckDevice(device);
  if (!usable.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(OpTypeName(r.type), " of tensor '", r.name,
                                                      "': input is on GPU ", device, ", but ",
                                                      usable.message()));
  }
  MutexLock lock(&gpu_mu_);
  if (gpu_device_ < 0) gpu_device_ = device;
  if (gpu_device_ != device) {
    return absl::FailedPreconditionError(absl::StrCat(
        OpTypeName(r.type), " of tensor '", r.name, "': input is on GPU ", device,
        ", but chorus drives one GPU per process and this one already uses GPU ", gpu_device_));
  }
  return absl::OkStatus();
}

absl::Status Runtime::RecordReadyEvent(TensorEntry& entry) {
  const OpRequest& r = entry.op;
  const int32_t device = r.input.device;
  // A registered op records its own event again (its last launch has waited on it already).
  ops::gpu::EventHandle event = entry.ready_event;
  if (event == nullptr) {
    CHORUS_ASSIGN_OR_RETURN(event, gpu_platform_->CreateEvent(device));
  }
  // acq_rel: an `end` below another record's `begin` means this record happened before that
  // one began (runtime/gpu/ready_waits.h).
  entry.ready_begin = ready_clock_.fetch_add(1, std::memory_order_acq_rel);
  absl::Status recorded = gpu_platform_->RecordEvent(device, event, r.stream);
  entry.ready_end = ready_clock_.fetch_add(1, std::memory_order_acq_rel);
  if (!recorded.ok()) {
    gpu_platform_->DestroyEvent(device, event);
    entry.ready_event = nullptr;
    return absl::Status(recorded.code(), absl::StrCat(OpTypeName(r.type), " of tensor '", r.name,
                                                      "': ", recorded.message()));
  }
  entry.ready_event = event;
  return absl::OkStatus();
}

void Runtime::DropReadyEvent(TensorEntry& entry) {
  if (entry.ready_event == nullptr) return;
  gpu_platform_->DestroyEvent(entry.op.input.device, entry.ready_event);
  entry.ready_event = nullptr;
}

absl::Status Runtime::PrepareGpuEntry(TensorEntry& entry) {
  CHORUS_RETURN_IF_ERROR(CheckGpuDevice(entry.op));
  return RecordReadyEvent(entry);
}

absl::StatusOr<OpSlot> Runtime::RegisterOp(OpRequest r) {
  if (r.type != OpType::kAllreduce) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpTypeName(r.type), " of tensor '", r.name,
                     "': only allreduces can be registered; submit other ops with Enqueue"));
  }
  auto entry = std::make_unique<TensorEntry>();
  uint64_t generation = 0, registry_version = 0;
  {
    ReaderMutexLock world(&world_mu_);
    // Read before the check: a change after it makes the first submission check again.
    generation = world_generation_.load(std::memory_order_acquire);
    registry_version = registry_.version();
    CHORUS_RETURN_IF_ERROR(ValidateRequest(r));
    FillWireRequest(r, topology_.rank, "", 0, &entry->request);
  }
  if (r.input.device != kCpuDevice) CHORUS_RETURN_IF_ERROR(CheckGpuDevice(r));
  entry->op = std::move(r);
  CHORUS_ASSIGN_OR_RETURN(const OpSlot id, slots_.Add(std::move(entry)));
  SlotTable::Slot& slot = *slots_.Find(id);
  slot.world_generation = generation;
  slot.registry_version = registry_version;
  absl::Status named = queue_.Register(slot.name, &slot.state);
  if (!named.ok()) {
    slots_.Recycle(id);
    return named;
  }
  slots_.Activate(id);
  return id;
}

absl::Status Runtime::UnregisterOp(OpSlot id) {
  CHORUS_RETURN_IF_ERROR(slots_.Remove(id));
  SlotTable::Slot& slot = *slots_.Find(id);
  queue_.Unregister(slot.name);
  DropReadyEvent(*slot.entry);
  slots_.Recycle(id);
  return absl::OkStatus();
}

absl::Status Runtime::Recheck(SlotTable::Slot& slot) {
  ReaderMutexLock world(&world_mu_);
  const uint64_t generation = world_generation_.load(std::memory_order_acquire);
  const uint64_t registry_version = registry_.version();
  TensorEntry& entry = *slot.entry;
  CHORUS_RETURN_IF_ERROR(ValidateRequest(entry.op));
  entry.request.request_rank = topology_.rank;  // a re-formed world numbers its ranks anew
  slot.world_generation = generation;
  slot.registry_version = registry_version;
  return absl::OkStatus();
}

absl::StatusOr<Handle> Runtime::Submit(OpSlot id, const SubmitArgs& args) {
  SlotTable::Slot* slot = nullptr;
  Handle handle = 0;
  CHORUS_RETURN_IF_ERROR(slots_.Claim(id, &slot, &handle));
  // The slot's entry is this thread's until it is pushed (or the claim undone).
  TensorEntry& entry = *slot->entry;
  entry.ResetForSubmission();
  entry.op.input.data = args.input;
  entry.op.output.data = args.output;
  entry.op.stream = args.stream;
  absl::Status status;
  if (args.input == nullptr && slot->elements > 0) {
    status = Invalid(entry.op, "input has no data (a null pointer) for a tensor with elements");
  } else if ((args.output != nullptr) != slot->has_output) {
    status = Invalid(entry.op, slot->has_output
                                   ? "registered with an output tensor, submitted without one"
                                   : "registered in place, submitted with an output tensor");
  } else if (slot->world_generation != world_generation_.load(std::memory_order_acquire) ||
             (entry.op.process_set_id != kGlobalProcessSetId &&
              slot->registry_version != registry_.version())) {
    status = Recheck(*slot);
  }
  if (status.ok() && entry.op.input.device != kCpuDevice) status = RecordReadyEvent(entry);
  if (status.ok()) {
    if (stamp_submissions_.load(std::memory_order_relaxed)) entry.enqueued_at = absl::Now();
    entry.handle = handle;
    if (args.done) entry.done = args.done;
    status = queue_.PushRegistered(slot->entry);
  }
  if (!status.ok()) {
    entry.done = nullptr;  // its event, if any, stays for the next submission
    slots_.Unclaim(*slot);
    return status;
  }
  return handle;
}

absl::StatusOr<Handle> Runtime::Enqueue(OpRequest request, DoneCallback done) {
  return EnqueueFrom(request, std::move(done));
}

absl::StatusOr<Handle> Runtime::EnqueueFrom(OpRequest& request, DoneCallback done) {
  // A malformed request is reported as such even after a shutdown (which any rank may start);
  // otherwise Push says why the queue is closed (shut down, or stopped by a failure).
  ReaderMutexLock world(&world_mu_);
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<TensorEntry> entry, MakeEntry(request, "", 0));
  const Handle handle = handles_.Create();
  entry->handle = handle;
  entry->done = std::move(done);
  absl::Status pushed = queue_.Push(std::move(entry));
  if (!pushed.ok()) {
    handles_.Discard(handle);
    return pushed;
  }
  return handle;
}

absl::StatusOr<std::vector<Handle>> Runtime::EnqueueGroup(std::vector<OpRequest> requests) {
  // As Enqueue: validation first, then Push reports a closed queue.
  if (requests.empty()) return std::vector<Handle>{};
  for (const OpRequest& r : requests) {
    if (r.type != requests[0].type || !IsValidOpType(static_cast<int32_t>(r.type)) ||
        !KindOf(r.type).groups) {
      return absl::InvalidArgumentError(
          absl::StrCat("grouped op of tensor '", r.name,
                       "': a group holds ops of one type: allreduce, allgather or reducescatter"));
    }
  }
  // Names are unique among in-flight ops, so the first name identifies the group.
  const std::string group_key = absl::StrCat(requests[0].name, "#", requests.size());
  const int32_t group_size = static_cast<int32_t>(requests.size());
  std::vector<std::unique_ptr<TensorEntry>> batch;
  std::vector<Handle> handles;
  ReaderMutexLock world(&world_mu_);
  for (OpRequest& r : requests) {
    absl::StatusOr<std::unique_ptr<TensorEntry>> entry = MakeEntry(r, group_key, group_size);
    if (!entry.ok()) {
      for (Handle h : handles) handles_.Discard(h);
      return entry.status();
    }
    const Handle handle = handles_.Create();
    (*entry)->handle = handle;
    handles.push_back(handle);
    batch.push_back(*std::move(entry));
  }
  absl::Status pushed = queue_.Push(std::move(batch));
  if (!pushed.ok()) {
    for (Handle h : handles) handles_.Discard(h);
    return pushed;
  }
  return handles;
}

}  // namespace chorus::runtime
