// File: runtime/executor.h
//
// Runs one (fused) Response on this rank over a process set's CollectiveBackend: copies into
// and out of the fusion buffer, scaling, output allocation, and the collective itself.
//
// Note [Pipelined fusion]
// One giant collective over a 100 MB fusion buffer is about half as fast on CPUs as the same
// bytes in 4-8 MiB pieces (cache), and copying every tensor in and out of the buffer first costs
// as much again. So an allreduce batch is executed as:
//   - tensors of at least `inplace_min_bytes` are reduced where they are (input to output, or
//     in place), in pieces of `pipeline_chunk_bytes`, each piece scaled while still in cache;
//   - the smaller ones are packed into the fusion buffer one window of `pipeline_chunk_bytes`
//     at a time: pack (with prescale) -> reduce the window -> unpack (with postscale), so the
//     data stays in cache from copy-in to copy-out.
// Every rank derives the same pieces from the same Response and SharedConfig, so the
// collectives line up. A rank that joined holds no tensor: it contributes the identity of the
// reduction (zeros for a sum, +inf for a min, ...) in the same layout and discards the result.
//
// Note [Fusion buffer reservation]
// Mapping a larger fusion buffer can fail on one rank (out of memory) while its peers already
// wait in the response's collective. So a rank never maps one in the middle of a response:
// before executing a response, every member of its process set computes the same bound on the
// buffer any member may need for it (from the Response and SharedConfig alone; FusionBytes).
// When the bound exceeds what the set has reserved so far (the same value on every member: they
// execute the same responses of the set in the same order), every member maps a buffer of at
// least the bound (2 MiB-rounded; only where its own is smaller) and the members agree in one
// small allreduce over the set's backend whether all succeeded. If one could not, every member
// fails the response's ops with ResourceExhausted naming that rank, nothing else runs, and the
// runtime goes on (a later response that needs less runs as usual; the same one may be retried).
// The reservation only grows, so a steady loop never agrees again; a mapping is virtual memory
// until it is written.
//
// Thread-safety: thread-compatible; background-thread-only.
#ifndef CHORUS_RUNTIME_EXECUTOR_H_
#define CHORUS_RUNTIME_EXECUTOR_H_

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
#include "runtime/huge_pages.h"
#include "runtime/message.h"
#include "runtime/tensor_entry.h"

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

// Maps a fusion buffer of at least `bytes` bytes; null when out of memory.
using FusionBufferAllocator = std::function<HugePageBuffer(int64_t bytes)>;

class Executor {
 public:
  struct Options {
    // Collapse the pages of tensors reduced in place into huge pages first, and map the fusion
    // buffer on huge pages (Note [Huge pages for large tensors] in runtime/huge_pages.h).
    bool huge_pages = false;
    // Maps the fusion buffer. Default: AllocateHugePageBuffer(bytes, huge_pages). Tests inject
    // failures here.
    FusionBufferAllocator allocate;
  };

  explicit Executor(const SharedConfig& config, bool huge_pages = false);
  Executor(const SharedConfig& config, Options options);

  // Executes `response` (non-error, a data op: allreduce, allgather, broadcast, alltoall,
  // reducescatter or barrier) and fills results[i] for entries[i]. entries[i] is this rank's
  // entry for response.names[i], or null when this rank does not hold it (a joined rank in an
  // allreduce). Returns the collective's status: a non-OK status means the backend failed and
  // the caller must treat the transport as broken; results then carry that status too. An op
  // every rank of the set agrees to refuse (an alltoall message too large for one transport
  // call, a fusion buffer some rank could not map: Note [Fusion buffer reservation]) instead
  // returns OK with the error in its result.
  // With `trace`, appends what it did (for timelines); without, reads no clock.
  // REQUIRES: entries.size() == response.names.size(); this rank is a member of the backend.
  absl::Status Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                       ops::CollectiveBackend& backend, std::vector<OpResult>* results,
                       std::vector<ExecutionSpan>* trace = nullptr);

 private:
  absl::Status Allreduce(const Response& response, const std::vector<TensorEntry*>& entries,
                         ops::CollectiveBackend& backend);
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
  // (Note [Fusion buffer reservation]); 0 when it uses none.
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
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_EXECUTOR_H_
