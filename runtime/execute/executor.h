// File: runtime/execute/executor.h
//
// Runs one (fused) Response on this rank over a process set's CollectiveBackend: copies into
// and out of the fusion buffer, scaling, output allocation, and the collective itself. Every
// rank derives the same pieces, and so the same collectives, from the same Response and
// SharedConfig; a joined rank contributes the reduction's identity in the same layout (Note
// [Pipelined fusion] in docs/fusion.md). A fusion buffer is mapped only before a response,
// after the set's members agreed that each could map it, so one rank out of memory fails the
// response's ops on every member instead of leaving its peers waiting (Note [Fusion buffer
// reservation] in docs/fusion.md).
//
// Thread-safety: thread-compatible; background-thread-only.
#ifndef CHORUS_RUNTIME_EXECUTE_EXECUTOR_H_
#define CHORUS_RUNTIME_EXECUTE_EXECUTOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "ops/collective_backend.h"
#include "runtime/execute/huge_pages.h"
#include "runtime/message.h"
#include "runtime/submit/tensor_entry.h"

namespace chorus::runtime {

// What the executor did, for timelines: `activity` on response.names[index] from start to end.
struct ExecutionSpan {
  enum class Activity : uint8_t { kMemcpyIn, kCollective, kMemcpyOut };
  Activity activity = Activity::kCollective;
  int32_t index = 0;
  absl::Time start;
  absl::Time end;
  int64_t chunks = 0;  // kCollective of a tensor reduced in place: its pipeline chunks
};

// Alltoall: sends send_rows[r] to rank r, returns what every rank sends to this one.
// Collective over the backend's set.
absl::StatusOr<std::vector<int64_t>> ExchangeRowCounts(ops::CollectiveBackend& backend,
                                                       const std::vector<int64_t>& send_rows);

// An upper bound on the blocking backend calls a member of the response's process set makes to
// run `response` (Execute, or the GPU data plane's launch), whose members all use
// `pipeline_chunk_bytes`: the fusion buffer's agreement, each piece of an allreduce, one call per
// tensor of the other types, an alltoall's exchanges, a GPU lane's creation. A rank outside the
// set allows its next call that much longer (Note [No-progress bound] in
// runtime/progress/progress_watchdog.h). `hierarchical`: the set may run hierarchical collectives
// (ops/hierarchical/hierarchical_backend.h), three sub-collectives each, whose GPU lanes join
// two more communicators.
int64_t MaxBlockingCalls(const Response& response, int64_t pipeline_chunk_bytes,
                         bool hierarchical = false);

// Maps a fusion buffer of at least `bytes` bytes; null when out of memory.
using FusionBufferAllocator = std::function<HugePageBuffer(int64_t bytes)>;

class Executor {
 public:
  struct Options {
    // Collapse the pages of tensors reduced in place into huge pages first, and map the fusion
    // buffer on huge pages (Note [Huge pages for large tensors] in docs/fusion.md).
    bool huge_pages = false;
    // Maps the fusion buffer. Default: AllocateHugePageBuffer(bytes, huge_pages). Tests inject
    // failures here.
    FusionBufferAllocator allocate;
  };

  explicit Executor(const SharedConfig& config, bool huge_pages = false);
  Executor(const SharedConfig& config, Options options);

  // Windows of packed tensors reduced so far (Note [Zero-copy windows] in docs/fusion.md):
  // through the fusion buffer, and where they lie.
  struct Counters {
    int64_t copied_windows = 0;
    int64_t zero_copy_windows = 0;
  };
  const Counters& counters() const { return counters_; }

  // Runs later responses with `config`'s pipeline chunk size and in-place minimum (autotune:
  // runtime/autotune/autotuner.h). A set's fusion buffer is agreed on again when it must grow.
  // REQUIRES: every member of every process set makes the same change between the same two
  // responses of the global order.
  void Reconfigure(const SharedConfig& config) { config_ = config; }

  // Executes `response` (non-error, a data op: allreduce, allgather, broadcast, alltoall,
  // reducescatter or barrier) and fills results[i] for entries[i]. entries[i] is this rank's
  // entry for response.names[i], or null when this rank does not hold it (a joined rank in an
  // allreduce). Returns the collective's status: a non-OK status means the backend failed and
  // the caller must treat the transport as broken; results then carry that status too. An op
  // every rank of the set agrees to refuse (an alltoall message too large for one transport
  // call, a fusion buffer some rank could not map: Note [Fusion buffer reservation] in
  // docs/fusion.md) instead returns OK with the error in its result.
  // With `trace`, appends what it did (for timelines); without, reads no clock.
  // REQUIRES: entries.size() == response.names.size(); this rank is a member of the backend.
  absl::Status Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                       ops::CollectiveBackend& backend, std::vector<OpResult>* results,
                       std::vector<ExecutionSpan>* trace = nullptr);

 private:
  absl::Status Allreduce(const Response& response, const std::vector<TensorEntry*>& entries,
                         ops::CollectiveBackend& backend);
  // An allreduce over a set of one rank: the reduction is the identity, so only the scaling
  // (and the copy into an output tensor) remains: no fusion buffer, no collective.
  void AllreduceAlone(const Response& response, const std::vector<TensorEntry*>& entries);
  absl::Status Allgather(const Response& response, const std::vector<TensorEntry*>& entries,
                         ops::CollectiveBackend& backend, std::vector<OpResult>* results);
  absl::Status Broadcast(const Response& response, const std::vector<TensorEntry*>& entries,
                         ops::CollectiveBackend& backend);
  absl::Status Alltoall(const Response& response, TensorEntry& entry,
                        ops::CollectiveBackend& backend, OpResult* result);
  absl::Status Reducescatter(const Response& response, TensorEntry& entry,
                             ops::CollectiveBackend& backend, OpResult* result);

  // The clock when tracing, else a constant.
  absl::Time Now() const { return trace_ != nullptr ? absl::Now() : absl::InfinitePast(); }
  void Record(ExecutionSpan::Activity activity, size_t index, absl::Time start, absl::Time end,
              int64_t chunks = 0);

  // The most fusion buffer any member of a set of `set_size` ranks may use for `response`
  // (Note [Fusion buffer reservation] in docs/fusion.md); 0 when it uses none.
  int64_t FusionBytes(const Response& response, int set_size) const;
  // Makes the fusion buffer hold FusionBytes(response) on every member of the set, agreeing
  // with them when the set's reservation grows. OK with `*refused` set when some member could
  // not map it (the ops must fail); non-OK when the agreement's collective failed.
  absl::Status Reserve(const Response& response, ops::CollectiveBackend& backend,
                       absl::Status* refused);
  // The fusion buffer, for at most `bytes` bytes (contents undefined).
  // REQUIRES: `bytes` within what Reserve reserved for the response being executed.
  absl::StatusOr<std::byte*> FusionBuffer(int64_t bytes);

  SharedConfig config_;
  Options options_;
  HugePageAdvisor huge_pages_;  // may be off although options_.huge_pages (an old kernel)
  HugePageBuffer fusion_buffer_;
  int64_t fusion_capacity_ = 0;
  // Per process set id (never reused): the fusion-buffer bytes every member agreed it holds.
  absl::flat_hash_map<int32_t, int64_t> reserved_;
  std::vector<ExecutionSpan>* trace_ = nullptr;  // during Execute only
  std::vector<size_t> packed_;                   // Allreduce's scratch
  Counters counters_;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_EXECUTE_EXECUTOR_H_
