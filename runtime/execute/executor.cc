#include "runtime/execute/executor.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

#include "base/status_macros.h"
#include "ops/cpu/reduce_kernels.h"
#include "runtime/execute/collective_math.h"

namespace chorus::runtime {
namespace {

std::byte* Bytes(void* p) { return static_cast<std::byte*>(p); }

// The largest alltoall message (per rank, in bytes) one MPI call takes (int counts).
constexpr int64_t kMaxMessageBytes = INT32_MAX;

std::shared_ptr<OutputBuffer> NewOutput(int64_t bytes) {
  return std::make_shared<OutputBuffer>(static_cast<size_t>(bytes));
}

// The elements of the packed window that starts at packed[first], element `first_off`: up to
// `chunk_elems` of the packed tensors, in order.
int64_t WindowElements(const Response& response, const std::vector<size_t>& packed, size_t first,
                       int64_t first_off, int64_t chunk_elems) {
  int64_t filled = 0;
  for (size_t t = first; t < packed.size() && filled < chunk_elems; ++t) {
    const int64_t count = NumElements(response.shapes[packed[t]]) - (t == first ? first_off : 0);
    filled += std::min(count, chunk_elems - filled);
  }
  return filled;
}

// Moves (first, first_off) past `n` elements of the packed tensors, and past the zero-element
// tensors that follow (complete as well).
void AdvanceWindow(const Response& response, const std::vector<size_t>& packed, int64_t n,
                   size_t* first, int64_t* first_off) {
  while (n > 0) {
    const int64_t count = NumElements(response.shapes[packed[*first]]);
    const int64_t take = std::min(count - *first_off, n);
    n -= take;
    *first_off += take;
    if (*first_off == count) {
      ++*first;
      *first_off = 0;
    }
  }
  while (*first < packed.size() && NumElements(response.shapes[packed[*first]]) == 0) ++*first;
}

// Note [Zero-copy windows]: where the window starting at packed[first], element `first_off`,
// lies in this rank's memory when its tensors are held here, reduced in place, and back to back
// in window order; null otherwise (it is packed into the fusion buffer).
std::byte* ContiguousWindow(const Response& response, const std::vector<TensorEntry*>& entries,
                            const std::vector<size_t>& packed, size_t first, int64_t first_off,
                            int64_t chunk_elems, int64_t esize) {
  std::byte* start = nullptr;
  std::byte* next = nullptr;  // where the next tensor must begin
  int64_t filled = 0;
  for (size_t t = first; t < packed.size() && filled < chunk_elems; ++t) {
    const TensorEntry* entry = entries[packed[t]];
    if (entry == nullptr) return nullptr;
    const OpRequest& op = entry->op;
    if (op.output.data != nullptr && op.output.data != op.input.data) return nullptr;
    const int64_t off = t == first ? first_off : 0;
    std::byte* at = Bytes(op.input.data) + off * esize;
    if (start == nullptr) {
      start = at;
    } else if (at != next) {
      return nullptr;
    }
    const int64_t n = std::min(NumElements(response.shapes[packed[t]]) - off, chunk_elems - filled);
    filled += n;
    next = at + n * esize;
  }
  return filled > 0 ? start : nullptr;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ExchangeRowCounts(ops::CollectiveBackend& backend,
                                                       const std::vector<int64_t>& send_rows) {
  // 8 bytes to and from every rank.
  const int size = backend.size();
  std::vector<int64_t> recv_rows(size, 0);
  std::vector<int64_t> eight(size, 8), offsets(size);
  for (int r = 0; r < size; ++r) offsets[r] = 8 * r;
  CHORUS_RETURN_IF_ERROR(
      backend.Alltoallv(send_rows.data(), eight, offsets, recv_rows.data(), eight, offsets));
  return recv_rows;
}

int64_t MaxBlockingCalls(const Response& response, int64_t pipeline_chunk_bytes,
                         bool hierarchical) {
  // Reserve's agreement, an alltoall's row counts and size check, a GPU lane's agreement and
  // NCCL id broadcasts: at most 4 beside the tensors' own calls; a hierarchical lane's local and
  // cross communicators 3 each and one agreement more.
  const int64_t fixed = hierarchical ? 11 : 4;
  // A hierarchical allreduce piece or allgather: reduce-scatter (gather), allreduce (exchange),
  // allgather (broadcast).
  const int64_t per_collective = hierarchical ? 3 : 1;
  int64_t calls = fixed;
  const int64_t esize = std::max<int64_t>(1, static_cast<int64_t>(DataTypeSize(response.dtype)));
  const int64_t chunk_elems = std::max<int64_t>(1, pipeline_chunk_bytes / esize);
  for (const std::vector<int64_t>& shape : response.shapes) {
    // One call per tensor; an allreduce's pieces: its own, plus at most one packed window it
    // shares with its neighbours.
    calls += per_collective;
    if (response.type == OpType::kAllreduce) {
      calls += per_collective *
               ((std::max<int64_t>(NumElements(shape), 0) + chunk_elems - 1) / chunk_elems);
    }
  }
  return std::max<int64_t>(calls, fixed + static_cast<int64_t>(response.names.size()));
}

Executor::Executor(const SharedConfig& config, bool huge_pages)
    : Executor(config, Options{huge_pages, nullptr}) {}

Executor::Executor(const SharedConfig& config, Options options)
    : config_(config), options_(std::move(options)), huge_pages_(options_.huge_pages) {
  if (!options_.allocate) {
    // Uninitialised on purpose: every byte is written before it is read. On huge pages
    // (Note [Huge pages for large tensors] in docs/fusion.md).
    options_.allocate = [huge = options_.huge_pages](int64_t bytes) {
      return AllocateHugePageBuffer(bytes, huge);
    };
  }
}

int64_t Executor::FusionBytes(const Response& response, int set_size) const {
  const int64_t esize = static_cast<int64_t>(DataTypeSize(response.dtype));
  const size_t n = response.names.size();
  switch (response.type) {
    case OpType::kAllreduce: {
      // As Allreduce: the packed window, or a joined rank's scratch for one chunk of a tensor
      // reduced in place.
      const int64_t chunk_elems = std::max<int64_t>(1, config_.pipeline_chunk_bytes / esize);
      int64_t packed_elems = 0, inplace_elems = 0;
      for (size_t i = 0; i < n; ++i) {
        const int64_t count = NumElements(response.shapes[i]);
        if (count * esize < config_.inplace_min_bytes && n > 1) {
          packed_elems += count;
        } else {
          inplace_elems = std::max(inplace_elems, std::min(count, chunk_elems));
        }
      }
      return std::max(std::min(packed_elems, chunk_elems), inplace_elems) * esize;
    }
    case OpType::kAllgather: {
      // As Allgather with several tensors: a rank's rows plus everyone's, for the largest rank.
      if (n < 2 || set_size <= 0 ||
          response.first_dims.size() < n * static_cast<size_t>(set_size)) {
        return 0;
      }
      int64_t total = 0, largest = 0;
      for (int r = 0; r < set_size; ++r) {
        int64_t bytes = 0;
        for (size_t k = 0; k < n; ++k) {
          bytes += response.first_dims[k * set_size + r] * RowElements(response.shapes[k]) * esize;
        }
        total += bytes;
        largest = std::max(largest, bytes);
      }
      return largest + total;
    }
    case OpType::kReducescatter:
      // The prescaled copy of the input.
      if (response.prescale_factor == 1.0 || n == 0) return 0;
      return NumElements(response.shapes[0]) * esize;
    default:
      return 0;
  }
}

absl::Status Executor::Reserve(const Response& response, ops::CollectiveBackend& backend,
                               absl::Status* refused) {
  // Note [Fusion buffer reservation] in docs/fusion.md.
  const int64_t need = FusionBytes(response, backend.size());
  int64_t& reserved = reserved_[response.process_set_id];
  if (need <= reserved) return absl::OkStatus();
  const int64_t bytes = static_cast<int64_t>(HugePageCeil(static_cast<uintptr_t>(need)));
  bool mapped = true;
  if (bytes > fusion_capacity_) {
    HugePageBuffer buffer = options_.allocate(bytes);
    mapped = buffer != nullptr;
    if (mapped) {
      fusion_buffer_ = std::move(buffer);
      fusion_capacity_ = bytes;
    }
  }
  // 1 + the set rank of the highest member that could not map it, else 0.
  int64_t failed = mapped ? 0 : backend.rank() + 1;
  CHORUS_RETURN_IF_ERROR(backend.Allreduce(&failed, &failed, 1, DataType::kInt64, ReduceOp::kMax));
  if (failed == 0) {
    reserved = bytes;
    return absl::OkStatus();
  }
  const size_t others = response.names.size() - 1;
  *refused = absl::ResourceExhaustedError(absl::StrCat(
      OpTypeName(response.type), " of tensor '", response.names.at(0), "'",
      others > 0 ? absl::StrCat(" and ", others, " more") : "", ": rank ", failed - 1,
      " of process set ", response.process_set_id, " could not map a fusion buffer of ", bytes,
      " bytes (out of memory); the op failed on every rank of the set"));
  return absl::OkStatus();
}

absl::StatusOr<std::byte*> Executor::FusionBuffer(int64_t bytes) {
  if (bytes > fusion_capacity_) {
    return absl::InternalError(absl::StrCat("the fusion buffer holds ", fusion_capacity_,
                                            " bytes, ", bytes, " were asked for: not reserved"));
  }
  return fusion_buffer_.get();
}

absl::Status Executor::Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                               ops::CollectiveBackend& backend, std::vector<OpResult>* results,
                               std::vector<ExecutionSpan>* trace) {
  results->assign(entries.size(), OpResult());
  if (response.type == OpType::kAllreduce && backend.size() == 1) {
    trace_ = trace;
    AllreduceAlone(response, entries);
    trace_ = nullptr;
    return absl::OkStatus();
  }
  absl::Status refused;
  absl::Status status = Reserve(response, backend, &refused);
  if (!status.ok() || !refused.ok()) {
    for (OpResult& r : *results) r = StatusResult(status.ok() ? refused : status);
    return status;
  }
  trace_ = trace;
  switch (response.type) {
    case OpType::kAllreduce:
      status = Allreduce(response, entries, backend);
      break;
    case OpType::kAllgather:
      status = Allgather(response, entries, backend, results);
      break;
    case OpType::kBroadcast:
      status = Broadcast(response, entries, backend);
      break;
    case OpType::kAlltoall:
      status = Alltoall(response, *entries.at(0), backend, &(*results)[0]);
      break;
    case OpType::kReducescatter:
      status = Reducescatter(response, *entries.at(0), backend, &(*results)[0]);
      break;
    case OpType::kBarrier: {
      const absl::Time start = Now();
      status = backend.Barrier();
      Record(ExecutionSpan::Activity::kCollective, 0, start, Now());
      break;
    }
    default:
      status = absl::InternalError(
          absl::StrCat("executor cannot run a ", OpTypeName(response.type), " response"));
  }
  trace_ = nullptr;
  if (!status.ok()) {
    for (OpResult& r : *results) r = StatusResult(status);
  }
  return status;
}

void Executor::Record(ExecutionSpan::Activity activity, size_t index, absl::Time start,
                      absl::Time end, int64_t chunks) {
  if (trace_ == nullptr) return;
  trace_->push_back(ExecutionSpan{activity, static_cast<int32_t>(index), start, end, chunks});
}

void Executor::AllreduceAlone(const Response& response, const std::vector<TensorEntry*>& entries) {
  // The same arithmetic as Allreduce's (prescale, then postscale), without its copies.
  const DataType dtype = response.dtype;
  const double pre = response.prescale_factor;
  const double post = PostscaleFor(response, 1);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i] == nullptr) continue;
    const absl::Time start = Now();
    const int64_t count = NumElements(response.shapes[i]);
    void* out = OutputOf(*entries[i]);
    ops::ScaleCopy(out, entries[i]->op.input.data, count, dtype, pre);
    ops::ScaleInPlace(out, count, dtype, post);
    Record(ExecutionSpan::Activity::kCollective, i, start, Now());
  }
}

absl::Status Executor::Allreduce(const Response& response, const std::vector<TensorEntry*>& entries,
                                 ops::CollectiveBackend& backend) {
  const DataType dtype = response.dtype;
  const int64_t esize = static_cast<int64_t>(DataTypeSize(dtype));
  const ReduceOp op = BackendOp(response.reduce_op);
  const double pre = response.prescale_factor;
  const double post = PostscaleFor(response, backend.size());
  const int64_t chunk_elems = std::max<int64_t>(1, config_.pipeline_chunk_bytes / esize);

  // Small tensors, packed: their indices (packed_ keeps its buffer from one call to the next).
  std::vector<size_t>& packed = packed_;
  packed.clear();
  int64_t packed_elems = 0;

  for (size_t i = 0; i < entries.size(); ++i) {
    const int64_t count = NumElements(response.shapes[i]);
    if (count * esize < config_.inplace_min_bytes && entries.size() > 1) {
      packed.push_back(i);
      packed_elems += count;
      continue;
    }
    // Note [Pipelined fusion] (docs/fusion.md): large tensors are reduced where they are, chunk
    // by chunk.
    TensorEntry* entry = entries[i];
    if (entry != nullptr) {
      huge_pages_.Advise(entry->op.input.data, count * esize);
      void* output = OutputOf(*entry);
      if (output != entry->op.input.data) huge_pages_.Advise(output, count * esize);
    }
    const absl::Time start = Now();
    for (int64_t off = 0; off < count; off += chunk_elems) {
      const int64_t n = std::min(chunk_elems, count - off);
      if (entry == nullptr) {
        // A joined rank contributes the op's identity (zeros for a sum) and drops the result.
        CHORUS_ASSIGN_OR_RETURN(std::byte * scratch, FusionBuffer(n * esize));
        ops::FillIdentity(scratch, n, dtype, op);
        CHORUS_RETURN_IF_ERROR(backend.Allreduce(scratch, scratch, n, dtype, op));
      } else {
        const std::byte* src = Bytes(entry->op.input.data) + off * esize;
        std::byte* dst = Bytes(OutputOf(*entry)) + off * esize;
        if (pre != 1.0) {
          ops::ScaleCopy(dst, src, n, dtype, pre);
          src = dst;
        }
        CHORUS_RETURN_IF_ERROR(backend.Allreduce(src, dst, n, dtype, op));
        ops::ScaleInPlace(dst, n, dtype, post);
      }
    }
    Record(ExecutionSpan::Activity::kCollective, i, start, Now(),
           (count + chunk_elems - 1) / chunk_elems);
  }
  if (packed_elems == 0) return absl::OkStatus();

  // Packed tensors, one window of chunk_elems at a time: pack -> reduce -> unpack.
  CHORUS_ASSIGN_OR_RETURN(std::byte * buffer,
                          FusionBuffer(std::min(packed_elems, chunk_elems) * esize));
  size_t first = 0;       // first packed tensor overlapping the window
  int64_t first_off = 0;  // elements of packed[first] already handled
  while (first < packed.size()) {
    const size_t window_first = first;
    const absl::Time pack_start = Now();
    // Note [Zero-copy windows] (docs/fusion.md): the window's tensors, on this rank, may lie
    // back to back in memory, each reduced in place (gradients that are views into one bucket);
    // then the window is reduced where it lies, without the copies. The window is the same on
    // every rank either way (its extent depends only on the response and the chunk size), so
    // each rank decides alone.
    if (std::byte* region =
            ContiguousWindow(response, entries, packed, first, first_off, chunk_elems, esize);
        region != nullptr) {
      const int64_t n = WindowElements(response, packed, first, first_off, chunk_elems);
      ops::ScaleInPlace(region, n, dtype, pre);
      CHORUS_RETURN_IF_ERROR(backend.Allreduce(region, region, n, dtype, op));
      ops::ScaleInPlace(region, n, dtype, post);
      AdvanceWindow(response, packed, n, &first, &first_off);
      ++counters_.zero_copy_windows;
      if (trace_ != nullptr) {
        const absl::Time end = Now();
        for (size_t k = window_first; k < first; ++k) {
          Record(ExecutionSpan::Activity::kCollective, packed[k], pack_start, end);
        }
      }
      continue;
    }
    // Pack.
    int64_t filled = 0;
    size_t t = first;
    int64_t t_off = first_off;
    while (t < packed.size() && filled < chunk_elems) {
      const size_t i = packed[t];
      const int64_t count = NumElements(response.shapes[i]);
      const int64_t n = std::min(count - t_off, chunk_elems - filled);
      std::byte* dst = buffer + filled * esize;
      if (entries[i] == nullptr) {
        ops::FillIdentity(dst, n, dtype, op);
      } else {
        ops::ScaleCopy(dst, Bytes(entries[i]->op.input.data) + t_off * esize, n, dtype, pre);
      }
      filled += n;
      t_off += n;
      if (t_off == count) {
        ++t;
        t_off = 0;
      }
    }
    const size_t window_end = t_off > 0 ? t + 1 : t;  // packed[window_first, window_end)
    const absl::Time reduce_start = Now();
    CHORUS_RETURN_IF_ERROR(backend.Allreduce(buffer, buffer, filled, dtype, op));
    ++counters_.copied_windows;
    const absl::Time unpack_start = Now();
    // Unpack the same ranges.
    int64_t drained = 0;
    size_t u = first;
    int64_t u_off = first_off;
    while (drained < filled) {
      const size_t i = packed[u];
      const int64_t count = NumElements(response.shapes[i]);
      const int64_t n = std::min(count - u_off, filled - drained);
      if (entries[i] != nullptr) {
        ops::ScaleCopy(Bytes(OutputOf(*entries[i])) + u_off * esize, buffer + drained * esize, n,
                       dtype, post);
      }
      drained += n;
      u_off += n;
      if (u_off == count) {
        ++u;
        u_off = 0;
      }
    }
    AdvanceWindow(response, packed, filled, &first, &first_off);
    if (trace_ != nullptr) {
      const absl::Time end = Now();
      for (size_t k = window_first; k < std::max(window_end, first); ++k) {
        Record(ExecutionSpan::Activity::kMemcpyIn, packed[k], pack_start, reduce_start);
        Record(ExecutionSpan::Activity::kCollective, packed[k], reduce_start, unpack_start);
        Record(ExecutionSpan::Activity::kMemcpyOut, packed[k], unpack_start, end);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::Allgather(const Response& response, const std::vector<TensorEntry*>& entries,
                                 ops::CollectiveBackend& backend, std::vector<OpResult>* results) {
  const int size = backend.size();
  const int me = backend.rank();
  const int64_t esize = static_cast<int64_t>(DataTypeSize(response.dtype));
  const size_t m = entries.size();
  std::vector<int64_t> row_bytes(m);
  for (size_t k = 0; k < m; ++k) row_bytes[k] = RowElements(response.shapes[k]) * esize;
  auto first_dim = [&](size_t k, int r) { return response.first_dims[k * size + r]; };

  // Outputs.
  for (size_t k = 0; k < m; ++k) {
    int64_t rows = 0;
    for (int r = 0; r < size; ++r) rows += first_dim(k, r);
    OpResult& result = (*results)[k];
    result.output = NewOutput(rows * row_bytes[k]);
    result.output_shape = response.shapes[k];
    result.output_shape[0] = rows;
  }

  std::vector<int64_t> recv_bytes(size, 0);
  for (int r = 0; r < size; ++r) {
    for (size_t k = 0; k < m; ++k) recv_bytes[r] += first_dim(k, r) * row_bytes[k];
  }
  if (m == 1) {
    const absl::Time start = Now();
    CHORUS_RETURN_IF_ERROR(
        backend.Allgatherv(entries[0]->op.input.data, (*results)[0].output->data(), recv_bytes));
    Record(ExecutionSpan::Activity::kCollective, 0, start, Now());
    return absl::OkStatus();
  }

  // Several tensors: pack this rank's rows of each, gather rank-major, unpack per tensor.
  int64_t total = 0;
  for (int64_t b : recv_bytes) total += b;
  const absl::Time pack_start = Now();
  CHORUS_ASSIGN_OR_RETURN(std::byte * send, FusionBuffer(recv_bytes[me] + total));
  std::byte* recv = send + recv_bytes[me];
  int64_t off = 0;
  for (size_t k = 0; k < m; ++k) {
    const int64_t bytes = first_dim(k, me) * row_bytes[k];
    if (bytes > 0) std::memcpy(send + off, entries[k]->op.input.data, static_cast<size_t>(bytes));
    off += bytes;
  }
  const absl::Time gather_start = Now();
  CHORUS_RETURN_IF_ERROR(backend.Allgatherv(send, recv, recv_bytes));
  const absl::Time unpack_start = Now();
  ForEachAllgatherBlock(
      size, row_bytes, first_dim, [&](size_t k, int64_t from, int64_t to, int64_t bytes) {
        std::memcpy((*results)[k].output->data() + to, recv + from, static_cast<size_t>(bytes));
      });
  if (trace_ != nullptr) {
    const absl::Time end = Now();
    for (size_t k = 0; k < m; ++k) {
      Record(ExecutionSpan::Activity::kMemcpyIn, k, pack_start, gather_start);
      Record(ExecutionSpan::Activity::kCollective, k, gather_start, unpack_start);
      Record(ExecutionSpan::Activity::kMemcpyOut, k, unpack_start, end);
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::Broadcast(const Response& response, const std::vector<TensorEntry*>& entries,
                                 ops::CollectiveBackend& backend) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorView& t = entries[i]->op.input;
    const absl::Time start = Now();
    CHORUS_RETURN_IF_ERROR(backend.Broadcast(t.data, t.num_bytes(), response.root_rank));
    Record(ExecutionSpan::Activity::kCollective, i, start, Now());
  }
  return absl::OkStatus();
}

absl::Status Executor::Alltoall(const Response& response, TensorEntry& entry,
                                ops::CollectiveBackend& backend, OpResult* result) {
  const int size = backend.size();
  const TensorView& in = entry.op.input;
  const int64_t row_bytes = RowElements(in.shape) * static_cast<int64_t>(DataTypeSize(in.dtype));
  std::vector<int64_t> send_rows = entry.op.splits;
  if (send_rows.empty()) send_rows.assign(size, in.shape[0] / size);

  const absl::Time start = Now();
  CHORUS_ASSIGN_OR_RETURN(const std::vector<int64_t> recv_rows,
                          ExchangeRowCounts(backend, send_rows));

  const AlltoallLayout l = MakeAlltoallLayout(send_rows, recv_rows, row_bytes);
  const int64_t s = l.send_total, r_total = l.recv_total;
  // Sizes and offsets differ per rank, so a rank whose message is too large for one MPI call
  // must not fail alone (the others would wait in the exchange): agree first, fail together.
  int64_t too_large = (s > kMaxMessageBytes || r_total > kMaxMessageBytes) ? 1 : 0;
  CHORUS_RETURN_IF_ERROR(
      backend.Allreduce(&too_large, &too_large, 1, DataType::kInt64, ReduceOp::kMax));
  if (too_large != 0) {
    result->status = absl::InvalidArgumentError(
        absl::StrCat("alltoall of tensor '", entry.request.name,
                     "': some rank sends or receives more than ", kMaxMessageBytes,
                     " bytes (this rank: ", s, " sent, ", r_total, " received); split the tensor"));
    return absl::OkStatus();
  }
  result->output = NewOutput(r_total);
  result->output_shape = in.shape;
  result->output_shape[0] = l.recv_rows;
  result->received_splits = recv_rows;
  CHORUS_RETURN_IF_ERROR(backend.Alltoallv(in.data, l.send_bytes, l.send_offsets,
                                           result->output->data(), l.recv_bytes, l.recv_offsets));
  Record(ExecutionSpan::Activity::kCollective, 0, start, Now());
  return absl::OkStatus();
}

absl::Status Executor::Reducescatter(const Response& response, TensorEntry& entry,
                                     ops::CollectiveBackend& backend, OpResult* result) {
  const int size = backend.size();
  const int me = backend.rank();
  const TensorView& in = entry.op.input;
  const int64_t esize = static_cast<int64_t>(DataTypeSize(in.dtype));
  const std::vector<int64_t> counts = ReducescatterCounts(in.shape, size);
  result->output_shape = in.shape;
  result->output_shape[0] = ReducescatterRows(in.shape[0], size, me);
  result->output = NewOutput(counts[me] * esize);

  const absl::Time start = Now();
  const void* send = in.data;
  if (response.prescale_factor != 1.0) {
    CHORUS_ASSIGN_OR_RETURN(std::byte * scaled, FusionBuffer(in.num_bytes()));
    ops::ScaleCopy(scaled, in.data, in.num_elements(), in.dtype, response.prescale_factor);
    send = scaled;
  }
  CHORUS_RETURN_IF_ERROR(backend.ReduceScatter(send, result->output->data(), counts, in.dtype,
                                               BackendOp(response.reduce_op)));
  ops::ScaleInPlace(result->output->data(), counts[me], in.dtype, PostscaleFor(response, size));
  Record(ExecutionSpan::Activity::kCollective, 0, start, Now());
  return absl::OkStatus();
}

}  // namespace chorus::runtime
