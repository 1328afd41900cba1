#include "runtime/gpu/gpu_data_plane.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

#include "base/logging.h"
#include "base/status_macros.h"
#include "ops/cuda/batched_copy_plan.h"
#include "runtime/execute/collective_math.h"
#include "runtime/execute/executor.h"
#include "runtime/gpu/ready_waits.h"

namespace chorus::runtime {
namespace {

using ops::gpu::BatchedCopyPlan;
using ops::gpu::CopyEntry;
using ops::gpu::GpuPlatform;

// Fused tensors start on 16-byte boundaries so the copy kernels use vector accesses.
constexpr int64_t kFusionAlign = 16;

std::byte* Bytes(void* p) { return static_cast<std::byte*>(p); }

// "allreduce of 'a'" or "allreduce of 3 tensors ('a', 'b', 'c')" (at most 4 names).
std::string Describe(const Response& response) {
  const size_t n = response.names.size();
  if (n == 1) return absl::StrCat(OpTypeName(response.type), " of '", response.names[0], "'");
  std::string what = absl::StrCat(OpTypeName(response.type), " of ", n, " tensors (");
  for (size_t i = 0; i < std::min<size_t>(n, 4); ++i) {
    absl::StrAppend(&what, i > 0 ? ", '" : "'", response.names[i], "'");
  }
  absl::StrAppend(&what, n > 4 ? ", ...)" : ")");
  return what;
}

}  // namespace

// Note [GPU launch] (docs/gpu.md): one Launcher enqueues one response on one lane and fills a
// GpuBatch.
class GpuDataPlane::Launcher {
 public:
  // `alltoall_rows`: an alltoall's rows received from each rank (exchanged beforehand).
  // `hierarchical`: an allreduce runs on the lane's local and cross communicators.
  Launcher(GpuDataPlane& plane, Lane& lane, const Response& response,
           const std::vector<int64_t>& alltoall_rows, bool hierarchical, GpuBatch& batch)
      : plane_(plane),
        platform_(*plane.platform_),
        lane_(lane),
        response_(response),
        recv_rows_(alltoall_rows),
        hierarchical_(hierarchical),
        batch_(batch),
        comm_(*lane.communicator) {}

  absl::Status Run() {
    // One wait per framework stream where its events' order is known (ready_waits.h).
    std::vector<ReadyMark>& marks = plane_.marks_;
    std::vector<TensorEntry*>& marked = plane_.marked_;
    marks.clear();
    marked.clear();
    for (const std::unique_ptr<TensorEntry>& entry : batch_.entries) {
      if (entry != nullptr && entry->ready_event != nullptr) {
        marks.push_back({entry->op.stream, entry->ready_begin, entry->ready_end});
        marked.push_back(entry.get());
      }
    }
    ChooseReadyWaits(marks, &plane_.waits_);
    for (const size_t i : plane_.waits_) {
      CHORUS_RETURN_IF_ERROR(
          platform_.StreamWaitEvent(lane_.device, lane_.stream, marked[i]->ready_event));
    }
    switch (response_.type) {
      case OpType::kAllreduce:
        return Allreduce();
      case OpType::kAllgather:
        return Allgather();
      case OpType::kBroadcast:
        return Broadcast();
      case OpType::kAlltoall:
        return Alltoall();
      case OpType::kReducescatter:
        return Reducescatter();
      default:
        return absl::InternalError(absl::StrCat("the GPU data plane cannot run a ",
                                                OpTypeName(response_.type), " response"));
    }
  }

 private:
  TensorEntry* Entry(size_t i) { return batch_.entries[i].get(); }

  // One batched-copy launch of `copies` with `scale` (nothing for an empty batch).
  absl::Status Copy(const std::vector<CopyEntry>& copies, double scale) {
    if (copies.empty()) return absl::OkStatus();
    CHORUS_ASSIGN_OR_RETURN(const BatchedCopyPlan* plan, lane_.plans.Get(copies, scale));
    return platform_.EnqueueCopy(lane_.device, *plan, lane_.stream);
  }

  // A device output of `bytes` bytes for result `i`, freed with its last reference.
  absl::StatusOr<std::byte*> NewOutput(size_t i, int64_t bytes) {
    std::byte* data = nullptr;
    if (bytes > 0) {
      CHORUS_ASSIGN_OR_RETURN(void* p, platform_.Allocate(lane_.device, bytes));
      data = Bytes(p);
    }
    batch_.results[i].output = std::make_shared<OutputBuffer>(
        data, static_cast<size_t>(bytes), lane_.device,
        [platform = plane_.platform_, device = lane_.device](std::byte* p) {
          if (p != nullptr) platform->Free(device, p);
        });
    return data;
  }

  absl::Status Allreduce() {
    const DataType dtype = response_.dtype;
    // Reduced in `wire` (compression inside chorus: the copies cast), else in `dtype`.
    const DataType wire =
        response_.wire_dtype >= 0 ? static_cast<DataType>(response_.wire_dtype) : dtype;
    const ReduceOp op = BackendOp(response_.reduce_op);
    const double pre = response_.prescale_factor;
    const double post = PostscaleFor(response_, comm_.size());
    const size_t n = response_.names.size();
    if (hierarchical_) return HierarchicalAllreduce(dtype, wire, op, pre, post);

    if (n == 1 && Entry(0) != nullptr && wire == dtype) {
      return ReduceOneInPlace(dtype, pre, post, [&](const void* src, void* dst, int64_t count) {
        return comm_.Allreduce(src, dst, count, dtype, op, lane_.stream);
      });
    }

    std::vector<int64_t> counts(n);
    for (size_t i = 0; i < n; ++i) counts[i] = NumElements(response_.shapes[i]);
    const ops::gpu::FusionLayout layout = ops::gpu::PackFusionLayout(counts, wire, kFusionAlign);
    CHORUS_ASSIGN_OR_RETURN(void* fusion, plane_.FusionBuffer(lane_, layout.total_bytes));
    std::byte* buffer = Bytes(fusion);
    const int64_t elements = layout.total_bytes / static_cast<int64_t>(DataTypeSize(wire));
    return ReducePacked(layout, counts, buffer, dtype, wire, op, pre, post, [&] {
      return comm_.Allreduce(buffer, buffer, elements, wire, op, lane_.stream);
    });
  }

  // The batch's one tensor reduced where it is by `reduce(src, dst, count)` (dst: its output),
  // scaled in place around the collective.
  template <typename Reduce>
  absl::Status ReduceOneInPlace(DataType dtype, double pre, double post, Reduce reduce) {
    TensorEntry& e = *Entry(0);
    const int64_t count = NumElements(response_.shapes[0]);
    const void* src = e.op.input.data;
    void* dst = OutputOf(e);
    if (pre != 1.0) {
      CHORUS_RETURN_IF_ERROR(Copy({CopyEntry{src, dst, count, dtype, dtype}}, pre));
      src = dst;
    }
    CHORUS_RETURN_IF_ERROR(reduce(src, dst, count));
    if (post != 1.0) {
      CHORUS_RETURN_IF_ERROR(Copy({CopyEntry{dst, dst, count, dtype, dtype}}, post));
    }
    return absl::OkStatus();
  }

  // The batch's tensors copied (cast to `wire`, prescaled) into `buffer` at `layout`'s offsets
  // (`counts` elements each), reduced in place by `reduce()`, and copied out (postscaled). A
  // joined rank contributes the op's identity and drops the result.
  template <typename Reduce>
  absl::Status ReducePacked(const ops::gpu::FusionLayout& layout,
                            const std::vector<int64_t>& counts, std::byte* buffer, DataType dtype,
                            DataType wire, ReduceOp op, double pre, double post, Reduce reduce) {
    std::vector<CopyEntry> in, out;
    for (size_t i = 0; i < counts.size(); ++i) {
      std::byte* slot = buffer + layout.offsets[i];
      if (Entry(i) == nullptr) {
        CHORUS_RETURN_IF_ERROR(
            platform_.EnqueueFillIdentity(lane_.device, slot, counts[i], wire, op, lane_.stream));
        continue;
      }
      in.push_back(CopyEntry{Entry(i)->op.input.data, slot, counts[i], dtype, wire});
      out.push_back(CopyEntry{slot, OutputOf(*Entry(i)), counts[i], wire, dtype});
    }
    CHORUS_RETURN_IF_ERROR(Copy(in, pre));
    CHORUS_RETURN_IF_ERROR(reduce());
    return Copy(out, post);
  }

  // Horovod's NCCL hierarchical allreduce on `count` elements at `buffer` (in place): NCCL
  // reduce-scatter among the host's members (member l keeps block l), NCCL allreduce of block l
  // among the members with local index l on every host, NCCL allgather within the host. The
  // blocks are equal (count is a multiple of the local size), so each step is one NCCL call.
  absl::Status ReduceHierarchically(const void* send, std::byte* buffer, int64_t count,
                                    DataType wire, ReduceOp op) {
    ops::gpu::GpuCommunicator& local = *lane_.local;
    const int64_t block = count / local.size();
    const int64_t block_bytes = block * static_cast<int64_t>(DataTypeSize(wire));
    std::byte* mine = buffer + local.rank() * block_bytes;
    const std::vector<int64_t> blocks(static_cast<size_t>(local.size()), block);
    CHORUS_RETURN_IF_ERROR(local.ReduceScatter(send, mine, blocks, wire, op, lane_.stream));
    CHORUS_RETURN_IF_ERROR(lane_.cross->Allreduce(mine, mine, block, wire, op, lane_.stream));
    const std::vector<int64_t> bytes(static_cast<size_t>(local.size()), block_bytes);
    return local.Allgatherv(mine, buffer, bytes, lane_.stream);
  }

  absl::Status HierarchicalAllreduce(DataType dtype, DataType wire, ReduceOp op, double pre,
                                     double post) {
    const size_t n = response_.names.size();
    const int64_t local_size = lane_.local->size();
    if (n == 1 && Entry(0) != nullptr && wire == dtype &&
        NumElements(response_.shapes[0]) % local_size == 0) {
      // One tensor that splits evenly: reduced where it is.
      return ReduceOneInPlace(dtype, pre, post, [&](const void* src, void* dst, int64_t count) {
        return ReduceHierarchically(src, Bytes(dst), count, dtype, op);
      });
    }
    // Packed into the fusion buffer, padded to a multiple of the local size with the op's
    // identity (the padding is reduced and dropped).
    std::vector<int64_t> counts(n);
    for (size_t i = 0; i < n; ++i) counts[i] = NumElements(response_.shapes[i]);
    const ops::gpu::FusionLayout layout = ops::gpu::PackFusionLayout(counts, wire, kFusionAlign);
    const auto wsize = static_cast<int64_t>(DataTypeSize(wire));
    const int64_t elements = layout.total_bytes / wsize;
    const int64_t padded = (elements + local_size - 1) / local_size * local_size;
    CHORUS_ASSIGN_OR_RETURN(void* fusion, plane_.FusionBuffer(lane_, padded * wsize));
    std::byte* buffer = Bytes(fusion);
    if (padded > elements) {
      CHORUS_RETURN_IF_ERROR(platform_.EnqueueFillIdentity(
          lane_.device, buffer + elements * wsize, padded - elements, wire, op, lane_.stream));
    }
    return ReducePacked(layout, counts, buffer, dtype, wire, op, pre, post,
                        [&] { return ReduceHierarchically(buffer, buffer, padded, wire, op); });
  }

  absl::Status Allgather() {
    const int size = comm_.size();
    const int me = comm_.rank();
    const int64_t esize = static_cast<int64_t>(DataTypeSize(response_.dtype));
    const size_t m = response_.names.size();
    auto first_dim = [&](size_t k, int r) { return response_.first_dims[k * size + r]; };
    std::vector<int64_t> row_bytes(m);
    std::vector<std::byte*> outputs(m);
    for (size_t k = 0; k < m; ++k) {
      row_bytes[k] = RowElements(response_.shapes[k]) * esize;
      int64_t rows = 0;
      for (int r = 0; r < size; ++r) rows += first_dim(k, r);
      CHORUS_ASSIGN_OR_RETURN(outputs[k], NewOutput(k, rows * row_bytes[k]));
      batch_.results[k].output_shape = response_.shapes[k];
      batch_.results[k].output_shape[0] = rows;
    }
    std::vector<int64_t> recv_bytes(size, 0);
    for (int r = 0; r < size; ++r) {
      for (size_t k = 0; k < m; ++k) recv_bytes[r] += first_dim(k, r) * row_bytes[k];
    }
    if (m == 1) {
      return comm_.Allgatherv(Entry(0)->op.input.data, outputs[0], recv_bytes, lane_.stream);
    }
    // Several tensors: pack this rank's rows, gather rank-major, unpack per tensor.
    int64_t total = 0;
    for (int64_t b : recv_bytes) total += b;
    CHORUS_ASSIGN_OR_RETURN(void* fusion, plane_.FusionBuffer(lane_, recv_bytes[me] + total));
    std::byte* send = Bytes(fusion);
    std::byte* recv = send + recv_bytes[me];
    std::vector<CopyEntry> in, out;
    int64_t off = 0;
    for (size_t k = 0; k < m; ++k) {
      const int64_t bytes = first_dim(k, me) * row_bytes[k];
      in.push_back(CopyEntry{Entry(k)->op.input.data, send + off, bytes, DataType::kUint8,
                             DataType::kUint8});
      off += bytes;
    }
    ForEachAllgatherBlock(
        size, row_bytes, first_dim, [&](size_t k, int64_t from, int64_t to, int64_t bytes) {
          out.push_back(
              CopyEntry{recv + from, outputs[k] + to, bytes, DataType::kUint8, DataType::kUint8});
        });
    CHORUS_RETURN_IF_ERROR(Copy(in, 1.0));
    CHORUS_RETURN_IF_ERROR(comm_.Allgatherv(send, recv, recv_bytes, lane_.stream));
    return Copy(out, 1.0);
  }

  absl::Status Broadcast() {
    for (size_t i = 0; i < batch_.entries.size(); ++i) {
      const TensorView& t = Entry(i)->op.input;
      CHORUS_RETURN_IF_ERROR(
          comm_.Broadcast(t.data, t.num_bytes(), response_.root_rank, lane_.stream));
    }
    return absl::OkStatus();
  }

  absl::Status Alltoall() {
    const int size = comm_.size();
    TensorEntry& e = *Entry(0);
    const TensorView& in = e.op.input;
    const int64_t row_bytes = RowElements(in.shape) * static_cast<int64_t>(DataTypeSize(in.dtype));
    std::vector<int64_t> send_rows = e.op.splits;
    if (send_rows.empty()) send_rows.assign(size, in.shape[0] / size);
    const AlltoallLayout l = MakeAlltoallLayout(send_rows, recv_rows_, row_bytes);
    CHORUS_ASSIGN_OR_RETURN(std::byte * out, NewOutput(0, l.recv_total));
    OpResult& result = batch_.results[0];
    result.output_shape = in.shape;
    result.output_shape[0] = l.recv_rows;
    result.received_splits = recv_rows_;
    return comm_.Alltoallv(in.data, l.send_bytes, l.send_offsets, out, l.recv_bytes, l.recv_offsets,
                           lane_.stream);
  }

  absl::Status Reducescatter() {
    const int size = comm_.size();
    const int me = comm_.rank();
    TensorEntry& e = *Entry(0);
    const TensorView& in = e.op.input;
    const int64_t esize = static_cast<int64_t>(DataTypeSize(in.dtype));
    const std::vector<int64_t> counts = ReducescatterCounts(in.shape, size);
    OpResult& result = batch_.results[0];
    result.output_shape = in.shape;
    result.output_shape[0] = ReducescatterRows(in.shape[0], size, me);
    CHORUS_ASSIGN_OR_RETURN(std::byte * out, NewOutput(0, counts[me] * esize));
    const void* send = in.data;
    if (response_.prescale_factor != 1.0 && in.num_elements() > 0) {
      CHORUS_ASSIGN_OR_RETURN(void* scaled, platform_.Allocate(lane_.device, in.num_bytes()));
      batch_.scratch.push_back(scaled);
      CHORUS_RETURN_IF_ERROR(
          Copy({CopyEntry{in.data, scaled, in.num_elements(), in.dtype, in.dtype}},
               response_.prescale_factor));
      send = scaled;
    }
    CHORUS_RETURN_IF_ERROR(comm_.ReduceScatter(send, out, counts, in.dtype,
                                               BackendOp(response_.reduce_op), lane_.stream));
    const double post = PostscaleFor(response_, size);
    if (post == 1.0) return absl::OkStatus();
    return Copy({CopyEntry{out, out, counts[me], in.dtype, in.dtype}}, post);
  }

  GpuDataPlane& plane_;
  GpuPlatform& platform_;
  Lane& lane_;
  const Response& response_;
  const std::vector<int64_t>& recv_rows_;
  const bool hierarchical_;
  GpuBatch& batch_;
  ops::gpu::GpuCommunicator& comm_;
};

GpuDataPlane::GpuDataPlane(std::shared_ptr<GpuPlatform> platform, const SharedConfig& shared,
                           absl::Duration bound, int32_t world_rank,
                           GpuCompletionQueue::DeliverFn deliver)
    : platform_(std::move(platform)),
      shared_(shared),
      bound_(bound),
      rank_(world_rank),
      deliver_(deliver),
      completions_(std::make_unique<GpuCompletionQueue>(platform_, std::move(deliver),
                                                        [this] { AbortAll(); })) {}

GpuDataPlane::~GpuDataPlane() {
  completions_.reset();  // every batch has finished: nothing uses the lanes any more
  // In key order, the same on every rank (ncclCommDestroy waits for the other local ranks).
  for (auto& [key, lane] : lanes_) DestroyLane(lane);
}

void GpuDataPlane::DestroyLane(Lane& lane) {
  {
    MutexLock lock(&communicators_mu_);
    std::erase(communicators_, lane.communicator.get());
    std::erase(communicators_, lane.local.get());
    std::erase(communicators_, lane.cross.get());
  }
  // The stream first: after a failure, work may still be queued on it (an aborted collective,
  // a copy-out) that reads the fusion buffer; Free then waits for the device.
  if (lane.stream != nullptr) platform_->DestroyStream(lane.device, lane.stream);
  lane.communicator.reset();  // ncclCommDestroy (unless aborted)
  lane.local.reset();
  lane.cross.reset();
  if (lane.fusion != nullptr) platform_->Free(lane.device, lane.fusion);
  lane.fusion = nullptr;
  lane.stream = nullptr;
}

void GpuDataPlane::RemoveSet(int32_t set_id) {
  completions_->Drain();
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    if (it->first.first != set_id) {
      ++it;
      continue;
    }
    DestroyLane(it->second);
    it = lanes_.erase(it);
  }
  launches_.erase(set_id);
  std::erase_if(hierarchy_joined_, [set_id](const auto& key) { return key.first == set_id; });
}

void GpuDataPlane::AbortAll() {
  MutexLock lock(&communicators_mu_);
  for (ops::gpu::GpuCommunicator* c : communicators_) c->Abort();
}

void GpuDataPlane::Fail(absl::Status status) { completions_->Fail(std::move(status)); }

void GpuDataPlane::Settle() { completions_->Settle(); }

absl::StatusOr<void*> GpuDataPlane::FusionBuffer(Lane& lane, int64_t bytes) {
  if (bytes <= lane.fusion_bytes) return lane.fusion;
  // Grow to at least the fusion threshold. Freeing the old buffer waits for the device, which
  // is still reading it only on this lane's stream (stream-ordered reuse).
  const int64_t want = std::max(bytes, shared_.fusion_threshold_bytes);
  if (lane.fusion != nullptr) platform_->Free(lane.device, lane.fusion);
  lane.fusion = nullptr;
  lane.fusion_bytes = 0;
  CHORUS_ASSIGN_OR_RETURN(lane.fusion, platform_->Allocate(lane.device, want));
  lane.fusion_bytes = want;
  return lane.fusion;
}

absl::StatusOr<std::unique_ptr<ops::gpu::GpuCommunicator>> GpuDataPlane::JoinCommunicator(
    int device, bool ready, ops::CollectiveBackend& set_backend) {
  // Every member must be able to join before any does (ncclCommInitRank waits for all).
  int64_t all_ready = ready ? 1 : 0;
  CHORUS_RETURN_IF_ERROR(
      set_backend.Allreduce(&all_ready, &all_ready, 1, DataType::kInt64, ReduceOp::kMin));
  if (all_ready == 0) {
    return absl::FailedPreconditionError(
        "a rank of the process set could not set up its GPU stream, or its GPU data plane had "
        "failed (see that rank's log)");
  }
  std::string id;
  if (set_backend.rank() == 0) {
    absl::StatusOr<std::string> made = platform_->NewCommunicatorId();
    if (made.ok()) {
      id = *std::move(made);
    } else {
      CHORUS_LOG(ERROR) << "cannot create a GPU communicator id: " << made.status();
    }
  }
  int64_t length = static_cast<int64_t>(id.size());
  CHORUS_RETURN_IF_ERROR(set_backend.Broadcast(&length, sizeof(length), 0));
  if (length == 0) {
    return absl::UnavailableError(
        "the process set's first rank could not create a GPU communicator id (see its log)");
  }
  id.resize(static_cast<size_t>(length));
  CHORUS_RETURN_IF_ERROR(set_backend.Broadcast(id.data(), length, 0));
  return platform_->CreateCommunicator(id, set_backend.size(), set_backend.rank(), device);
}

absl::StatusOr<GpuDataPlane::Lane*> GpuDataPlane::GetLane(int32_t set_id, int device,
                                                          ops::CollectiveBackend& set_backend,
                                                          int32_t* index_out) {
  const int32_t index = static_cast<int32_t>(launches_[set_id]++ % shared_.num_nccl_streams);
  *index_out = index;
  auto [it, inserted] = lanes_.try_emplace({set_id, index});
  Lane& lane = it->second;
  if (!inserted) {
    if (lane.device != device) {
      return absl::FailedPreconditionError(
          absl::StrCat("chorus drives one GPU per process: process set ", set_id, " runs on GPU ",
                       lane.device, ", not GPU ", device));
    }
    return &lane;
  }
  lane.device = device;
  if (device_ < 0) device_ = device;
  absl::StatusOr<ops::gpu::StreamHandle> stream = platform_->CreateStream(device);
  if (stream.ok()) {
    lane.stream = *stream;
  } else {
    CHORUS_LOG(ERROR) << "GPU stream on device " << device << ": " << stream.status();
  }
  absl::StatusOr<std::unique_ptr<ops::gpu::GpuCommunicator>> comm =
      JoinCommunicator(device, stream.ok() && failure().ok(), set_backend);
  if (!comm.ok()) {
    if (lane.stream != nullptr) platform_->DestroyStream(device, lane.stream);
    lanes_.erase(it);
    if (!stream.ok()) return stream.status();
    if (comm.status().code() != absl::StatusCode::kFailedPrecondition) {
      completions_->Fail(comm.status());  // the members did not all join
    }
    return comm.status();
  }
  lane.communicator = *std::move(comm);
  MutexLock lock(&communicators_mu_);
  communicators_.push_back(lane.communicator.get());
  return &lane;
}

absl::Status GpuDataPlane::JoinHierarchy(Lane* lane, int device,
                                         ops::CollectiveBackend& set_backend,
                                         ops::HierarchicalBackend& hierarchy) {
  absl::StatusOr<std::unique_ptr<ops::gpu::GpuCommunicator>> local =
      JoinCommunicator(device, lane != nullptr && failure().ok(), hierarchy.local());
  absl::StatusOr<std::unique_ptr<ops::gpu::GpuCommunicator>> cross =
      JoinCommunicator(device, local.ok(), hierarchy.cross());
  // The groups decided apart: every member of the set must have both, or none uses them.
  int64_t joined = local.ok() && cross.ok() ? 1 : 0;
  CHORUS_RETURN_IF_ERROR(
      set_backend.Allreduce(&joined, &joined, 1, DataType::kInt64, ReduceOp::kMin));
  if (joined == 0) {
    if (!local.ok()) return local.status();
    if (!cross.ok()) return cross.status();
    return absl::FailedPreconditionError(
        "another rank of the process set could not join its hierarchical GPU communicators "
        "(see its log)");
  }
  lane->local = *std::move(local);
  lane->cross = *std::move(cross);
  MutexLock lock(&communicators_mu_);
  communicators_.push_back(lane->local.get());
  communicators_.push_back(lane->cross.get());
  return absl::OkStatus();
}

absl::Status GpuDataPlane::Launch(const Response& response, int32_t set_id,
                                  ops::CollectiveBackend& set_backend,
                                  const std::vector<int32_t>& set_ranks,
                                  std::vector<std::unique_ptr<TensorEntry>> entries,
                                  ops::HierarchicalBackend* hierarchy, int64_t flight_token) {
  GpuBatch batch;
  batch.flight_token = flight_token;
  batch.what = Describe(response);
  // The device: this rank's tensors'. A joined rank holds none: it uses the GPU its lanes run
  // on, or rank 0's ordinal before it has any.
  int device = device_ >= 0 ? device_ : response.device;
  for (const std::unique_ptr<TensorEntry>& e : entries) {
    if (e != nullptr) {
      device = e->op.input.device;
      break;
    }
  }
  batch.device = device;
  batch.results.resize(entries.size());
  batch.entries = std::move(entries);

  // First the parts that talk over the set's CPU backend. Every member runs them whatever its
  // own state, or a member would wait there forever (Note [GPU launch] in docs/gpu.md).
  int32_t lane_index = 0;
  absl::StatusOr<Lane*> lane = GetLane(set_id, device, set_backend, &lane_index);
  // The same decision on every member: the response, the set's layout and the batch's modes.
  bool hierarchical = false;
  if (hierarchy != nullptr && response.type == OpType::kAllreduce) {
    int64_t elements = 0;
    for (const std::vector<int64_t>& shape : response.shapes) elements += NumElements(shape);
    hierarchical = ops::ChooseAllreduce(hierarchy->modes().allreduce, hierarchy->plan(),
                                        elements) == ops::CollectiveAlgorithm::kHierarchical;
  }
  absl::Status hierarchy_status;
  if (hierarchical && hierarchy_joined_.insert({set_id, lane_index}).second) {
    hierarchy_status = JoinHierarchy(lane.ok() ? *lane : nullptr, device, set_backend, *hierarchy);
    if (!hierarchy_status.ok() && lane.ok()) completions_->Fail(hierarchy_status);
  }
  if (hierarchical && hierarchy_status.ok() && lane.ok() && (*lane)->local == nullptr) {
    hierarchy_status = absl::UnavailableError(
        "the lane's hierarchical GPU communicators could not be joined (see the first error)");
  }
  std::vector<int64_t> alltoall_rows;
  if (response.type == OpType::kAlltoall) {
    const TensorEntry& e = *batch.entries.at(0);
    std::vector<int64_t> send_rows = e.op.splits;
    if (send_rows.empty())
      send_rows.assign(set_backend.size(), e.op.input.shape[0] / set_backend.size());
    absl::StatusOr<std::vector<int64_t>> rows = ExchangeRowCounts(set_backend, send_rows);
    if (!rows.ok()) {
      // The CPU transport failed: fatal, as on the CPU path. The entries still complete, with
      // that status, so that no waiter is left behind (and the queue forgets their names).
      DeliverFailed(batch, rows.status());
      return rows.status();
    }
    alltoall_rows = *std::move(rows);
  }

  // Then the device work, which fails alone: a failure here fails the GPU data plane, and the
  // next cycle's flags stop every rank.
  absl::Status status = lane.ok() ? failure() : lane.status();
  if (status.ok()) status = hierarchy_status;
  if (status.ok()) {
    Launcher launcher(*this, **lane, response, alltoall_rows, hierarchical, batch);
    status = launcher.Run();
    if (status.ok())
      status = [&]() -> absl::Status {
        CHORUS_ASSIGN_OR_RETURN(batch.done, platform_->CreateEvent(device));
        CHORUS_RETURN_IF_ERROR(platform_->RecordEvent(device, batch.done, (*lane)->stream));
        completions_->ArmWake(batch, (*lane)->stream);  // behind the event: it is done then
        return absl::OkStatus();
      }();
    if (!status.ok()) {
      status = absl::Status(status.code(), absl::StrCat("launching ", batch.what, " on GPU ",
                                                        device, ": ", status.message()));
      completions_->Fail(status);  // aborts the communicators: peers waiting in NCCL get out
    }
  }
  if (status.ok()) {
    batch.communicators.push_back((*lane)->communicator.get());
    if (hierarchical) {
      batch.communicators.push_back((*lane)->local.get());
      batch.communicators.push_back((*lane)->cross.get());
    }
  }
  if (bound_ > absl::ZeroDuration()) {
    // Note [No-progress bound]: the batch's collectives started on every member in the same
    // cycle, so none waits long for a live peer.
    batch.deadline = absl::Now() + bound_;
    batch.stuck.rank = rank_;
    batch.stuck.bound = bound_;
    for (int32_t r : set_ranks) {
      if (r != rank_) batch.stuck.peers.push_back(r);
    }
    batch.stuck.ends_job = false;
  }

  if (!status.ok()) {
    if (batch.done != nullptr) platform_->DestroyEvent(device, batch.done);
    DeliverFailed(batch, status);
    return absl::OkStatus();
  }
  DropJoinedSlots(batch);
  completions_->Park(std::move(batch));  // settled at the end of the loop's cycle
  return absl::OkStatus();
}

void GpuDataPlane::DropJoinedSlots(GpuBatch& batch) {
  if (std::ranges::none_of(batch.entries, [](const auto& e) { return e == nullptr; })) return;
  std::vector<std::unique_ptr<TensorEntry>> held;
  std::vector<OpResult> results;
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    if (batch.entries[i] == nullptr) continue;
    held.push_back(std::move(batch.entries[i]));
    results.push_back(std::move(batch.results[i]));
  }
  batch.entries = std::move(held);
  batch.results = std::move(results);
}

void GpuDataPlane::DeliverFailed(GpuBatch& batch, const absl::Status& status) {
  DropJoinedSlots(batch);
  for (OpResult& r : batch.results) r = StatusResult(status);
  deliver_(&batch.entries, &batch.results, batch.flight_token);
}

}  // namespace chorus::runtime
