#include "bench/overhead.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "base/status_macros.h"
#include "bench/alloc_counter.h"
#include "bench/measure.h"
#include "chorus/chorus.h"

namespace chorus::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One step's figures.
struct StepSample {
  double submit_s = 0;
  double step_s = 0;
  int64_t process_allocations = 0;
  int64_t submit_thread_allocations = 0;
};

// n tensors of `elements` floats, submitted as registered ops or through EnqueueFrom.
class OverheadSet {
 public:
  OverheadSet(int64_t n, int64_t elements)
      : data_(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(elements))),
        elements_(elements) {
    for (int64_t k = 0; k < n; ++k) names_.push_back(absl::StrCat("overhead.enqueue.", k));
    handles_.reserve(static_cast<size_t>(n));
  }

  absl::Status Register() {
    for (size_t k = 0; k < data_.size(); ++k) {
      OpRequest r;
      r.type = OpType::kAllreduce;
      r.name = absl::StrCat("overhead.registered.", k);
      r.input = {data_[k].data(), DataType::kFloat32, {elements_}};
      r.reduce_op = ReduceOp::kAverage;
      CHORUS_ASSIGN_OR_RETURN(OpSlot slot, RegisterOp(std::move(r)));
      slots_.push_back(slot);
    }
    return absl::OkStatus();
  }

  absl::Status Unregister() {
    for (OpSlot slot : slots_) CHORUS_RETURN_IF_ERROR(UnregisterOp(slot));
    slots_.clear();
    return absl::OkStatus();
  }

  void Fill(float value) {
    for (std::vector<float>& d : data_) std::fill(d.begin(), d.end(), value);
  }
  // Every element equals `value`.
  bool AllEqual(float value) const {
    for (const std::vector<float>& d : data_) {
      for (float x : d) {
        if (x != value) return false;
      }
    }
    return true;
  }

  // One step: submit every tensor (last first), then release every handle.
  absl::Status Step(bool registered, StepSample* sample) {
    handles_.clear();
    const int64_t process0 = ProcessAllocations();
    const int64_t thread0 = ThreadAllocations();
    const Clock::time_point start = Clock::now();
    for (size_t k = data_.size(); k-- > 0;) {
      if (registered) {
        CHORUS_ASSIGN_OR_RETURN(Handle h, Submit(slots_[k], SubmitArgs{data_[k].data()}));
        handles_.push_back(h);
      } else {
        request_.type = OpType::kAllreduce;
        request_.name.assign(names_[k]);
        request_.input.data = data_[k].data();
        request_.input.dtype = DataType::kFloat32;
        request_.input.shape.assign(1, elements_);
        request_.reduce_op = ReduceOp::kAverage;
        CHORUS_ASSIGN_OR_RETURN(Handle h, EnqueueFrom(request_));
        handles_.push_back(h);
      }
    }
    const Clock::time_point submitted = Clock::now();
    const int64_t thread1 = ThreadAllocations();
    for (Handle h : handles_) {
      CHORUS_ASSIGN_OR_RETURN(OpResult result, Release(h));
      CHORUS_RETURN_IF_ERROR(result.status);
    }
    const Clock::time_point end = Clock::now();
    sample->submit_s = Seconds(submitted - start);
    sample->step_s = Seconds(end - start);
    sample->process_allocations = ProcessAllocations() - process0;
    sample->submit_thread_allocations = thread1 - thread0;
    return absl::OkStatus();
  }

 private:
  std::vector<std::vector<float>> data_;
  const int64_t elements_;
  std::vector<std::string> names_;
  std::vector<OpSlot> slots_;
  std::vector<Handle> handles_;
  OpRequest request_;  // refilled per op (EnqueueFrom)
};

struct Way {
  const char* key;
  bool registered;
};
constexpr Way kWays[] = {{"registered", true}, {"enqueue", false}};

}  // namespace

absl::StatusOr<nlohmann::json> RunOverhead(const OverheadOptions& options) {
  if (options.steps < 1 || options.warmup < 0 || options.bytes < 4 || options.bytes % 4 != 0 ||
      options.counts.empty()) {
    return absl::InvalidArgumentError(
        "overhead: need steps >= 1, warmup >= 0, bytes a positive multiple of 4, and counts");
  }
  for (int64_t n : options.counts) {
    if (n < 1) return absl::InvalidArgumentError("overhead: counts must be positive");
  }
  const int rank = WorldRank();
  const int ranks = WorldSize();
  const bool print = rank == 0;
  const int64_t elements = options.bytes / 4;
  if (print) {
    std::printf(
        "# chorus_bench overhead: %d rank(s), in-place float32 Average allreduces of %lld bytes, "
        "%d steps (+%d warmup) per count, ways interleaved step by step\n",
        ranks, static_cast<long long>(options.bytes), options.steps, options.warmup);
    if (!AllocationsCounted()) {
      std::printf("# allocations are not counted in this (sanitizer) build: shown as 0\n");
    }
    std::printf("# %8s  %-10s  %16s  %14s  %12s  %18s  %22s\n", "tensors", "way",
                "submit ns/tensor", "step ns/tensor", "step us", "allocs/step (proc)",
                "allocs/step (submitter)");
    std::fflush(stdout);
  }
  nlohmann::json out = {{"benchmark", "overhead"},
                        {"ranks", ranks},
                        {"bytes_per_tensor", options.bytes},
                        {"dtype", "float32"},
                        {"steps", options.steps},
                        {"warmup", options.warmup},
                        {"time_statistic", "median over steps of the max over ranks"},
                        {"rows", nlohmann::json::array()}};
  for (int64_t n : options.counts) {
    OverheadSet set(n, elements);
    CHORUS_RETURN_IF_ERROR(set.Register());
    // Check both ways once: every rank holds rank + 1, so the average is (ranks + 1) / 2.
    for (const Way& way : kWays) {
      set.Fill(static_cast<float>(rank + 1));
      StepSample unused;
      CHORUS_RETURN_IF_ERROR(set.Step(way.registered, &unused));
      const float want = static_cast<float>(ranks + 1) / 2.0f;
      CHORUS_ASSIGN_OR_RETURN(bool ok, AllRanksOk(set.AllEqual(want)));
      if (!ok) {
        return absl::DataLossError(
            absl::StrCat("overhead: ", way.key, " computed a wrong average"));
      }
    }
    const size_t steps = static_cast<size_t>(options.steps);
    std::vector<double> times(2 * 2 * steps);  // way-major: submit times, then step times
    std::vector<StepSample> samples(2 * steps);
    for (int s = 0; s < options.warmup + options.steps; ++s) {
      for (size_t w = 0; w < 2; ++w) {
        StepSample sample;
        CHORUS_ASSIGN_OR_RETURN(double unused,
                                TimeOnce([&] { return set.Step(kWays[w].registered, &sample); }));
        (void)unused;
        if (s < options.warmup) continue;
        const size_t i = static_cast<size_t>(s - options.warmup);
        times[(w * 2) * steps + i] = sample.submit_s;
        times[(w * 2 + 1) * steps + i] = sample.step_s;
        samples[w * steps + i] = sample;
      }
    }
    CHORUS_RETURN_IF_ERROR(set.Unregister());
    CHORUS_ASSIGN_OR_RETURN(std::vector<double> max_times, MaxOverRanks(times));
    for (size_t w = 0; w < 2; ++w) {
      auto median = [&](size_t series) {
        const auto begin = max_times.begin() + static_cast<std::ptrdiff_t>(series * steps);
        return Summarize(std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(steps)))
            .median;
      };
      const double submit = median(w * 2);
      const double step = median(w * 2 + 1);
      std::vector<double> process, submitter;
      for (size_t i = 0; i < steps; ++i) {
        process.push_back(static_cast<double>(samples[w * steps + i].process_allocations));
        submitter.push_back(static_cast<double>(samples[w * steps + i].submit_thread_allocations));
      }
      const double process_allocs = Summarize(process).median;
      const double submitter_allocs = Summarize(submitter).median;
      const double per = 1e9 / static_cast<double>(n);
      if (print) {
        std::printf("  %8lld  %-10s  %16.1f  %14.1f  %12.1f  %18.1f  %22.1f\n",
                    static_cast<long long>(n), kWays[w].key, submit * per, step * per, step * 1e6,
                    process_allocs, submitter_allocs);
        std::fflush(stdout);
      }
      out["rows"].push_back({{"tensors", n},
                             {"way", kWays[w].key},
                             {"submit_ns_per_tensor", submit * per},
                             {"step_ns_per_tensor", step * per},
                             {"step_us", step * 1e6},
                             {"allocations_per_step", process_allocs},
                             {"submitter_allocations_per_step", submitter_allocs}});
    }
  }
  return out;
}

}  // namespace chorus::bench
