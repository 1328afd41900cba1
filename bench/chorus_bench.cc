// chorus_bench: chorus's collectives against raw MPI calls on the same bytes, in the same run.
//
//   mpirun -np N chorus_bench sweep -b 8 -e 256M -f 2 [--op allreduce] [--dtype float32]
//                                   [--iters N] [--warmup N] [--json FILE]
//   mpirun -np N chorus_bench steps --tensor-set resnet50|bert-base|tiny1000 [--steps N]
//                                   [--warmup N] [--inplace-chunk-sweep] [--timeline FILE]
//                                   [--json FILE]
//   mpirun -np N chorus_bench autotune --tensor-set resnet50|... [--compute-ms MS]
//                                   [--warmup-samples N] [--steps-per-sample N] [--max-samples N]
//                                   [--grid-steps N] [--rounds N] [--steps N] [--json FILE]
//   mpirun -np 1 chorus_bench overhead [--counts 1 10 100 1000 10000] [--bytes 1024]
//                                   [--steps N] [--warmup N] [--json FILE]
//
// Initialises MPI itself (MPI_THREAD_MULTIPLE) before chorus, so chorus runs on the existing
// MPI and the raw baselines can use MPI_COMM_WORLD from this thread while no chorus op is in
// flight. Only rank 0 prints results. Exit status: 0 on success, 1 on a wrong result or a bad
// JSON path, 2 on bad arguments; other failures abort the job (MPI_Abort).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include <mpi.h>

#include "bench/autotune_bench.h"
#include "bench/measure.h"
#include "bench/overhead.h"
#include "bench/steps.h"
#include "bench/sweep.h"
#include "bench/tensor_sets.h"
#include "chorus/chorus.h"
#include "chorus/types.h"
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace chorus::bench {
namespace {

struct Args {
  SweepOptions sweep;
  StepsOptions steps;
  AutotuneBenchOptions autotune;
  OverheadOptions overhead;
  std::string json_path;
  bool run_sweep = false;
  bool run_autotune = false;
  bool run_overhead = false;
};

std::map<std::string, OpType> SweepOps() {
  std::map<std::string, OpType> ops;
  for (OpType op : {OpType::kAllreduce, OpType::kAllgather, OpType::kBroadcast, OpType::kAlltoall,
                    OpType::kReducescatter}) {
    ops[OpTypeName(op)] = op;
  }
  return ops;
}

std::map<std::string, DataType> SweepTypes() {
  std::map<std::string, DataType> types;
  for (DataType t : SweepDataTypes()) types[DataTypeName(t)] = t;
  return types;
}

template <typename V>
std::vector<std::string> Keys(const std::map<std::string, V>& map) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : map) keys.push_back(key);
  return keys;
}

// Parses the command line into `args`. Returns -1 to run, or the exit code (help, bad
// arguments); only `verbose` prints. CLI11 reports errors by exception: they end here.
int ParseArgs(int argc, char** argv, bool verbose, Args& args) {
  CLI::App app{"chorus_bench: chorus collectives against raw MPI on the same bytes"};
  app.require_subcommand(1);

  CLI::App* sweep = app.add_subcommand("sweep", "One collective over a range of sizes");
  SweepOptions& so = args.sweep;
  sweep->add_option("-b,--minbytes", so.min_bytes, "Smallest size in bytes (K/M/G suffixes)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  sweep->add_option("-e,--maxbytes", so.max_bytes, "Largest size in bytes (K/M/G suffixes)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  sweep->add_option("-f,--stepfactor", so.factor, "Multiply the size by this each row")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20))
      ->capture_default_str();
  std::string op_name = "allreduce";
  std::string dtype_name = "float32";
  sweep->add_option("--op", op_name, "Collective")
      ->check(CLI::IsMember(Keys(SweepOps())))
      ->capture_default_str();
  sweep->add_option("--dtype", dtype_name, "Element type")
      ->check(CLI::IsMember(Keys(SweepTypes())))
      ->capture_default_str();
  sweep->add_option("--iters", so.iters, "Timed iterations per size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sweep->add_option("--warmup", so.warmup, "Untimed iterations per size")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sweep->add_option("--json", args.json_path, "Also write the results to FILE as JSON")
      ->type_name("FILE");

  CLI::App* steps = app.add_subcommand("steps", "Training steps over a model's tensor set");
  StepsOptions& st = args.steps;
  steps->add_option("--tensor-set", st.tensor_set, "Tensor set")
      ->check(CLI::IsMember(TensorSetNames()))
      ->capture_default_str();
  steps->add_option("--steps", st.steps, "Timed steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  steps->add_option("--warmup", st.warmup, "Untimed steps first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  steps->add_flag("--inplace-chunk-sweep", st.chunk_sweep,
                  "Also time the buffer in 1..32 MiB pieces, one MPI_Allreduce each");
  steps->add_option("--json", args.json_path, "Also write the results to FILE as JSON")
      ->type_name("FILE");
  steps
      ->add_option("--timeline", st.timeline_path,
                   "Also time chorus steps recording a timeline into FILE (rank 0; the file "
                   "keeps the last recorded step): the timeline's overhead")
      ->type_name("FILE");
  steps
      ->add_option("--grad-layout", st.grad_layout,
                   "Chorus's gradients: slices of one buffer in submission order (bucket), or "
                   "one allocation each (separate)")
      ->check(CLI::IsMember({"bucket", "separate"}))
      ->capture_default_str();
  steps->add_flag(
      "--compare-controllers", st.compare_controllers,
      "Also time chorus on the UCX controller (the MPI-less data plane), re-initialised "
      "before each such step: UCX against MPI in the same run");

  CLI::App* autotune = app.add_subcommand(
      "autotune", "Autotune against the defaults and a grid over the same knobs (training steps)");
  AutotuneBenchOptions& at = args.autotune;
  autotune->add_option("--tensor-set", at.tensor_set, "Tensor set")
      ->check(CLI::IsMember(TensorSetNames()))
      ->capture_default_str();
  autotune->add_option("--compute-ms", at.compute_ms, "Simulated compute per step (ms)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  autotune->add_option("--warmup-samples", at.warmup_samples, "CHORUS_AUTOTUNE_WARMUP_SAMPLES")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  autotune
      ->add_option("--steps-per-sample", at.steps_per_sample, "CHORUS_AUTOTUNE_STEPS_PER_SAMPLE")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  autotune->add_option("--max-samples", at.max_samples, "CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  autotune->add_option("--grid-steps", at.grid_steps, "Timed steps per grid point")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  autotune->add_option("--grid-warmup", at.grid_warmup, "Untimed steps per grid point")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  autotune->add_option("--grid-finalists", at.grid_finalists, "Grid points in the comparison")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  autotune->add_option("--rounds", at.rounds, "Rounds of the comparison")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  autotune->add_option("--steps", at.steps, "Timed steps per configuration and round")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  autotune->add_option("--warmup", at.warmup, "Untimed steps per configuration and round")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  autotune->add_option("--autotune-log", at.log_path, "Keep the search's autotune log in FILE")
      ->type_name("FILE");
  autotune->add_option("--json", args.json_path, "Also write the results to FILE as JSON")
      ->type_name("FILE");

  CLI::App* overhead = app.add_subcommand(
      "overhead",
      "The runtime's own cost per tensor: submission and step time with nothing to move (one "
      "rank), registered ops against Enqueue, with allocations per step");
  OverheadOptions& oh = args.overhead;
  overhead->add_option("--counts", oh.counts, "Numbers of tensors per step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  overhead->add_option("--bytes", oh.bytes, "Bytes per tensor (float32: a multiple of 4)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 30))
      ->capture_default_str();
  overhead->add_option("--steps", oh.steps, "Timed steps per count and way")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  overhead->add_option("--warmup", oh.warmup, "Untimed steps first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  overhead->add_option("--json", args.json_path, "Also write the results to FILE as JSON")
      ->type_name("FILE");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream sink;
    const int code = verbose ? app.exit(e) : app.exit(e, sink, sink);
    return code == 0 ? 0 : 2;
  }
  args.run_sweep = sweep->parsed();
  args.run_autotune = autotune->parsed();
  args.run_overhead = overhead->parsed();
  if (args.run_overhead && oh.bytes % 4 != 0) {
    if (verbose) std::fprintf(stderr, "chorus_bench overhead: --bytes must be a multiple of 4\n");
    return 2;
  }
  if (args.run_sweep && so.max_bytes < so.min_bytes) {
    if (verbose) std::fprintf(stderr, "chorus_bench sweep: --maxbytes is below --minbytes\n");
    return 2;
  }
  so.op = SweepOps().at(op_name);
  so.dtype = SweepTypes().at(dtype_name);
  return -1;
}

// Everything between MPI_Init_thread and MPI_Finalize.
int Run(int argc, char** argv) {
  const int rank = WorldRank();
  Args args;
  if (int rc = ParseArgs(argc, argv, rank == 0, args); rc >= 0) return rc;

  // start_timeline needs CHORUS_TIMELINE at init, as in Horovod.
  if (!args.run_sweep && !args.run_autotune && !args.run_overhead &&
      !args.steps.timeline_path.empty()) {
    ::setenv("CHORUS_TIMELINE", "DYNAMIC", /*overwrite=*/0);
  }
  if (args.run_overhead) {
    // The response cache holds every tensor of the largest step, of both ways (unless the
    // caller says otherwise), as a training job with that many gradients would configure it.
    const int64_t largest =
        *std::max_element(args.overhead.counts.begin(), args.overhead.counts.end());
    const std::string capacity = absl::StrCat(std::max<int64_t>(2 * largest, 4096));
    ::setenv("CHORUS_CACHE_CAPACITY", capacity.c_str(), /*overwrite=*/0);
  }
  if (absl::Status st = Init(); !st.ok()) {
    std::fprintf(stderr, "chorus_bench: rank %d: chorus::Init: %s\n", rank, st.ToString().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  absl::StatusOr<nlohmann::json> result = args.run_sweep      ? RunSweep(args.sweep)
                                          : args.run_autotune ? RunAutotuneBench(args.autotune)
                                          : args.run_overhead ? RunOverhead(args.overhead)
                                                              : RunSteps(args.steps);
  if (!result.ok()) {
    // Only DataLoss is reached by every rank alike (see sweep.h, steps.h).
    if (result.status().code() != absl::StatusCode::kDataLoss) {
      std::fprintf(stderr, "chorus_bench: rank %d: %s\n", rank, result.status().ToString().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
      std::fprintf(stderr, "chorus_bench: FAILED: %s\n", result.status().ToString().c_str());
    }
    (void)Shutdown();
    return 1;
  }
  if (absl::Status st = Shutdown(); !st.ok()) {
    std::fprintf(stderr, "chorus_bench: rank %d: chorus::Shutdown: %s\n", rank,
                 st.ToString().c_str());
    return 1;
  }
  if (rank == 0 && !args.json_path.empty()) {
    if (absl::Status st = WriteTextFile(args.json_path, result->dump(2) + "\n"); !st.ok()) {
      std::fprintf(stderr, "chorus_bench: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace chorus::bench

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "chorus_bench: MPI_Init_thread failed\n");
    return 1;
  }
  int rc = 1;
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "chorus_bench: MPI provides thread level %d, MPI_THREAD_MULTIPLE needed\n",
                 provided);
  } else {
    rc = chorus::bench::Run(argc, argv);
  }
  MPI_Finalize();
  return rc;
}
