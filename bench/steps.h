// File: bench/steps.h
//
// `chorus_bench steps`: the gradient traffic of one data-parallel training step. A chorus step
// submits one in-place float32 Average allreduce per tensor of a tensor set (bench/
// tensor_sets.h) in reverse definition order, as backward produces them, as fast as it can,
// then releases every handle: as registered ops (Note [Registered ops] in chorus.h; the
// "chorus" configuration, which the ratios compare) and through Enqueue ("chorus_enqueue"). Raw MPI
// baselines on MPI_COMM_WORLD over the same bytes, all MPI_Allreduce(MPI_IN_PLACE, MPI_SUM) on one
// contiguous float32 buffer of the set's size:
//   (a) one call over the whole buffer;
//   (b) one call per tensor (the tensor's slice), in reverse order: no fusion;
//   (c) with `chunk_sweep`: the buffer cut into pieces of C bytes, one call per piece, for C in
//       1, 2, 4, 8, 16, 32 MiB.
// With `timeline_path`, a second chorus configuration records a timeline (its cost is the
// timeline's overhead).
// Measurements are interleaved (every step index runs chorus, then each baseline), each
// preceded by an MPI_Barrier; a step's time is the maximum over ranks.
//
// Before timing, every configuration runs once on rank-dependent inputs and its result is
// checked against the exact expected average (chorus) or sum (raw).
#ifndef CHORUS_BENCH_STEPS_H_
#define CHORUS_BENCH_STEPS_H_

#include <string>

#include "absl/status/statusor.h"

#include <nlohmann/json.hpp>

namespace chorus::bench {

struct StepsOptions {
  std::string tensor_set = "resnet50";  // a name from TensorSetNames()
  int steps = 20;                       // timed steps, >= 1
  int warmup = 3;                       // untimed steps before them, >= 0
  bool chunk_sweep = false;             // also run baseline (c)
  // Non-empty: also time chorus steps recorded into this timeline file (start_timeline before
  // and stop_timeline after each such step, both untimed; the file keeps the last one).
  // REQUIRES CHORUS_TIMELINE to have been set at init (the bench sets DYNAMIC).
  std::string timeline_path;
  // Also time chorus on the UCX controller (CHORUS_CONTROLLER=ucx: the MPI-less data plane,
  // here with addresses exchanged over MPI): before each such step chorus is re-initialised on
  // UCX and warmed up, after it re-initialised on MPI (all untimed).
  bool compare_controllers = false;
  // Chorus's gradients: slices of one buffer in submission order ("bucket", as gradients that
  // are views into a bucket lie), or one allocation each ("separate").
  std::string grad_layout = "bucket";
};

// Runs the benchmark and prints its table on rank 0; returns the results as JSON (every rank).
// REQUIRES: MPI initialised with MPI_THREAD_MULTIPLE, chorus initialised on MPI_COMM_WORLD,
// called from the main thread with no chorus op in flight. Collective.
// Errors: DataLoss on every rank when a configuration computes a wrong result (the ranks agree
// first). Any other error (bad options included) may come from one rank only: the caller must
// then abort the job.
absl::StatusOr<nlohmann::json> RunSteps(const StepsOptions& options);

}  // namespace chorus::bench

#endif  // CHORUS_BENCH_STEPS_H_
