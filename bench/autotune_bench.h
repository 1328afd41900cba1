// File: bench/autotune_bench.h
//
// `chorus_bench autotune`: autotune (docs/autotune.md) against chorus's defaults and against the
// best point of an exhaustive grid over the same knobs, on the training steps of a tensor set
// (bench/step_bench.h), in one run:
//   1. search: chorus re-initialised with CHORUS_AUTOTUNE=1 runs steps until rank 0's autotune
//      log holds the search's choice; its steps and time are reported;
//   2. grid: for every point of the grid (4 fusion thresholds x 4 pipeline chunks x 4 in-place
//      minimums x 3 cycle times, chorus's defaults among them), chorus re-initialised with those
//      values runs `grid_warmup` untimed and `grid_steps` timed steps; the points are ranked by
//      their median step. Where hierarchical allreduce is a knob of the search (its log's choice
//      has a value for it: several hosts, the same number of ranks on each), every point runs
//      with it off and on (384 points), and the choice is compared with its value;
//   3. comparison: the defaults, the autotuned choice and the grid's best `grid_finalists`
//      points, each re-initialised, warmed up and timed for `steps` steps, in turn, for `rounds`
//      rounds (the order rotating each round). A configuration's time is the median over rounds
//      of its round's median step (a step's time is the maximum over ranks); the grid's best is
//      its fastest finalist in this phase.
// Steps run back to back, as in training (no barrier between them), in every phase.
// Every configuration is checked once against the exact expected result before it is timed.
//
// Thread-safety: the main thread, while no chorus op is in flight (bench/measure.h).
#ifndef CHORUS_BENCH_AUTOTUNE_BENCH_H_
#define CHORUS_BENCH_AUTOTUNE_BENCH_H_

#include <string>

#include "absl/status/statusor.h"

#include <nlohmann/json.hpp>

namespace chorus::bench {

struct AutotuneBenchOptions {
  std::string tensor_set = "resnet50";  // a name from TensorSetNames()
  // The search (CHORUS_AUTOTUNE_*): as chorus's defaults.
  int warmup_samples = 3;
  int steps_per_sample = 10;
  int max_samples = 20;
  // Simulated compute between steps (the forward and backward passes), in milliseconds.
  double compute_ms = 0;
  int grid_warmup = 2;
  int grid_steps = 5;
  int grid_finalists = 3;
  int warmup = 3;  // per configuration and round
  int steps = 10;  // timed, per configuration and round
  int rounds = 5;
  // Rank 0's autotune log; empty: a file in /tmp, removed afterwards.
  std::string log_path;
};

// Runs the benchmark, prints its report on rank 0 and returns the results as JSON (every rank).
// REQUIRES: MPI initialised with MPI_THREAD_MULTIPLE; chorus initialised (it is re-initialised
// for each configuration, and initialised with its defaults on return). Collective.
// Errors: DataLoss on every rank when a configuration computes a wrong result; any other error
// may come from one rank only (the caller must then abort the job).
absl::StatusOr<nlohmann::json> RunAutotuneBench(const AutotuneBenchOptions& options);

}  // namespace chorus::bench

#endif  // CHORUS_BENCH_AUTOTUNE_BENCH_H_
