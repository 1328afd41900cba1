// Autotune's state: the step sampler (runtime/autotune/step_sampler.h), the parameter manager's
// state machine (runtime/autotune/parameter_manager.h) and the CSV log
// (runtime/autotune/autotune_log.h).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include <catch2/catch.hpp>

#include "runtime/autotune/autotune_log.h"
#include "runtime/autotune/knob_space.h"
#include "runtime/autotune/parameter_manager.h"
#include "runtime/autotune/step_sampler.h"

namespace chorus::runtime {
namespace {

// An allreduce response of float32 tensors `names`, `elements` each.
Response Allreduce(std::vector<std::string> names, int64_t elements) {
  Response r;
  r.type = OpType::kAllreduce;
  r.dtype = DataType::kFloat32;
  for (size_t i = 0; i < names.size(); ++i) r.shapes.push_back({elements});
  r.names = std::move(names);
  return r;
}

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST_CASE("A step begins where a tensor name repeats; a sample spans whole steps",
          "[autotune][sampler]") {
  // Each 100 ms step: tensors a, b in one cycle at +0, c in another at +30 ms (40 bytes each),
  // and a barrier (not counted) at +60 ms.
  StepSampler sampler(/*steps_per_sample=*/3);
  Response barrier_response;
  barrier_response.type = OpType::kBarrier;
  barrier_response.names = {"__barrier.0.7"};
  const Response& barrier = barrier_response;
  std::vector<double> scores;
  std::vector<int> at_step;
  for (int step = 0; step < 12; ++step) {
    const absl::Time t = kT0 + absl::Milliseconds(100 * step);
    const Response ab = Allreduce({"a", "b"}, 10);
    const Response c = Allreduce({"c"}, 10);
    for (auto [when, r] : {std::pair{t, &ab}, std::pair{t + absl::Milliseconds(30), &c},
                           std::pair{t + absl::Milliseconds(60), &barrier}}) {
      std::optional<double> score = sampler.OnCycle(when, absl::MakeConstSpan(r, 1));
      if (score.has_value()) {
        scores.push_back(*score);
        at_step.push_back(step);
      }
    }
  }
  // Step 0 only names the tensors; step 1 opens the first sample, steps 4, 7 and 10 end one
  // each (back to back).
  CHECK(at_step == std::vector<int>{4, 7, 10});
  for (double s : scores) CHECK(s == Approx(120 / 0.1));  // steps of 120 B in 0.1 s
  CHECK_FALSE(sampler.counts_cycles());
}

TEST_CASE("A cycle that ends one step and begins the next starts the step at the repeat",
          "[autotune][sampler]") {
  // Steps of tensors t0..t3, cut into cycles of three: {t0 t1 t2} {t3 t0 t1} {t2 t3 t0} ...
  StepSampler sampler(/*steps_per_sample=*/2);
  int cycles = 0, samples = 0;
  for (int i = 0; i < 3 * 40; i += 3) {
    std::vector<std::string> names;
    for (int k = i; k < i + 3; ++k) names.push_back(absl::StrCat("t", k % 4));
    const Response r = Allreduce(names, 1);
    const std::optional<double> score =
        sampler.OnCycle(kT0 + absl::Milliseconds(10 * cycles++), absl::MakeConstSpan(&r, 1));
    if (score.has_value()) {
      ++samples;
      // Whole cycles of 12 bytes each 10 ms: 1200 B/s, whichever cycles a sample spans (two
      // steps of four tensors are 8/3 cycles: 2 or 3 whole ones).
      CHECK(*score == Approx(1200.0));
    }
  }
  CHECK(samples > 10);
}

TEST_CASE("A sample's score is its median step: one stalled step does not decide it",
          "[autotune][sampler]") {
  StepSampler sampler(/*steps_per_sample=*/5);
  const Response ab = Allreduce({"a", "b"}, 10);  // 80 bytes a step
  const int step_ms[] = {10, 10, 10, 500, 10, 12, 8};
  absl::Time t = kT0;
  std::optional<double> score;
  for (int ms : step_ms) {
    score = sampler.OnCycle(t, absl::MakeConstSpan(&ab, 1));
    if (score.has_value()) break;
    t += absl::Milliseconds(ms);
  }
  // Steps 2..6 (the first names the tensors): 10, 10, 500, 10, 12 ms.
  REQUIRE(score.has_value());
  CHECK(*score == Approx(80 / 0.010));
}

TEST_CASE("A restart discards the step in progress", "[autotune][sampler]") {
  StepSampler sampler(/*steps_per_sample=*/1);
  const Response ab = Allreduce({"a", "b"}, 10);
  auto cycle = [&](int ms) {
    return sampler.OnCycle(kT0 + absl::Milliseconds(ms), absl::MakeConstSpan(&ab, 1));
  };
  CHECK_FALSE(cycle(0).has_value());
  CHECK_FALSE(cycle(10).has_value());  // opens the sample
  sampler.Restart();                   // parameters change
  CHECK_FALSE(cycle(20).has_value());  // names seen afresh
  CHECK_FALSE(cycle(30).has_value());  // opens the sample: the steps before are gone
  const std::optional<double> score = cycle(50);
  REQUIRE(score.has_value());
  CHECK(*score == Approx(80 / 0.02));  // one step of 80 bytes in 20 ms
}

TEST_CASE("Names that never repeat: every cycle with work becomes a step", "[autotune][sampler]") {
  StepSampler sampler(/*steps_per_sample=*/2);
  int n = 0;
  std::optional<double> score;
  int cycles = 0;
  while (!score.has_value() && cycles < 10000) {
    const Response r = Allreduce({absl::StrCat("allreduce.noname.", n++)}, 1);
    score = sampler.OnCycle(kT0 + absl::Milliseconds(cycles++), absl::MakeConstSpan(&r, 1));
  }
  CHECK(sampler.counts_cycles());
  CHECK(static_cast<size_t>(cycles) == StepSampler::kMaxNamesPerStep + 2);
  REQUIRE(score.has_value());
  CHECK(*score == Approx(8 / 0.002));  // two cycles of 4 bytes, 1 ms apart
}

TEST_CASE("Error responses and cycles without data ops are not measured", "[autotune][sampler]") {
  StepSampler sampler(/*steps_per_sample=*/1);
  Response error = Allreduce({"a"}, 1000);
  error.error_code = absl::StatusCode::kInvalidArgument;
  const Response ok = Allreduce({"b"}, 1);
  for (int i = 0; i < 10; ++i) {
    CHECK_FALSE(
        sampler.OnCycle(kT0 + absl::Milliseconds(i), absl::MakeConstSpan(&error, 1)).has_value());
    CHECK_FALSE(sampler.OnCycle(kT0, {}).has_value());
  }
  CHECK_FALSE(sampler.OnCycle(kT0, absl::MakeConstSpan(&ok, 1)).has_value());
  CHECK_FALSE(sampler.OnCycle(kT0 + absl::Seconds(1), absl::MakeConstSpan(&ok, 1)).has_value());
  CHECK(*sampler.OnCycle(kT0 + absl::Seconds(2), absl::MakeConstSpan(&ok, 1)) == Approx(4.0));
}

// A synthetic job whose throughput peaks at 1 MiB pieces, 64 KiB in-place minimum and 32 MiB
// fusion threshold (log scale), and does not depend on the cycle time: 4 GB/s at the peak.
double Throughput(const TunedParameters& p) {
  auto off = [](double value, double best) { return std::log2(value / best) / 4; };
  const double a = off(static_cast<double>(p.pipeline_chunk_bytes), 1 << 20);
  const double b = off(static_cast<double>(p.inplace_min_bytes), 64 << 10);
  const double c =
      off(static_cast<double>(std::max<int64_t>(p.fusion_threshold_bytes, 1)), 32 << 20);
  return 4e9 * std::exp(-(a * a + b * b + c * c));
}

TunedParameters Defaults() {
  return {int64_t{128} << 20, int64_t{4} << 20, int64_t{256} << 10, absl::Milliseconds(1),
          std::nullopt};
}

TEST_CASE("The parameter manager warms up, samples, and keeps the best", "[autotune][manager]") {
  AutotuneOptions options;
  options.warmup_samples = 2;
  options.max_samples = 20;
  options.confirm_pairs = 0;  // the search alone (confirming: the tests below)
  ParameterManager m(KnobSpace(false), Defaults(), options, /*generation=*/4);
  CHECK(m.current() == Defaults());
  CHECK(m.warming_up());

  // Warm-up: discarded scores, no change of parameters.
  for (int i = 1; i <= 2; ++i) {
    const ParameterManager::Decision d = m.Record(1.0);  // a slow start
    REQUIRE(d.records.size() == 1);
    CHECK(d.records[0].phase == AutotuneRecord::Phase::kWarmup);
    CHECK(d.records[0].sample == i);
    CHECK(d.records[0].generation == 4);
    CHECK_FALSE(d.next.has_value());
    CHECK(m.current() == Defaults());
  }
  CHECK_FALSE(m.warming_up());

  // The search: the first sample is the start, then the optimiser's points.
  std::vector<TunedParameters> tried;
  double best_seen = 0;
  for (int i = 1; i <= 20; ++i) {
    REQUIRE_FALSE(m.done());
    const TunedParameters at = m.current();
    tried.push_back(at);
    const double score = Throughput(at);
    best_seen = std::max(best_seen, score);
    const ParameterManager::Decision d = m.Record(score);
    REQUIRE(!d.records.empty());
    CHECK(d.records[0].phase == AutotuneRecord::Phase::kSample);
    CHECK(d.records[0].sample == i);
    CHECK(d.records[0].parameters == at);
    CHECK(d.records[0].score == score);
    REQUIRE(d.next.has_value());
    CHECK(*d.next == m.current());
    CHECK(d.done == (i == 20));
    CHECK(d.records.size() == (i == 20 ? 2u : 1u));
  }
  CHECK(tried[0] == Defaults());
  CHECK(m.done());
  // The choice: one of the samples, whose score is the best (the objective is exact).
  CHECK(m.best() == m.current());
  CHECK(Throughput(m.best()) == best_seen);
  // Found within 10% of the peak, far above the start.
  CHECK(Throughput(m.best()) > 0.9 * 4e9);
  CHECK(Throughput(Defaults()) < 0.75 * 4e9);
}

TEST_CASE("The kept choice is logged as 'best' with the number of its sample",
          "[autotune][manager]") {
  AutotuneOptions options;
  options.warmup_samples = 0;
  options.max_samples = 3;
  ParameterManager m(KnobSpace(false), Defaults(), options, 0);
  const std::vector<double> scores = {5.0, 9.0, 7.0};
  ParameterManager::Decision d;
  std::vector<TunedParameters> tried;
  for (double s : scores) {
    tried.push_back(m.current());
    d = m.Record(s);
  }
  REQUIRE(d.done);
  REQUIRE(d.records.size() == 2);
  const AutotuneRecord& best = d.records[1];
  CHECK(best.phase == AutotuneRecord::Phase::kBest);
  // With three samples and the noise the model allows, the middle one is still rated best.
  CHECK(best.sample == 2);
  CHECK(best.score == 9.0);
  CHECK(best.parameters == tried[1]);
  CHECK(*d.next == tried[1]);
}

TEST_CASE("Pairs that confirm the choice come out of max_samples, leaving the search two",
          "[autotune][manager]") {
  auto pairs = [](int max_samples, int confirm_pairs) {
    AutotuneOptions o;
    o.max_samples = max_samples;
    o.confirm_pairs = confirm_pairs;
    return ConfirmPairs(o);
  };
  CHECK(pairs(20, 3) == 3);
  CHECK(pairs(8, 3) == 3);
  CHECK(pairs(7, 3) == 2);
  CHECK(pairs(4, 3) == 1);
  CHECK(pairs(3, 3) == 0);
  CHECK(pairs(1, 3) == 0);
  CHECK(pairs(20, 0) == 0);
  CHECK(pairs(20, -1) == 0);
}

// Runs a search of `options` to its end, scoring each sample with `score(parameters, n)` (n: the
// sample's number among all samples after the warm-up, from 0). Returns every record.
template <typename F>
std::vector<AutotuneRecord> RunSearch(ParameterManager& m, F score) {
  std::vector<AutotuneRecord> records;
  for (int n = 0; !m.done() && n < 1000; ++n) {
    const TunedParameters at = m.current();
    ParameterManager::Decision d = m.Record(score(at, n));
    if (!m.done() && !m.warming_up()) {
      // Every sample after the first switches, so that each is measured from a fresh step.
      CHECK((d.next.has_value() || d.records[0].phase == AutotuneRecord::Phase::kWarmup));
    }
    records.insert(records.end(), d.records.begin(), d.records.end());
  }
  return records;
}

TEST_CASE("A lucky sample of a point no better than the start does not end the search there",
          "[autotune][manager]") {
  // Flat: the start measures 1.0 every time, every other point 0.95 but for one lucky
  // measurement of 2.0 (the first point after the start) in the search.
  auto search = [](int confirm_pairs) {
    AutotuneOptions options;
    options.warmup_samples = 0;
    options.max_samples = 20;
    options.confirm_pairs = confirm_pairs;
    ParameterManager m(KnobSpace(false), Defaults(), options, 0);
    bool lucky_used = false;
    std::vector<AutotuneRecord> records = RunSearch(m, [&](const TunedParameters& p, int) {
      if (p == Defaults()) return 1.0;
      if (!lucky_used) {
        lucky_used = true;
        return 2.0;
      }
      return 0.95;
    });
    CHECK(m.done());
    CHECK(m.best() == records.back().parameters);
    return records;
  };
  // The search alone keeps a point other than the start: 5% slower than it.
  const std::vector<AutotuneRecord> alone = search(0);
  REQUIRE(alone.size() == 21u);
  CHECK_FALSE(alone.back().parameters == Defaults());

  // Confirmed: 14 samples, 6 confirming, the choice; the start is kept.
  const std::vector<AutotuneRecord> records = search(3);
  REQUIRE(records.size() == 21u);
  for (int i = 0; i < 14; ++i) {
    CHECK(records[i].phase == AutotuneRecord::Phase::kSample);
    CHECK(records[i].sample == i + 1);
  }
  // The candidate against the start in alternating order: start first, then candidate first...
  const TunedParameters candidate = records[15].parameters;
  CHECK_FALSE(candidate == Defaults());
  const bool start_first[] = {true, false, false, true, true, false};
  for (int i = 0; i < 6; ++i) {
    const AutotuneRecord& r = records[14 + i];
    CHECK(r.phase == AutotuneRecord::Phase::kConfirm);
    CHECK(r.sample == i + 1);
    CHECK(r.parameters == (start_first[i] ? Defaults() : candidate));
  }
  const AutotuneRecord& best = records.back();
  CHECK(best.phase == AutotuneRecord::Phase::kBest);
  CHECK(best.sample == 1);
  CHECK(best.parameters == Defaults());
  CHECK(best.score == 1.0);
}

TEST_CASE("The candidate is kept only if it beats the start in every pair", "[autotune][manager]") {
  // The candidate (the sample of the best posterior mean) scores 1.1 against the start's 1.0 in
  // the confirming samples, except in pair `lost` (none: -1), where it scores 0.9.
  for (int lost : {-1, 0, 1, 2}) {
    AutotuneOptions options;
    options.warmup_samples = 1;
    options.max_samples = 10;  // 4 search samples, 3 pairs
    ParameterManager m(KnobSpace(false), Defaults(), options, 0);
    std::optional<TunedParameters> candidate;
    const std::vector<AutotuneRecord> records = RunSearch(m, [&](const TunedParameters& p, int n) {
      if (n == 0) return 0.5;            // warm-up
      if (n <= 4) return Throughput(p);  // the search
      const int pair = (n - 5) / 2;
      if (p == Defaults()) return 1.0;
      if (!candidate.has_value()) candidate = p;
      return pair == lost ? 0.9 : 1.1;
    });
    INFO("pair lost: " << lost);
    REQUIRE(m.done());
    REQUIRE(records.size() == 12u);  // a warm-up, 4 samples, 6 confirming, the choice
    REQUIRE(candidate.has_value());
    const AutotuneRecord& best = records.back();
    CHECK(best.phase == AutotuneRecord::Phase::kBest);
    if (lost < 0) {
      CHECK(m.best() == *candidate);
      CHECK(best.sample > 1);
      CHECK(records[static_cast<size_t>(best.sample)].parameters == *candidate);
      CHECK(best.score == records[static_cast<size_t>(best.sample)].score);  // the search's
    } else {
      CHECK(m.best() == Defaults());
      CHECK(best.sample == 1);
    }
    CHECK(best.parameters == m.best());
  }
}

TEST_CASE("A new generation searches again from the last best point", "[autotune][manager]") {
  AutotuneOptions options;
  options.warmup_samples = 1;
  options.max_samples = 6;
  ParameterManager first(KnobSpace(false), Defaults(), options, 0);
  first.Record(0);  // warm-up
  while (!first.done()) first.Record(Throughput(first.current()));
  const TunedParameters best = first.best();
  CHECK(Throughput(best) >= Throughput(Defaults()));

  // The next world (say, more ranks): the same sequence of phases, from `best`.
  ParameterManager second(KnobSpace(false), best, options, 1);
  CHECK(second.current() == best);
  CHECK(second.warming_up());
  ParameterManager::Decision d = second.Record(0);
  CHECK(d.records[0].phase == AutotuneRecord::Phase::kWarmup);
  CHECK(d.records[0].generation == 1);
  CHECK(second.current() == best);
  d = second.Record(Throughput(best));
  CHECK(d.records[0].phase == AutotuneRecord::Phase::kSample);
  CHECK(d.records[0].sample == 1);
  CHECK(d.records[0].parameters == best);
  CHECK(second.best() == best);
}

TEST_CASE("A binary knob is tried switched at the start first, and its better value is kept",
          "[autotune][manager]") {
  // The landscape of 2 hosts x 2 ranks at 2 Gbit/s (docs/autotune.md, on the namespace cluster;
  // Note [Binary knobs first]): flat, every point alike; hierarchical, 1.4x as fast with a chunk
  // of 1-4 MiB, slower than flat with a chunk far from that.
  auto score = [](const TunedParameters& p) {
    const double c = std::log2(static_cast<double>(p.pipeline_chunk_bytes) / (1 << 20));
    const double off = std::max(0.0, std::abs(c - 1) - 1);
    return 1e9 * (p.hierarchical_allreduce.value() ? 1.4 * std::exp(-off * off / 8) : 1.0);
  };
  AutotuneOptions options;
  options.warmup_samples = 1;
  options.max_samples = 20;
  ParameterManager m(KnobSpace(true), Defaults(), options, 0);
  m.Record(0);  // warm-up
  std::vector<TunedParameters> tried;
  while (!m.done()) {
    tried.push_back(m.current());
    m.Record(score(m.current()));
  }
  REQUIRE(tried.size() == 20);
  CHECK(tried[0].hierarchical_allreduce == false);  // the start, conformed to the space
  TunedParameters switched = Defaults();
  switched.hierarchical_allreduce = true;
  CHECK(tried[1] == switched);  // everything else equal
  CHECK(m.best().hierarchical_allreduce == true);
  CHECK(score(m.best()) > score(tried[0]) * 1.3);
}

TEST_CASE("The manager is deterministic given its seed", "[autotune][manager]") {
  auto run = [](uint64_t seed) {
    AutotuneOptions options;
    options.warmup_samples = 0;
    options.max_samples = 8;
    options.seed = seed;
    ParameterManager m(KnobSpace(true), Defaults(), options, 0);
    std::vector<TunedParameters> tried;
    while (!m.done()) {
      tried.push_back(m.current());
      m.Record(Throughput(m.current()) * (m.current().hierarchical_allreduce.value() ? 1.1 : 1));
    }
    return tried;
  };
  CHECK(run(5) == run(5));
  const std::vector<TunedParameters> tried = run(5);
  CHECK(tried[0].hierarchical_allreduce == false);  // the start, conformed to the space
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_CASE("The autotune log: a header, one CSV line per record, appended across worlds",
          "[autotune][log]") {
  char dir_template[] = "/tmp/chorus_autotune_log_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string path = absl::StrCat(dir_template, "/at.csv");

  AutotuneRecord warm{0, 1, AutotuneRecord::Phase::kWarmup, Defaults(), 1.25e9};
  AutotuneRecord sample{0,
                        1,
                        AutotuneRecord::Phase::kSample,
                        {8 << 20, 1 << 20, 64 << 10, absl::Microseconds(520), std::nullopt},
                        3502310003.4};
  AutotuneRecord best{1,
                      4,
                      AutotuneRecord::Phase::kBest,
                      {8 << 20, 1 << 20, 64 << 10, absl::Microseconds(520), true},
                      3.5e9};
  {
    auto log = AutotuneLog::Open(path, /*truncate=*/true);
    REQUIRE(log.ok());
    CHECK((*log)->Append(warm).ok());
    CHECK((*log)->Append(sample).ok());
  }
  {
    auto log = AutotuneLog::Open(path, /*truncate=*/false);  // the next world appends
    REQUIRE(log.ok());
    CHECK((*log)->Append(best).ok());
  }
  const std::string expected =
      "generation,sample,phase,fusion_threshold_bytes,pipeline_chunk_bytes,inplace_min_bytes,"
      "cycle_time_ms,hierarchical_allreduce,score_bytes_per_second\n"
      "0,1,warmup,134217728,4194304,262144,1,,1250000000\n"
      "0,1,sample,8388608,1048576,65536,0.52,,3502310003\n"
      "1,4,best,8388608,1048576,65536,0.52,1,3500000000\n";
  CHECK(ReadFile(path) == expected);
  {
    auto log = AutotuneLog::Open(path, /*truncate=*/true);  // a new job starts afresh
    REQUIRE(log.ok());
  }
  CHECK(ReadFile(path) == AutotuneLog::Header() + "\n");

  auto bad = AutotuneLog::Open(absl::StrCat(dir_template, "/no/such/dir/at.csv"), true);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()),
             Catch::Contains("cannot open the autotune log '") && Catch::Contains("no/such/dir"));
  std::remove(path.c_str());
  ::rmdir(dir_template);
}

}  // namespace
}  // namespace chorus::runtime
