#include "bench/steps.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include <mpi.h>

#include "base/status_macros.h"
#include "bench/measure.h"
#include "bench/step_bench.h"
#include "bench/tensor_sets.h"
#include "chorus/chorus.h"
#include "chorus/types.h"
#include "ops/mpi/mpi_datatypes.h"
#include <nlohmann/json.hpp>

namespace chorus::bench {
namespace {

constexpr int64_t kChunkSizes[] = {1 * kMiB, 2 * kMiB, 4 * kMiB, 8 * kMiB, 16 * kMiB, 32 * kMiB};

// One timed configuration.
struct Config {
  std::string key;    // stable id for JSON: "chorus", "raw_single", "raw_per_tensor", ...
  std::string label;  // table row
  int64_t calls = 0;  // collectives per step
  bool is_chorus = false;
  std::function<absl::Status()> run;
  // Untimed, around each timed run (may be null).
  std::function<absl::Status()> before;
  std::function<absl::Status()> after;
};

// Shuts chorus down and starts it again on `controller` ("mpi" or "ucx"), then runs `warmup`
// untimed steps so that the response cache is warm again.
absl::Status Reinit(StepBench& bench, const char* controller, int warmup) {
  CHORUS_RETURN_IF_ERROR(Shutdown());
  ::setenv("CHORUS_CONTROLLER", controller, /*overwrite=*/1);
  CHORUS_RETURN_IF_ERROR(Init());
  for (int i = 0; i < warmup; ++i) CHORUS_RETURN_IF_ERROR(bench.ChorusStep());
  return absl::OkStatus();
}

std::vector<Config> MakeConfigs(StepBench& bench, bool chunk_sweep,
                                const std::string& timeline_path, bool compare_controllers) {
  const int64_t n = static_cast<int64_t>(bench.tensors().size());
  const int64_t total_bytes = bench.total_elements() * static_cast<int64_t>(sizeof(float));
  std::vector<Config> configs;
  configs.push_back({"chorus", absl::StrCat("chorus: ", n, " x registered Average allreduce"), n,
                     true, [&bench] { return bench.RegisteredStep(); }, nullptr, nullptr});
  configs.push_back({"chorus_enqueue", "chorus, Enqueue per op", n, true,
                     [&bench] { return bench.ChorusStep(); }, nullptr, nullptr});
  if (!timeline_path.empty()) {
    configs.push_back({"chorus_timeline", "chorus, recording a timeline", n, true,
                       [&bench] { return bench.ChorusStep(); },
                       [timeline_path] { return StartTimeline(timeline_path); },
                       [] { return StopTimeline(); }});
  }
  if (compare_controllers) {
    configs.push_back({"chorus_ucx", absl::StrCat("chorus on UCX: ", n, " x Average allreduce"), n,
                       true, [&bench] { return bench.ChorusStep(); },
                       [&bench] { return Reinit(bench, "ucx", 2); },
                       [&bench] { return Reinit(bench, "mpi", 2); }});
  }
  configs.push_back({"raw_single", "raw (a): one MPI_Allreduce, whole buffer", 1, false,
                     [&bench] { return bench.RawSingle(); }, nullptr, nullptr});
  configs.push_back({"raw_per_tensor", "raw (b): one MPI_Allreduce per tensor", n, false,
                     [&bench] { return bench.RawPerTensor(); }, nullptr, nullptr});
  if (chunk_sweep) {
    for (int64_t chunk : kChunkSizes) {
      configs.push_back({absl::StrCat("raw_chunk_", chunk / kMiB, "MiB"),
                         absl::StrCat("raw (c): ", chunk / kMiB, " MiB pieces"),
                         (total_bytes + chunk - 1) / chunk, false,
                         [&bench, chunk] { return bench.RawChunked(chunk); }, nullptr, nullptr});
    }
  }
  return configs;
}

// Runs `config` once on fresh rank-dependent inputs and checks the result on every rank.
// DataLoss on every rank if any rank is wrong.
absl::Status Verify(StepBench& bench, const Config& config) {
  std::string error;
  if (config.is_chorus) {
    bench.FillChorus();
  } else {
    bench.FillRaw();
  }
  if (config.before) CHORUS_RETURN_IF_ERROR(config.before());
  CHORUS_RETURN_IF_ERROR(config.run());
  if (config.after) CHORUS_RETURN_IF_ERROR(config.after());
  const bool ok = config.is_chorus ? bench.CheckChorus(&error) : bench.CheckRaw(&error);
  if (!ok) {
    std::fprintf(stderr, "chorus_bench steps: rank %d: %s computed a wrong result: %s\n",
                 WorldRank(), config.label.c_str(), error.c_str());
  }
  CHORUS_ASSIGN_OR_RETURN(bool all_ok, AllRanksOk(ok));
  if (!all_ok) {
    return absl::DataLossError(absl::StrCat("steps: ", config.label, " computed a wrong result"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> RunSteps(const StepsOptions& options) {
  if (options.steps < 1 || options.warmup < 0) {
    return absl::InvalidArgumentError("steps: need steps >= 1 and warmup >= 0");
  }
  CHORUS_ASSIGN_OR_RETURN(std::vector<TensorSpec> tensors, GetTensorSet(options.tensor_set));
  if (TotalElements(tensors) > INT_MAX) {
    return absl::InvalidArgumentError("steps: tensor set too large for one MPI_Allreduce");
  }
  const int rank = WorldRank();
  const int ranks = WorldSize();
  const bool print = rank == 0;
  StepBench bench(
      std::move(tensors), rank, ranks,
      options.grad_layout == "bucket" ? StepBench::Layout::kBucket : StepBench::Layout::kSeparate);
  const std::vector<Config> configs =
      MakeConfigs(bench, options.chunk_sweep, options.timeline_path, options.compare_controllers);
  size_t first_raw = 1;  // configs: chorus, chorus_enqueue, [chorus_timeline], [chorus_ucx], raw...
  while (configs[first_raw].is_chorus) ++first_raw;
  const int64_t num_tensors = static_cast<int64_t>(bench.tensors().size());
  const int64_t total_bytes = bench.total_elements() * static_cast<int64_t>(sizeof(float));

  if (print) {
    std::printf(
        "# chorus_bench steps: %s, %lld float32 tensors, %lld elements (%.2f MB), %d ranks, "
        "%d steps (+%d warmup), chorus's gradients: %s layout\n",
        options.tensor_set.c_str(), static_cast<long long>(num_tensors),
        static_cast<long long>(bench.total_elements()), static_cast<double>(total_bytes) / 1e6,
        ranks, options.steps, options.warmup, options.grad_layout.c_str());
    std::printf("# raw = MPI_Allreduce(MPI_IN_PLACE, MPI_SUM) on MPI_COMM_WORLD, same bytes\n");
    std::fflush(stdout);
  }

  for (const Config& config : configs) CHORUS_RETURN_IF_ERROR(Verify(bench, config));
  bench.ClearRaw();
  if (print) {
    std::printf("# verified: every configuration computed the expected result\n");
    std::fflush(stdout);
  }

  const size_t steps = static_cast<size_t>(options.steps);
  std::vector<double> times(configs.size() * steps);  // config-major
  for (int s = 0; s < options.warmup + options.steps; ++s) {
    for (size_t c = 0; c < configs.size(); ++c) {
      if (configs[c].before) CHORUS_RETURN_IF_ERROR(configs[c].before());
      CHORUS_ASSIGN_OR_RETURN(double t, TimeOnce(configs[c].run));
      if (configs[c].after) CHORUS_RETURN_IF_ERROR(configs[c].after());
      if (s >= options.warmup) times[c * steps + static_cast<size_t>(s - options.warmup)] = t;
    }
  }
  CHORUS_ASSIGN_OR_RETURN(std::vector<double> max_times, MaxOverRanks(times));

  std::vector<Summary> summaries;
  for (size_t c = 0; c < configs.size(); ++c) {
    const auto begin = max_times.begin() + static_cast<std::ptrdiff_t>(c * steps);
    summaries.push_back(
        Summarize(std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(steps))));
  }
  const double chorus_median = summaries[0].median;
  size_t fastest = first_raw;  // configs[0] is chorus, configs[first_raw..] are raw
  for (size_t c = first_raw + 1; c < configs.size(); ++c) {
    if (summaries[c].median < summaries[fastest].median) fastest = c;
  }
  auto over = [&](size_t c) {
    return summaries[c].median > 0 ? chorus_median / summaries[c].median : 0.0;
  };

  nlohmann::json out = {{"benchmark", "steps"},
                        {"tensor_set", options.tensor_set},
                        {"num_tensors", num_tensors},
                        {"total_elements", bench.total_elements()},
                        {"total_bytes", total_bytes},
                        {"dtype", "float32"},
                        {"ranks", ranks},
                        {"grad_layout", options.grad_layout},
                        {"steps", options.steps},
                        {"warmup", options.warmup},
                        {"time_statistic", "per step: max over ranks"},
                        {"verified", true},
                        {"configs", nlohmann::json::array()}};
  if (print) {
    std::printf("# %-40s %6s %10s %10s %10s %12s\n", "configuration", "calls", "median ms",
                "p10 ms", "p90 ms", "chorus/this");
  }
  for (size_t c = 0; c < configs.size(); ++c) {
    const Summary& s = summaries[c];
    if (print) {
      std::printf("  %-40s %6lld %10.3f %10.3f %10.3f %12.2f\n", configs[c].label.c_str(),
                  static_cast<long long>(configs[c].calls), s.median * 1e3, s.p10 * 1e3,
                  s.p90 * 1e3, over(c));
    }
    out["configs"].push_back({{"key", configs[c].key},
                              {"label", configs[c].label},
                              {"calls_per_step", configs[c].calls},
                              {"median_ms", s.median * 1e3},
                              {"p10_ms", s.p10 * 1e3},
                              {"p90_ms", s.p90 * 1e3},
                              {"min_ms", s.min * 1e3},
                              {"max_ms", s.max * 1e3},
                              {"chorus_over_this", over(c)}});
  }
  out["fastest_raw"] = configs[fastest].key;
  out["chorus_over_fastest_raw"] = over(fastest);
  const size_t per_tensor = first_raw + 1;
  out["chorus_over_per_tensor_raw"] = over(per_tensor);
  auto median_of = [&](const char* key) {
    for (size_t c = 0; c < configs.size(); ++c) {
      if (configs[c].key == key) return summaries[c].median;
    }
    return 0.0;
  };
  const double timeline_ratio =
      chorus_median > 0 ? median_of("chorus_timeline") / chorus_median : 0;
  const double ucx_ratio = chorus_median > 0 ? median_of("chorus_ucx") / chorus_median : 0;
  if (!options.timeline_path.empty()) out["timeline_overhead"] = timeline_ratio - 1;
  if (options.compare_controllers) out["ucx_over_mpi"] = ucx_ratio;
  if (print) {
    std::printf("# fastest raw: %s\n", configs[fastest].label.c_str());
    std::printf("chorus / fastest raw = %.2f\n", over(fastest));
    std::printf("chorus / per-tensor raw (b) = %.2f\n", over(per_tensor));
    if (!options.timeline_path.empty()) {
      std::printf("timeline overhead = %+.1f%% (chorus with timeline / chorus - 1)\n",
                  100.0 * (timeline_ratio - 1));
    }
    if (options.compare_controllers) {
      std::printf("chorus on UCX / chorus on MPI = %.2f\n", ucx_ratio);
    }
    std::fflush(stdout);
  }
  return out;
}

}  // namespace chorus::bench
