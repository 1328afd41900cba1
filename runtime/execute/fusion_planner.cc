// File: runtime/execute/fusion_planner.cc
//
// Fusion planning (see runtime/execute/fusion_planner.h for the rules). Runs every cycle on every
// rank, so it is linear in the common case (one compatible run of small responses) and at most O(n
// * batches) otherwise: unplaced responses sit in a linked list, so a batch's scan never revisits
// placed ones. The inputs are read in place (cached responses are not copied whole): a batch takes
// its first response's fields and the names, shapes and first dimensions of all its responses,
// assigned into the output's existing buffers (PlanFusionInto).
#include "runtime/execute/fusion_planner.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/op_kind.h"
#include "chorus/types.h"
#include "runtime/execute/collective_math.h"

namespace chorus::runtime {
namespace {

bool Fusable(const Response& r) { return !r.is_error() && KindOf(r.type).fuses; }

bool Compatible(const Response& a, const Response& b) {
  return a.type == b.type && a.dtype == b.dtype && a.reduce_op == b.reduce_op &&
         a.prescale_factor == b.prescale_factor && a.postscale_factor == b.postscale_factor &&
         a.device == b.device && a.process_set_id == b.process_set_id &&
         a.group_key == b.group_key && a.wire_dtype == b.wire_dtype;
}

// Copies every field of `from` but its tensors (names, shapes, first_dims). A field added to
// Response must be added here.
void CopyHeader(const Response& from, Response& to) {
  to.type = from.type;
  to.dtype = from.dtype;
  to.reduce_op = from.reduce_op;
  to.prescale_factor = from.prescale_factor;
  to.postscale_factor = from.postscale_factor;
  to.root_rank = from.root_rank;
  to.device = from.device;
  to.process_set_id = from.process_set_id;
  to.error_code = from.error_code;
  to.error_message = from.error_message;
  to.last_joined_rank = from.last_joined_rank;
  to.new_process_set_id = from.new_process_set_id;
  to.process_set_ranks = from.process_set_ranks;
  to.group_key = from.group_key;
  to.wire_dtype = from.wire_dtype;
}

// Resizes `v` to n elements without freeing or allocating the elements' own buffers where it
// can: elements beyond n move to `spare`, new ones come from it. A plan whose batches split the
// same tensors differently from one cycle to the next (a response of 150 names, then of 50)
// then reuses the names' and shapes' buffers instead of freeing and allocating them again.
template <typename T>
void ResizeKeeping(std::vector<T>& v, size_t n, std::vector<T>& spare) {
  while (v.size() > n) {
    spare.push_back(std::move(v.back()));
    v.pop_back();
  }
  while (v.size() < n && !spare.empty()) {
    v.push_back(std::move(spare.back()));
    spare.pop_back();
  }
  v.resize(n);
}

// Makes `to` the fusion of responses[parts[0]], responses[parts[1]], ... (in order;
// compatible), assigning into its existing names and shapes so that their buffers are reused;
// appends each name's source index to `sources` (if set).
void AssignFused(absl::Span<const Response* const> responses, const std::vector<size_t>& parts,
                 Response& to, std::vector<int32_t>* sources) {
  CopyHeader(*responses[parts[0]], to);
  size_t names = 0, shapes = 0;
  for (size_t p : parts) {
    names += responses[p]->names.size();
    shapes += responses[p]->shapes.size();
  }
  // Per thread, like PlanFusionInto's scratch: the planning loop's own.
  thread_local std::vector<std::string> spare_names;
  thread_local std::vector<std::vector<int64_t>> spare_shapes;
  ResizeKeeping(to.names, names, spare_names);
  ResizeKeeping(to.shapes, shapes, spare_shapes);
  to.first_dims.clear();
  size_t n = 0, s = 0;
  for (size_t p : parts) {
    const Response* r = responses[p];
    for (const std::string& name : r->names) {
      to.names[n++].assign(name);
      if (sources != nullptr) sources->push_back(static_cast<int32_t>(p));
    }
    for (const std::vector<int64_t>& shape : r->shapes) {
      to.shapes[s++].assign(shape.begin(), shape.end());
    }
    to.first_dims.insert(to.first_dims.end(), r->first_dims.begin(), r->first_dims.end());
  }
}

}  // namespace

int64_t ResponseBytes(const Response& response, int set_size) {
  const auto elem = static_cast<int64_t>(DataTypeSize(response.dtype));
  int64_t bytes = 0;
  if (response.type != OpType::kAllgather) {
    for (const std::vector<int64_t>& shape : response.shapes) bytes += NumElements(shape) * elem;
    return bytes;
  }
  const size_t ranks = set_size > 0 ? static_cast<size_t>(set_size) : 0;
  for (size_t i = 0; i < response.shapes.size(); ++i) {
    const std::vector<int64_t>& shape = response.shapes[i];
    if (shape.empty()) continue;  // a 0-d allgather is rejected by the coordinator
    int64_t rows = 0;
    for (size_t r = 0; r < ranks; ++r) {
      const size_t at = i * ranks + r;
      // A short first_dims (malformed input) counts the first rank's rows.
      rows += at < response.first_dims.size() ? response.first_dims[at] : shape[0];
    }
    bytes += rows * RowElements(shape) * elem;
  }
  return bytes;
}

std::vector<Response> PlanFusion(absl::Span<const Response* const> responses,
                                 int64_t threshold_bytes,
                                 const std::function<int(int32_t)>& set_size_of) {
  std::vector<Response> out;
  out.resize(PlanFusionInto(responses, threshold_bytes, set_size_of, &out));
  return out;
}

size_t PlanFusionInto(absl::Span<const Response* const> responses, int64_t threshold_bytes,
                      const std::function<int(int32_t)>& set_size_of, std::vector<Response>* out,
                      std::vector<int32_t>* sources) {
  const size_t n = responses.size();
  if (sources != nullptr) sources->clear();
  size_t used = 0;  // out's first `used` responses are this plan's
  auto slot = [&]() -> Response& {
    if (used == out->size()) out->emplace_back();
    return (*out)[used++];
  };

  // Byte sizes of the fusable ungrouped responses (the only ones the threshold applies to).
  // Scratch kept per thread, so that planning the same batches every cycle allocates nothing.
  thread_local std::vector<int64_t> bytes;
  thread_local std::vector<size_t> next, prev, batch;
  bytes.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Response& r = *responses[i];
    if (!Fusable(r) || !r.group_key.empty()) continue;
    const int set_size = r.type == OpType::kAllgather ? set_size_of(r.process_set_id) : 0;
    bytes[i] = ResponseBytes(r, set_size);
  }

  // Doubly linked list of unplaced indices; n is the end sentinel.
  next.resize(n);
  prev.resize(n);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1;
    prev[i] = i == 0 ? n : i - 1;
  }
  size_t head = 0;
  auto unlink = [&](size_t i) {
    if (prev[i] == n) {
      head = next[i];
    } else {
      next[prev[i]] = next[i];
    }
    if (next[i] != n) prev[next[i]] = prev[i];
  };

  while (head != n) {
    const size_t first = head;
    unlink(first);
    const Response& base = *responses[first];
    if (!Fusable(base)) {
      slot() = base;
      if (sources != nullptr) {
        sources->insert(sources->end(), base.names.size(), static_cast<int32_t>(first));
      }
      continue;
    }
    batch.assign(1, first);
    const bool grouped = !base.group_key.empty();
    int64_t total = bytes[first];
    if (grouped || (threshold_bytes > 0 && total <= threshold_bytes)) {
      for (size_t j = head; j != n;) {
        const size_t after = next[j];
        const Response& cand = *responses[j];
        if (Fusable(cand) && Compatible(base, cand) &&
            (grouped || total + bytes[j] <= threshold_bytes)) {
          total += bytes[j];
          batch.push_back(j);
          unlink(j);
        }
        j = after;
      }
    }
    AssignFused(responses, batch, slot(), sources);
  }
  return used;
}

std::vector<Response> PlanFusion(const std::vector<Response>& responses, int64_t threshold_bytes,
                                 const std::function<int(int32_t)>& set_size_of) {
  std::vector<const Response*> in;
  in.reserve(responses.size());
  for (const Response& r : responses) in.push_back(&r);
  return PlanFusion(in, threshold_bytes, set_size_of);
}

}  // namespace chorus::runtime
