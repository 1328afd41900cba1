#include "bench/autotune_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include <mpi.h>

#include "base/status_macros.h"
#include "bench/measure.h"
#include "bench/step_bench.h"
#include "bench/tensor_sets.h"
#include "chorus/chorus.h"

namespace chorus::bench {
namespace {

// The grid: chorus's default of each knob and values on either side of it, spread over the
// ranges autotune searches (runtime/autotune/knob_space.h).
constexpr int64_t kFusionThresholds[] = {256 * kKiB, 1 * kMiB, 16 * kMiB, 128 * kMiB};
constexpr int64_t kPipelineChunks[] = {256 * kKiB, 1 * kMiB, 4 * kMiB, 16 * kMiB};
constexpr int64_t kInplaceMins[] = {16 * kKiB, 256 * kKiB, 4 * kMiB, 64 * kMiB};
constexpr double kCycleTimesMs[] = {0.25, 1, 5};
// Hierarchical allreduce, where it applies to the world (the search's log says so): off, on.
constexpr bool kHierarchical[] = {false, true};

// One point of the knob space.
struct Point {
  int64_t fusion_threshold_bytes = 0;
  int64_t pipeline_chunk_bytes = 0;
  int64_t inplace_min_bytes = 0;
  double cycle_time_ms = 0;
  // Present exactly where the knob applies (the world runs hierarchical allreduce: several
  // hosts, the same number of ranks on each; docs/autotune.md).
  std::optional<bool> hierarchical_allreduce;
};

std::string Describe(const Point& p) {
  return absl::StrCat(
      "fusion ", p.fusion_threshold_bytes / kKiB, " KiB, chunk ", p.pipeline_chunk_bytes / kKiB,
      " KiB, in-place >= ", p.inplace_min_bytes / kKiB, " KiB, cycle ", p.cycle_time_ms, " ms",
      p.hierarchical_allreduce.has_value()
          ? (*p.hierarchical_allreduce ? ", hierarchical" : ", flat")
          : "");
}

nlohmann::json ToJson(const Point& p) {
  nlohmann::json j = {{"fusion_threshold_bytes", p.fusion_threshold_bytes},
                      {"pipeline_chunk_bytes", p.pipeline_chunk_bytes},
                      {"inplace_min_bytes", p.inplace_min_bytes},
                      {"cycle_time_ms", p.cycle_time_ms}};
  if (p.hierarchical_allreduce.has_value()) j["hierarchical_allreduce"] = *p.hierarchical_allreduce;
  return j;
}

const char* const kKnobVariables[] = {"CHORUS_FUSION_THRESHOLD", "CHORUS_PIPELINE_CHUNK_BYTES",
                                      "CHORUS_INPLACE_MIN_BYTES", "CHORUS_CYCLE_TIME_MS"};
const char* const kAutotuneVariables[] = {
    "CHORUS_AUTOTUNE", "CHORUS_AUTOTUNE_LOG", "CHORUS_AUTOTUNE_WARMUP_SAMPLES",
    "CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"};

// CHORUS_HIERARCHICAL_ALLREDUCE as the job was started with (the defaults' value, and the
// search's start), read at the first call, before SetPoint changes it.
const std::optional<std::string>& ConfiguredHierarchical() {
  static const std::optional<std::string> value = []() -> std::optional<std::string> {
    const char* v = std::getenv("CHORUS_HIERARCHICAL_ALLREDUCE");
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  }();
  return value;
}

// The knob variables of the next Init: `p`'s values, or none (chorus's defaults; hierarchical
// allreduce as configured where `p` lacks it).
void SetPoint(const std::optional<Point>& p) {
  const std::optional<std::string>& configured = ConfiguredHierarchical();
  for (const char* name : kKnobVariables) ::unsetenv(name);
  if (p.has_value() && p->hierarchical_allreduce.has_value()) {
    ::setenv("CHORUS_HIERARCHICAL_ALLREDUCE", *p->hierarchical_allreduce ? "1" : "0", 1);
  } else if (configured.has_value()) {
    ::setenv("CHORUS_HIERARCHICAL_ALLREDUCE", configured->c_str(), 1);
  } else {
    ::unsetenv("CHORUS_HIERARCHICAL_ALLREDUCE");
  }
  if (!p.has_value()) return;
  ::setenv("CHORUS_FUSION_THRESHOLD", absl::StrCat(p->fusion_threshold_bytes).c_str(), 1);
  ::setenv("CHORUS_PIPELINE_CHUNK_BYTES", absl::StrCat(p->pipeline_chunk_bytes).c_str(), 1);
  ::setenv("CHORUS_INPLACE_MIN_BYTES", absl::StrCat(p->inplace_min_bytes).c_str(), 1);
  ::setenv("CHORUS_CYCLE_TIME_MS", absl::StrCat(p->cycle_time_ms).c_str(), 1);
}

absl::Status Restart() {
  CHORUS_RETURN_IF_ERROR(Shutdown());
  return Init();
}

// One step on fresh rank-dependent inputs, checked on every rank. DataLoss on every rank if any
// rank is wrong.
absl::Status Verify(StepBench& bench, const std::string& what) {
  bench.FillChorus();
  CHORUS_RETURN_IF_ERROR(bench.ChorusStep());
  std::string error;
  const bool ok = bench.CheckChorus(&error);
  if (!ok) {
    std::fprintf(stderr, "chorus_bench autotune: rank %d: %s computed a wrong result: %s\n",
                 WorldRank(), what.c_str(), error.c_str());
  }
  CHORUS_ASSIGN_OR_RETURN(bool all_ok, AllRanksOk(ok));
  if (!all_ok) return absl::DataLossError(absl::StrCat("autotune: ", what, " is wrong"));
  return absl::OkStatus();
}

// One training step: the gradients' allreduces, then the simulated compute.
absl::Status Step(StepBench& bench, double compute_ms) {
  CHORUS_RETURN_IF_ERROR(bench.ChorusStep());
  if (compute_ms > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(compute_ms));
  }
  return absl::OkStatus();
}

// `warmup` untimed steps, then the times of `steps` steps (each the maximum over ranks). The
// steps run back to back, as in training, with no barrier between them (one before the first):
// the search runs them so too.
absl::StatusOr<std::vector<double>> TimeSteps(StepBench& bench, int warmup, int steps,
                                              double compute_ms) {
  for (int i = 0; i < warmup; ++i) CHORUS_RETURN_IF_ERROR(Step(bench, compute_ms));
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Barrier(MPI_COMM_WORLD));
  std::vector<double> times;
  double start = MPI_Wtime();
  for (int i = 0; i < steps; ++i) {
    CHORUS_RETURN_IF_ERROR(Step(bench, compute_ms));
    const double end = MPI_Wtime();
    times.push_back(end - start);
    start = end;
  }
  return MaxOverRanks(times);
}

// Rank 0's `text` on every rank.
absl::StatusOr<std::string> FromRoot(std::string text) {
  int size = static_cast<int>(text.size());
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD));
  text.resize(static_cast<size_t>(size));
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Bcast(text.data(), size, MPI_CHAR, 0, MPI_COMM_WORLD));
  return text;
}

// The choice line of an autotune log ("0,14,best,...") or empty.
std::string ChoiceLine(const std::string& path) {
  std::ifstream in(path);
  std::string found;
  for (std::string line; std::getline(in, line);) {
    if (line.find(",best,") != std::string::npos) found = line;
  }
  return found;
}

absl::StatusOr<Point> ParseChoice(const std::string& line) {
  const std::vector<std::string> f = absl::StrSplit(line, ',');
  Point p;
  if (f.size() != 9 || !absl::SimpleAtoi(f[3], &p.fusion_threshold_bytes) ||
      !absl::SimpleAtoi(f[4], &p.pipeline_chunk_bytes) ||
      !absl::SimpleAtoi(f[5], &p.inplace_min_bytes) || !absl::SimpleAtod(f[6], &p.cycle_time_ms)) {
    return absl::InternalError(absl::StrCat("autotune: cannot read the log's choice: ", line));
  }
  if (f[7] == "0" || f[7] == "1") {
    p.hierarchical_allreduce = f[7] == "1";
  } else if (!f[7].empty()) {
    return absl::InternalError(
        absl::StrCat("autotune: the log's choice has hierarchical_allreduce \"", f[7],
                     "\" (expected 0, 1 or empty): ", line));
  }
  return p;
}

struct SearchResult {
  Point choice;
  int steps = 0;  // until the choice was seen (in tens)
  double seconds = 0;
};

// Phase 1: chorus with autotune on, until rank 0's log holds the choice.
absl::StatusOr<SearchResult> Search(StepBench& bench, const AutotuneBenchOptions& o) {
  CHORUS_ASSIGN_OR_RETURN(
      std::string path,
      FromRoot(o.log_path.empty() ? absl::StrCat("/tmp/chorus_bench_autotune.", ::getpid(), ".csv")
                                  : o.log_path));
  SetPoint(std::nullopt);
  ::setenv("CHORUS_AUTOTUNE", "1", 1);
  ::setenv("CHORUS_AUTOTUNE_LOG", path.c_str(), 1);
  ::setenv("CHORUS_AUTOTUNE_WARMUP_SAMPLES", absl::StrCat(o.warmup_samples).c_str(), 1);
  ::setenv("CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", absl::StrCat(o.steps_per_sample).c_str(), 1);
  ::setenv("CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", absl::StrCat(o.max_samples).c_str(), 1);
  CHORUS_RETURN_IF_ERROR(Restart());
  for (const char* name : kAutotuneVariables) ::unsetenv(name);

  SearchResult result;
  const int limit = (o.warmup_samples + o.max_samples) * (o.steps_per_sample + 2) * 20;
  const double start = MPI_Wtime();
  std::string choice;
  while (choice.empty()) {
    if (result.steps >= limit) {
      return absl::InternalError(
          absl::StrCat("autotune: no choice in ", path, " after ", limit, " steps"));
    }
    // Steps back to back, as in training; the ranks look at rank 0's log every kCheckEvery.
    constexpr int kCheckEvery = 10;
    for (int i = 0; i < kCheckEvery; ++i) CHORUS_RETURN_IF_ERROR(Step(bench, o.compute_ms));
    result.steps += kCheckEvery;
    CHORUS_ASSIGN_OR_RETURN(choice, FromRoot(WorldRank() == 0 ? ChoiceLine(path) : ""));
  }
  result.seconds = MPI_Wtime() - start;
  CHORUS_ASSIGN_OR_RETURN(result.choice, ParseChoice(choice));
  CHORUS_RETURN_IF_ERROR(Verify(bench, "the autotuned run"));
  if (WorldRank() == 0) {
    std::ifstream in(path);
    std::printf("# autotune log (%s):\n", path.c_str());
    for (std::string line; std::getline(in, line);) std::printf("#   %s\n", line.c_str());
    if (o.log_path.empty()) std::remove(path.c_str());
  }
  return result;
}

struct Measured {
  Point point;
  double median = 0;  // seconds per step
};

// Phase 2: every point of the grid, fastest first; with hierarchical allreduce off and on
// where `hierarchical` (the knob applies, as the search found), twice as many points.
absl::StatusOr<std::vector<Measured>> Grid(StepBench& bench, const AutotuneBenchOptions& o,
                                           bool hierarchical) {
  std::vector<std::optional<bool>> hierarchy = {std::nullopt};
  if (hierarchical) hierarchy.assign(std::begin(kHierarchical), std::end(kHierarchical));
  std::vector<Measured> grid;
  for (int64_t fusion : kFusionThresholds) {
    for (int64_t chunk : kPipelineChunks) {
      for (int64_t inplace : kInplaceMins) {
        for (double cycle : kCycleTimesMs) {
          for (const std::optional<bool>& h : hierarchy) {
            const Point p{fusion, chunk, inplace, cycle, h};
            SetPoint(p);
            CHORUS_RETURN_IF_ERROR(Restart());
            CHORUS_RETURN_IF_ERROR(Verify(bench, Describe(p)));
            CHORUS_ASSIGN_OR_RETURN(std::vector<double> times,
                                    TimeSteps(bench, o.grid_warmup, o.grid_steps, o.compute_ms));
            grid.push_back({p, Summarize(times).median});
          }
        }
      }
    }
  }
  std::stable_sort(grid.begin(), grid.end(),
                   [](const Measured& a, const Measured& b) { return a.median < b.median; });
  return grid;
}

struct Contender {
  std::string key;
  std::string label;
  std::optional<Point> point;  // none: chorus's defaults
  std::vector<double> round_medians;
  double median = 0;
};

// Phase 3: the contenders in turn, `rounds` times.
absl::Status Compare(StepBench& bench, const AutotuneBenchOptions& o,
                     std::vector<Contender>* contenders) {
  const size_t n = contenders->size();
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t k = 0; k < n; ++k) {
      Contender& c = (*contenders)[(k + static_cast<size_t>(round)) % n];
      SetPoint(c.point);
      CHORUS_RETURN_IF_ERROR(Restart());
      if (round == 0) CHORUS_RETURN_IF_ERROR(Verify(bench, c.label));
      CHORUS_ASSIGN_OR_RETURN(std::vector<double> times,
                              TimeSteps(bench, o.warmup, o.steps, o.compute_ms));
      c.round_medians.push_back(Summarize(times).median);
    }
  }
  for (Contender& c : *contenders) c.median = Summarize(c.round_medians).median;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> RunAutotuneBench(const AutotuneBenchOptions& o) {
  if (o.warmup_samples < 0 || o.steps_per_sample < 1 || o.max_samples < 1 || o.grid_steps < 1 ||
      o.grid_warmup < 0 || o.grid_finalists < 1 || o.warmup < 0 || o.steps < 1 || o.rounds < 1 ||
      o.compute_ms < 0) {
    return absl::InvalidArgumentError("autotune: an option is out of range");
  }
  CHORUS_ASSIGN_OR_RETURN(std::vector<TensorSpec> tensors, GetTensorSet(o.tensor_set));
  const int rank = WorldRank();
  const int ranks = WorldSize();
  const bool print = rank == 0;
  StepBench bench(std::move(tensors), rank, ranks);
  const int64_t total_bytes = bench.total_elements() * static_cast<int64_t>(sizeof(float));
  if (print) {
    std::printf(
        "# chorus_bench autotune: %s, %zu float32 tensors (%.2f MB), %d ranks, %.1f ms of "
        "compute per step\n",
        o.tensor_set.c_str(), bench.tensors().size(), static_cast<double>(total_bytes) / 1e6, ranks,
        o.compute_ms);
    std::fflush(stdout);
  }

  CHORUS_ASSIGN_OR_RETURN(SearchResult search, Search(bench, o));
  if (print) {
    std::printf(
        "# search: %d steps, %.1f s (%d warm-up + %d samples of %d steps), %.2f GB/s per rank "
        "over its whole time; choice: %s\n",
        search.steps, search.seconds, o.warmup_samples, o.max_samples, o.steps_per_sample,
        search.seconds > 0 ? static_cast<double>(total_bytes) * search.steps / search.seconds / 1e9
                           : 0,
        Describe(search.choice).c_str());
    std::fflush(stdout);
  }

  CHORUS_ASSIGN_OR_RETURN(std::vector<Measured> grid,
                          Grid(bench, o, search.choice.hierarchical_allreduce.has_value()));
  if (print) {
    std::printf("# grid: %zu points; fastest (median of %d steps):\n", grid.size(), o.grid_steps);
    for (size_t i = 0; i < std::min<size_t>(grid.size(), 5); ++i) {
      std::printf("#   %8.3f ms  %s\n", grid[i].median * 1e3, Describe(grid[i].point).c_str());
    }
    std::fflush(stdout);
  }

  std::vector<Contender> contenders;
  contenders.push_back({"defaults", "chorus defaults", std::nullopt, {}, 0});
  contenders.push_back({"autotuned", "autotuned", search.choice, {}, 0});
  const size_t finalists = std::min<size_t>(grid.size(), static_cast<size_t>(o.grid_finalists));
  for (size_t i = 0; i < finalists; ++i) {
    contenders.push_back(
        {absl::StrCat("grid_", i + 1), absl::StrCat("grid #", i + 1), grid[i].point, {}, 0});
  }
  CHORUS_RETURN_IF_ERROR(Compare(bench, o, &contenders));
  size_t grid_best = 2;
  for (size_t i = 3; i < contenders.size(); ++i) {
    if (contenders[i].median < contenders[grid_best].median) grid_best = i;
  }
  const double defaults = contenders[0].median;
  const double tuned = contenders[1].median;
  const double best = contenders[grid_best].median;

  nlohmann::json out = {
      {"benchmark", "autotune"},
      {"tensor_set", o.tensor_set},
      {"total_bytes", total_bytes},
      {"ranks", ranks},
      {"compute_ms", o.compute_ms},
      {"search",
       {{"steps", search.steps},
        {"seconds", search.seconds},
        // Comparable with the log's scores (docs/autotune.md).
        {"bytes_per_second_per_rank",
         search.seconds > 0 ? static_cast<double>(total_bytes) * search.steps / search.seconds : 0},
        {"warmup_samples", o.warmup_samples},
        {"max_samples", o.max_samples},
        {"steps_per_sample", o.steps_per_sample},
        {"choice", ToJson(search.choice)}}},
      {"grid", nlohmann::json::array()},
      {"comparison", nlohmann::json::array()},
      {"rounds", o.rounds},
      {"steps_per_round", o.steps},
      {"time_statistic", "median over rounds of the round's median step"}};
  for (const Measured& m : grid) {
    out["grid"].push_back({{"point", ToJson(m.point)}, {"median_ms", m.median * 1e3}});
  }
  if (print) {
    std::printf("# comparison: %d rounds of %d steps each (after %d untimed), in turn\n", o.rounds,
                o.steps, o.warmup);
    std::printf("# %-16s %12s %12s %14s  %s\n", "configuration", "ms/step", "GB/s/rank",
                "vs defaults", "parameters");
  }
  for (const Contender& c : contenders) {
    const double gbps = c.median > 0 ? static_cast<double>(total_bytes) / c.median / 1e9 : 0;
    if (print) {
      std::printf("  %-16s %12.3f %12.2f %14.3f  %s\n", c.label.c_str(), c.median * 1e3, gbps,
                  c.median > 0 ? defaults / c.median : 0,
                  c.point.has_value() ? Describe(*c.point).c_str() : "(chorus's defaults)");
    }
    nlohmann::json j = {{"key", c.key},
                        {"median_ms", c.median * 1e3},
                        {"round_medians_ms", nlohmann::json::array()}};
    for (double r : c.round_medians) j["round_medians_ms"].push_back(r * 1e3);
    if (c.point.has_value()) j["point"] = ToJson(*c.point);
    out["comparison"].push_back(j);
  }
  // Throughput ratios: steps per second of the first over the second.
  out["autotuned_over_defaults"] = tuned > 0 ? defaults / tuned : 0;
  out["autotuned_over_grid_best"] = tuned > 0 ? best / tuned : 0;
  out["grid_best"] = contenders[grid_best].key;
  if (print) {
    std::printf("autotuned / defaults throughput = %.3f\n", tuned > 0 ? defaults / tuned : 0);
    std::printf("autotuned / grid best (%s) throughput = %.3f\n",
                contenders[grid_best].label.c_str(), tuned > 0 ? best / tuned : 0);
    std::fflush(stdout);
  }
  SetPoint(std::nullopt);
  CHORUS_RETURN_IF_ERROR(Restart());
  return out;
}

}  // namespace chorus::bench
