// File: base/op_kind.h
//
// Note [Op kinds]: one row per OpType says what the runtime's rules need to know of that kind of
// op: its name, whether it moves data, reduces, fuses, groups, splits along the first dimension,
// has a root, and how the ranks' shapes must agree. The submission checks (runtime/runtime.cc),
// the coordinator's agreement rules (runtime/negotiate/coordinator.cc), the fusion planner and the
// names in errors and timelines read these columns instead of listing op types each, so a new
// collective is a row here plus what is truly its own (its negotiation of sizes, if any, and
// its backend call).
//
// Thread-safety: constant data.
#ifndef CHORUS_BASE_OP_KIND_H_
#define CHORUS_BASE_OP_KIND_H_

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "chorus/types.h"

namespace chorus {

struct OpKind {
  OpType type;
  // "allreduce", ...: errors, timelines, logs.
  const char* name;
  // The name an op of this kind gets when submitted without one ("__barrier"); nullptr: a
  // tensor op, which must be named.
  const char* default_name;
  // Moves tensor data (a tensor op), as opposed to a synchronisation (barrier, join) or a
  // negotiated change of the process sets.
  bool moves_data;
  // Combines the ranks' values with a reduce op: the reduce op must agree on every rank and the
  // dtype be reducible.
  bool reduces;
  // Concatenates (allgather, alltoall) along the first dimension: only the dimensions after the
  // first must agree among the ranks. Otherwise every rank gives the same shape.
  bool first_dim_varies;
  // Splits or concatenates along the first dimension: needs a tensor with at least one.
  bool needs_first_dim;
  // Batches of tensors of this kind fuse into one collective call.
  bool fuses;
  // Can be submitted as a group that executes as one unit (grouped_allreduce, ...).
  bool groups;
  // Has a root rank, which every rank must name alike.
  bool has_root;
  // Negotiated among every rank of the world, whatever its process set (process-set changes).
  bool global;
  // Ready while some ranks have joined (hvd.join): they contribute zeros. Other data ops
  // submitted while a rank has joined fail.
  bool proceeds_with_joined_ranks;
};

inline constexpr OpKind kOpKinds[] = {
    // type, name, default_name, moves_data, reduces, first_dim_varies, needs_first_dim, fuses,
    // groups, has_root, global, proceeds_with_joined_ranks
    {OpType::kAllreduce, "allreduce", nullptr, true, true, false, false, true, true, false, false,
     true},
    {OpType::kAllgather, "allgather", nullptr, true, false, true, true, true, true, false, false,
     false},
    {OpType::kBroadcast, "broadcast", nullptr, true, false, false, false, false, false, true, false,
     false},
    {OpType::kAlltoall, "alltoall", nullptr, true, false, true, true, false, false, false, false,
     false},
    {OpType::kReducescatter, "reducescatter", nullptr, true, true, false, true, false, true, false,
     false, false},
    {OpType::kBarrier, "barrier", "__barrier", false, false, false, false, false, false, false,
     false, false},
    {OpType::kJoin, "join", "__join", false, false, false, false, false, false, false, false,
     false},
    {OpType::kAddProcessSet, "add_process_set", "__add_process_set", false, false, false, false,
     false, false, false, true, false},
    {OpType::kRemoveProcessSet, "remove_process_set", "__remove_process_set", false, false, false,
     false, false, false, false, true, false},
};

// Row i describes the OpType of value i: rows are in the enum's order, none missing.
constexpr bool OpKindsInOrder() {
  for (size_t i = 0; i < std::size(kOpKinds); ++i) {
    if (static_cast<size_t>(kOpKinds[i].type) != i) return false;
  }
  return true;
}
static_assert(OpKindsInOrder(), "kOpKinds: one row per OpType, in the enum's order");

// True when `value` is an OpType.
constexpr bool IsValidOpType(int32_t value) {
  return value >= 0 && static_cast<size_t>(value) < std::size(kOpKinds);
}

// REQUIRES: IsValidOpType(type).
constexpr const OpKind& KindOf(OpType type) { return kOpKinds[static_cast<size_t>(type)]; }

}  // namespace chorus

#endif  // CHORUS_BASE_OP_KIND_H_
