// File: bench/sweep.h
//
// `chorus_bench sweep`: one collective over a range of message sizes, nccl-tests style, timed
// through chorus (Enqueue + Release of one op per iteration) and as the equivalent raw MPI call
// on MPI_COMM_WORLD over the same buffers, in the same run.
//
// Sizes follow nccl-tests: `size` is the whole buffer in bytes (allgather: the gathered output;
// reducescatter and alltoall: the input), rounded down so that its element count divides by
// the number of ranks where the op splits it. algbw = size / time; busbw = algbw * factor with
// factor 2(n-1)/n for allreduce, (n-1)/n for allgather, reducescatter and alltoall, 1 for
// broadcast. Times are the median over iterations of the per-iteration maximum over ranks.
//
// Before timing a size, the chorus result is checked byte for byte against the raw MPI result
// (inputs are small integers, so every reduction order gives the same bytes).
#ifndef CHORUS_BENCH_SWEEP_H_
#define CHORUS_BENCH_SWEEP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

#include "chorus/types.h"
#include <nlohmann/json.hpp>

namespace chorus::bench {

struct SweepOptions {
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{128} << 20;
  int64_t factor = 2;  // > 1
  // One of allreduce, allgather, broadcast, alltoall, reducescatter.
  OpType op = OpType::kAllreduce;
  // One of the types SweepDataTypes() returns.
  DataType dtype = DataType::kFloat32;
  int iters = 20;  // >= 1
  int warmup = 5;  // >= 0
};

// The dtypes RunSweep accepts (those with a native MPI datatype and sum).
std::vector<DataType> SweepDataTypes();

// Runs the sweep and prints its table on rank 0; returns the results as JSON (every rank).
// REQUIRES: MPI initialised with MPI_THREAD_MULTIPLE, chorus initialised on MPI_COMM_WORLD,
// called from the main thread with no chorus op in flight. Collective.
// Errors: DataLoss on every rank when a chorus result differs from MPI's (the ranks agree
// first). Any other error (bad options included) may come from one rank only: the caller must
// then abort the job.
absl::StatusOr<nlohmann::json> RunSweep(const SweepOptions& options);

}  // namespace chorus::bench

#endif  // CHORUS_BENCH_SWEEP_H_
