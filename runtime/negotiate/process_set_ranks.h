// File: runtime/negotiate/process_set_ranks.h
//
// The one rule for the world ranks of a process set, shared by every place that accepts a set:
// Runtime (add_process_set on the submitting rank), BackgroundLoop::Handshake (init-time sets)
// and the Coordinator (add_process_set as negotiated by rank 0). One function, so that the
// three agree on what is valid and say it in the same words.
//
// Thread-safety: stateless.
#ifndef CHORUS_RUNTIME_NEGOTIATE_PROCESS_SET_RANKS_H_
#define CHORUS_RUNTIME_NEGOTIATE_PROCESS_SET_RANKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace chorus::runtime {

// OK when `ranks` is a valid member list of a process set in a world of `world_size` ranks:
// non-empty, strictly ascending (so without duplicates), every rank in [0, world_size).
// Otherwise InvalidArgument "process set ranks [r0, r1, ...] must be non-empty, ascending,
// unique world ranks below <world_size>"; callers add their own context (the op, the set).
absl::Status CheckProcessSetRanks(absl::Span<const int32_t> ranks, int32_t world_size);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_NEGOTIATE_PROCESS_SET_RANKS_H_
