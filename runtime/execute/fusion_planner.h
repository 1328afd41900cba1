// File: runtime/execute/fusion_planner.h
//
// Fusion planning: merges compatible single- or multi-tensor Responses into fewer, larger ones.
// A pure function of its inputs, run identically on every rank (the inputs are the same
// globally ordered list and rank 0's shared config), so every rank executes the same fused
// batches in the same order. The rules are on PlanFusion.
//
// Thread-safety: stateless.
#ifndef CHORUS_RUNTIME_EXECUTE_FUSION_PLANNER_H_
#define CHORUS_RUNTIME_EXECUTE_FUSION_PLANNER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/types/span.h"

#include "runtime/message.h"

namespace chorus::runtime {

// Bytes a response moves: allreduce, the sum of NumElements(shape) * dtype size; allgather, the
// gathered size, sum over ranks of first_dims * (elements per row) * dtype size. For allgather,
// `set_size` is its process set's size.
int64_t ResponseBytes(const Response& response, int set_size);

// Rules:
// - Only allreduce and allgather responses fuse; every other response (and every error
//   response) passes through unchanged, alone.
// - Two responses are compatible when type, dtype, reduce_op, prescale, postscale, device,
//   process set and wire dtype are equal and both have the same group_key (empty = ungrouped).
// - Responses with a non-empty group_key are fused with all other responses of that group into
//   one response, whatever its size (a group executes as one unit).
// - Ungrouped ones: walking the list in order, a batch starts at the first unplaced response
//   and takes each later compatible unplaced response while the batch's bytes (ResponseBytes)
//   stay <= threshold_bytes; a response larger than the threshold forms a batch of its own.
//   threshold_bytes == 0 disables fusion of ungrouped responses.
// - Output order: batches in the order of their first response; within a batch, input order.
// `set_size_of(process_set_id)` returns the size of a process set. The responses are only
// read (the fused ones are copies).
std::vector<Response> PlanFusion(absl::Span<const Response* const> responses,
                                 int64_t threshold_bytes,
                                 const std::function<int(int32_t)>& set_size_of);
// PlanFusion into `*out`, reusing the buffers of the responses it holds: a loop that plans
// batches of the same tensors every cycle allocates almost nothing. Returns the plan's length
// k: the plan is (*out)[0, k); the responses after it are spare buffers, kept for later plans.
// With `sources`, also says where each planned name came from: (*sources)[j] is the index in
// `responses` of the j-th name of the plan (the names of (*out)[0], then of (*out)[1], ...).
size_t PlanFusionInto(absl::Span<const Response* const> responses, int64_t threshold_bytes,
                      const std::function<int(int32_t)>& set_size_of, std::vector<Response>* out,
                      std::vector<int32_t>* sources = nullptr);
std::vector<Response> PlanFusion(const std::vector<Response>& responses, int64_t threshold_bytes,
                                 const std::function<int(int32_t)>& set_size_of);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_EXECUTE_FUSION_PLANNER_H_
