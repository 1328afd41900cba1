// File: bench/overhead.h
//
// `chorus_bench overhead`: the runtime's own cost per tensor, with no bytes to move. For each
// count n of tensors (1, 10, 100, 1000, 10000 by default), each of `bytes` bytes (float32), a
// step submits n in-place Average allreduces (last tensor first, as backward produces them)
// and then releases every handle; it runs on one rank, where an allreduce moves nothing
// (Executor::AllreduceAlone: no fusion buffer, no collective), so every nanosecond measured is
// chorus's bookkeeping: submission, the background loop's cycle (cache bit vector, fusion
// plan, completion) and the wake-ups between the threads. Two ways to submit, in the same run:
//   registered  RegisterOp once per tensor, then Submit each step (Note [Registered ops]);
//   enqueue     EnqueueFrom of an OpRequest refilled per op (the general path; names copied
//               and hashed, handles in the handle table).
// Reported per tensor: submission (first submit to last submit returned, / n) and the whole
// step (first submit to last release returned, / n), as medians over the timed steps; and the
// heap allocations per step, in the process and on the submitting thread (bench/
// alloc_counter.h). Runs on any number of ranks (then bytes do move: the figures include the
// collectives), but the host cost is what one rank shows.
#ifndef CHORUS_BENCH_OVERHEAD_H_
#define CHORUS_BENCH_OVERHEAD_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

#include <nlohmann/json.hpp>

namespace chorus::bench {

struct OverheadOptions {
  std::vector<int64_t> counts = {1, 10, 100, 1000, 10000};
  int64_t bytes = 1024;  // per tensor, a multiple of 4
  int steps = 200;       // timed steps per count and way, >= 1
  int warmup = 10;       // untimed steps first, >= 0
};

// Prints the table on rank 0; returns the results as JSON (every rank). REQUIRES: as RunSteps
// (bench/steps.h). Collective.
absl::StatusOr<nlohmann::json> RunOverhead(const OverheadOptions& options);

}  // namespace chorus::bench

#endif  // CHORUS_BENCH_OVERHEAD_H_
