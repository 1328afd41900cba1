// File: runtime/message.h
//
// In-memory forms of the negotiation messages (proto/negotiation.proto). Only
// runtime/negotiate/wire_codec.cc converts between the two.
//
// A Request says "this rank is ready to run this named op with these parameters". A Response
// says "every rank of the set is ready: run these tensors (in this order) as one collective", or
// carries an error that every rank delivers to the named tensors' callbacks.
//
// Thread-safety: plain values (thread-compatible).
#ifndef CHORUS_RUNTIME_MESSAGE_H_
#define CHORUS_RUNTIME_MESSAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "chorus/types.h"

namespace chorus::runtime {

struct Request {
  int32_t request_rank = 0;  // world rank of the sender
  OpType type = OpType::kAllreduce;
  std::string name;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  ReduceOp reduce_op = ReduceOp::kSum;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  int32_t root_rank = 0;
  int32_t device = kCpuDevice;
  int32_t process_set_id = kGlobalProcessSetId;
  std::string group_key;   // empty: not part of a group
  int32_t group_size = 0;  // number of tensors in the group
  std::vector<int64_t> splits;
  std::vector<int32_t> process_set_ranks;  // kAddProcessSet
  int32_t wire_dtype = -1;                 // allreduce: the DataType it is reduced in; -1: `dtype`

  bool operator==(const Request&) const = default;
};

struct RequestList {
  std::vector<Request> requests;
  bool shutdown = false;
};

struct Response {
  OpType type = OpType::kAllreduce;
  // Tensors of this (possibly fused) op, in execution order.
  std::vector<std::string> names;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  int32_t root_rank = 0;
  int32_t device = kCpuDevice;
  int32_t process_set_id = kGlobalProcessSetId;
  // shapes[i] is the shape of names[i] (allgather: its shape on the set's first rank).
  std::vector<std::vector<int64_t>> shapes;
  // allgather: first dimension of names[i] on set rank r at [i * set_size + r].
  std::vector<int64_t> first_dims;
  // Non-OK: an error response; every rank fails the named ops with this status.
  absl::StatusCode error_code = absl::StatusCode::kOk;
  std::string error_message;
  int32_t last_joined_rank = -1;           // kJoin
  int32_t new_process_set_id = -1;         // kAddProcessSet, kRemoveProcessSet
  std::vector<int32_t> process_set_ranks;  // kAddProcessSet
  std::string group_key;                   // the group these tensors belong to, if any
  int32_t wire_dtype = -1;                 // allreduce: reduced in this DataType; -1: dtype

  bool is_error() const { return error_code != absl::StatusCode::kOk; }
  absl::Status status() const { return absl::Status(error_code, error_message); }
  bool operator==(const Response&) const = default;
};

// The values of the parameters autotune tunes (runtime/autotune/knob_space.h): one point of its
// search.
struct TunedParameters {
  int64_t fusion_threshold_bytes = 0;
  int64_t pipeline_chunk_bytes = 0;
  int64_t inplace_min_bytes = 0;
  absl::Duration cycle_time;
  // Tuned only where a hierarchical allreduce applies to the world; absent otherwise.
  std::optional<bool> hierarchical_allreduce;
  bool operator==(const TunedParameters&) const = default;
};

// Rank 0's autotune decision, carried by the response list of one cycle: every rank applies it
// in that cycle, before it executes the cycle's responses.
struct AutotuneUpdate {
  TunedParameters apply;  // the parameters in force from this cycle on
  TunedParameters best;   // the best point of the search so far (where a new world's starts)
  bool done = false;      // the search is over: `apply` is its choice
  bool operator==(const AutotuneUpdate&) const = default;
};

struct ResponseList {
  std::vector<Response> responses;
  bool shutdown = false;
  // World ranks that have joined and not yet been released by a completed join.
  std::vector<int32_t> joined_ranks;
  // Rank 0 autotunes and changes the parameters in this cycle.
  std::optional<AutotuneUpdate> autotune;
};

// Parameters every rank must use identically; rank 0's values are broadcast at init.
struct SharedConfig {
  int32_t protocol_version = 1;
  int64_t fusion_threshold_bytes = 0;
  int64_t pipeline_chunk_bytes = 0;
  int64_t inplace_min_bytes = 0;
  int32_t cache_capacity = 0;
  int32_t num_nccl_streams = 1;
  // CHORUS_HIERARCHICAL_ALLREDUCE / _ALLGATHER. What the loop hands each batch's data plane;
  // changing them (at one point of the global order on every rank) switches the algorithm from
  // the next batch on. Autotune sets hierarchical_allreduce where the knob applies
  // (runtime/autotune/knob_space.h).
  bool hierarchical_allreduce = false;
  bool hierarchical_allgather = false;
  // Present when rank 0 autotunes: the point every rank starts this world with (its fusion,
  // pipeline and in-place values replace the ones above, its cycle time every rank's own).
  std::optional<TunedParameters> autotune_start;
  // With autotune_start: the world's number in the autotune log (rank 0's).
  int64_t autotune_generation = 0;
  bool operator==(const SharedConfig&) const = default;
};

// The most elements a tensor may have (Runtime checks it at submission): its size in bytes, at
// most 8 an element, and the sums of a fused batch's sizes stay far from overflowing int64.
inline constexpr int64_t kMaxElements = int64_t{1} << 56;

// True for a shape a rank may send: every dimension >= 0, and the product of its non-zero
// dimensions at most kMaxElements. Zeros are left out of the product so that every partial
// product (a row's elements, say) is bounded too, not only the tensor's element count.
inline bool IsValidShape(const std::vector<int64_t>& shape) {
  int64_t product = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) continue;
    if (__builtin_mul_overflow(product, d, &product) || product > kMaxElements) return false;
  }
  return true;
}

// 2: the cycle's bit vector carries the OR of held cache bits (Note [Cache bit vector]).
// 3: the handshake gathers every rank's local and cross numbers (hierarchical collectives).
// 4: the response list may carry rank 0's autotune decision, the shared config its start.
inline constexpr int32_t kProtocolVersion = 4;

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_MESSAGE_H_
