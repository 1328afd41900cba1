// Autotune in the real background loop (runtime/autotune/autotuner.h), with simulated ranks as
// threads over in-process fabrics: rank 0's decisions take effect in the same cycle on every
// rank, the results stay right while the parameters change, and a re-formed world resumes the
// search from the last best point, whichever survivor becomes its rank 0. On simulated hosts
// where hierarchical allreduce can run, the knob joins the search and each switch changes the
// algorithm the ranks' allreduces actually run (HierarchicalBackend's calls, as the loop counts
// them), with results still exact.
#include <functional>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "runtime/autotune/knob_space.h"
#include "runtime/runtime.h"
#include "test/support/fast_cycle_config.h"
#include "test/support/in_process_fabric.h"
#include "test/support/rank_failures.h"

namespace chorus::runtime {
namespace {

using testing::Failures;

Config AutotuneConfig(int64_t fusion_threshold_bytes) {
  Config c = testing::FastCycleConfig();
  c.autotune = true;
  c.autotune_warmup_samples = 1;
  c.autotune_steps_per_sample = 2;
  c.autotune_bayes_opt_max_samples = 4;
  c.fusion_threshold_bytes = fusion_threshold_bytes;
  c.pipeline_chunk_bytes = 256 << 10;
  // Ops that stall fail instead of hanging the test.
  c.stall_shutdown_time = absl::Seconds(20);
  return c;
}

OpRequest Sum(const std::string& name, std::vector<float>& data) {
  OpRequest r;
  r.type = OpType::kAllreduce;
  r.name = name;
  r.input = {data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}};
  r.reduce_op = ReduceOp::kSum;
  return r;
}

// Training steps of five gradients (from 4 bytes, packed, to 1.2 MB, reduced in place in
// pieces) until rank 0's search is done; every result is checked. Returns false on a failure or
// when the search has not ended after `max_steps`.
bool TrainUntilTuned(Runtime& rt, Failures& f, int who, int max_steps) {
  const Topology t = rt.topology();
  const int64_t sizes[] = {1, 300, 5000, 70000, 300000};
  for (int step = 0; step < max_steps; ++step) {
    std::vector<std::vector<float>> grads;
    for (int64_t n : sizes) grads.emplace_back(n, static_cast<float>(t.rank + 1 + step));
    std::vector<Handle> handles;
    for (size_t g = 0; g < grads.size(); ++g) {
      absl::StatusOr<Handle> h = rt.Enqueue(Sum(absl::StrCat("grad.", g), grads[g]));
      f.Check(h.ok(), who, h.status().ToString());
      if (!h.ok()) return false;
      handles.push_back(*h);
    }
    const float expected = static_cast<float>(t.size * (t.size + 1) / 2 + t.size * step);
    for (size_t g = 0; g < grads.size(); ++g) {
      const absl::Status done = rt.Wait(handles[g]);
      f.Check(done.ok(), who, absl::StrCat("grad.", g, ": ", done.ToString()));
      if (!done.ok()) return false;
      const bool right = grads[g].front() == expected && grads[g].back() == expected;
      f.Check(right, who,
              absl::StrCat("step ", step, " grad.", g, ": ", grads[g].front(), " != ", expected));
      if (!right) return false;
    }
    // Rank 0 says when its search is done; every rank then stops after the same step.
    const std::vector<Autotuner::Switch> history = rt.TEST_autotune_history();
    std::vector<float> stop = {t.rank == 0 && !history.empty() && history.back().done ? 1.f : 0.f};
    absl::StatusOr<Handle> h = rt.Enqueue(Sum("stop", stop));
    if (!h.ok() || !rt.Wait(*h).ok()) {
      f.Check(false, who, "the stop allreduce failed");
      return false;
    }
    if (stop[0] > 0) return true;
  }
  f.Check(false, who, absl::StrCat("the search did not end in ", max_steps, " steps"));
  return false;
}

// `ranks` runtimes over `fabric` with `config`, one thread each, each running `train` (runtime,
// rank); returns every rank's autotune history, taken before any rank shuts down.
std::vector<std::vector<Autotuner::Switch>> RunRanks(
    testing::InProcessFabric& fabric, int ranks, const Config& config, Failures& f,
    const std::function<void(Runtime&, int)>& train) {
  std::vector<std::vector<Autotuner::Switch>> histories(static_cast<size_t>(ranks));
  std::latch done(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Runtime>> rt =
          Runtime::Create(config, fabric.CreateController(r));
      f.Check(rt.ok(), r, rt.status().ToString());
      if (!rt.ok()) {
        done.count_down();
        return;
      }
      train(**rt, r);
      histories[static_cast<size_t>(r)] = (*rt)->TEST_autotune_history();
      done.arrive_and_wait();
      (*rt)->Shutdown();
    });
  }
  for (std::thread& t : threads) t.join();
  return histories;
}

std::string Describe(const std::vector<Autotuner::Switch>& history) {
  std::string text;
  for (const Autotuner::Switch& s : history) {
    absl::StrAppend(&text, "\n  cycle ", s.cycle, s.done ? " (done) " : " ",
                    DescribeParameters(s.parameters));
  }
  return text;
}

bool SameHistories(const std::vector<std::vector<Autotuner::Switch>>& histories) {
  for (const auto& h : histories) {
    if (h.size() != histories[0].size()) return false;
    for (size_t i = 0; i < h.size(); ++i) {
      if (h[i].cycle != histories[0][i].cycle || h[i].done != histories[0][i].done ||
          !(h[i].parameters == histories[0][i].parameters)) {
        return false;
      }
    }
  }
  return true;
}

TEST_CASE("autotune: every rank switches in the same cycle and ends with rank 0's choice",
          "[runtime][autotune]") {
  constexpr int kRanks = 3;
  testing::InProcessFabric fabric(kRanks);
  Failures f;
  const std::vector<std::vector<Autotuner::Switch>> histories =
      RunRanks(fabric, kRanks, AutotuneConfig(int64_t{64} << 20), f,
               [&](Runtime& rt, int r) { TrainUntilTuned(rt, f, r, 400); });
  f.Report();

  INFO("rank 0's history:" << Describe(histories[0]));
  // The start (cycle -1), then one switch per sample after the first (4 samples: 2 of the
  // search, 2 confirming the choice against the start) and one that keeps the choice. Warm-up
  // samples change nothing.
  REQUIRE(histories[0].size() == 5);
  CHECK(histories[0][0].cycle == -1);
  const Config c = AutotuneConfig(int64_t{64} << 20);
  CHECK(histories[0][0].parameters == TunedParameters{c.fusion_threshold_bytes,
                                                      c.pipeline_chunk_bytes, c.inplace_min_bytes,
                                                      c.cycle_time, std::nullopt});
  for (size_t i = 1; i < histories[0].size(); ++i) {
    CHECK(histories[0][i].cycle > histories[0][i - 1].cycle);
    CHECK(histories[0][i].done == (i + 1 == histories[0].size()));
  }
  // Points other than the start were tried.
  CHECK_FALSE(histories[0][1].parameters == histories[0][0].parameters);
  // Every rank switched in the same cycles to the same parameters.
  for (int r = 1; r < kRanks; ++r) INFO("rank " << r << ":" << Describe(histories[r]));
  CHECK(SameHistories(histories));
}

// One training step of the hierarchical test: what the rank saw around it.
struct StepRecord {
  int64_t first_cycle = 0;   // the loop's cycle count before the step's first submission
  int64_t end_cycle = 0;     // after its last completion
  int64_t hierarchical = 0;  // allreduce calls run hierarchically during the step
  int64_t flat = 0;          // and flat
};

// Training steps of five gradients, each of at least 2 elements (so that every piece reaches
// both members of a host: HierarchicalBackend runs a piece shorter than that flat whatever the
// mode), until rank 0's search is done, then `after` more steps; every result is checked. The
// algorithm counts are read between a step's first submission and its last completion, while
// nothing else is in flight (the "stop" allreduce comes after).
std::vector<StepRecord> TrainRecordingAlgorithms(Runtime& rt, Failures& f, int who, int max_steps,
                                                 int after) {
  const Topology t = rt.topology();
  const int64_t sizes[] = {2, 300, 5000, 70000, 300000};
  const BackgroundLoop::Counters& counters = rt.TEST_counters();
  std::vector<StepRecord> records;
  int remaining = -1;  // steps left after the search ended
  for (int step = 0; step < max_steps && remaining != 0; ++step) {
    if (remaining > 0) --remaining;
    StepRecord record;
    record.first_cycle = counters.cycles.load();
    const int64_t h0 = counters.hierarchical_allreduces.load();
    const int64_t f0 = counters.flat_allreduces.load();
    std::vector<std::vector<float>> grads;
    for (int64_t n : sizes) grads.emplace_back(n, static_cast<float>(t.rank + 1 + step));
    std::vector<Handle> handles;
    for (size_t g = 0; g < grads.size(); ++g) {
      absl::StatusOr<Handle> h = rt.Enqueue(Sum(absl::StrCat("grad.", g), grads[g]));
      f.Check(h.ok(), who, h.status().ToString());
      if (!h.ok()) return records;
      handles.push_back(*h);
    }
    const float expected = static_cast<float>(t.size * (t.size + 1) / 2 + t.size * step);
    for (size_t g = 0; g < grads.size(); ++g) {
      const absl::Status done = rt.Wait(handles[g]);
      f.Check(done.ok(), who, absl::StrCat("grad.", g, ": ", done.ToString()));
      if (!done.ok()) return records;
      bool right = true;
      for (float v : grads[g]) right = right && v == expected;
      f.Check(right, who, absl::StrCat("step ", step, " grad.", g, " is not ", expected));
      if (!right) return records;
    }
    record.end_cycle = counters.cycles.load();
    record.hierarchical = counters.hierarchical_allreduces.load() - h0;
    record.flat = counters.flat_allreduces.load() - f0;
    records.push_back(record);
    const std::vector<Autotuner::Switch> history = rt.TEST_autotune_history();
    std::vector<float> stop = {t.rank == 0 && !history.empty() && history.back().done ? 1.f : 0.f};
    absl::StatusOr<Handle> h = rt.Enqueue(Sum("stop", stop));
    if (!h.ok() || !rt.Wait(*h).ok()) {
      f.Check(false, who, "the stop allreduce failed");
      return records;
    }
    if (stop[0] > 0 && remaining < 0) remaining = after;
  }
  f.Check(remaining == 0, who, absl::StrCat("the search did not end in ", max_steps, " steps"));
  return records;
}

TEST_CASE(
    "autotune: on 2 hosts x 2 ranks, hierarchical allreduce is a knob and each switch "
    "changes the algorithm the allreduces run",
    "[runtime][autotune][hierarchical]") {
  constexpr int kRanks = 4;
  testing::InProcessFabric fabric(kRanks, {0, 0, 1, 1});
  Config config = AutotuneConfig(int64_t{64} << 20);
  // 6 samples of the search (the start and the space-filling points), 3 pairs confirming.
  config.autotune_bayes_opt_max_samples = 12;
  config.hierarchical_allreduce = false;  // the start
  Failures f;
  std::vector<std::vector<StepRecord>> records(kRanks);
  const std::vector<std::vector<Autotuner::Switch>> histories =
      RunRanks(fabric, kRanks, config, f, [&](Runtime& rt, int r) {
        records[r] = TrainRecordingAlgorithms(rt, f, r, 600, /*after=*/3);
      });
  f.Report();

  INFO("rank 0's history:" << Describe(histories[0]));
  REQUIRE(histories[0].size() == 13);  // the start and one switch per sample
  CHECK(SameHistories(histories));
  // The knob is part of every point, and the search tried both values.
  bool tried[2] = {false, false};
  for (const Autotuner::Switch& s : histories[0]) {
    REQUIRE(s.parameters.hierarchical_allreduce.has_value());
    tried[*s.parameters.hierarchical_allreduce ? 1 : 0] = true;
  }
  CHECK(histories[0][0].parameters.hierarchical_allreduce == false);
  CHECK(tried[1]);

  // Every step that ran wholly under one point ran the algorithm of that point, on every rank:
  // all its allreduces hierarchical when on, all flat when off. A step that spans a switch (the
  // switch's cycle between the cycle before its first submission and its last completion) is
  // left out.
  int checked[2] = {0, 0};
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < records[r].size(); ++i) {
      const StepRecord& s = records[r][i];
      const Autotuner::Switch* in_force = &histories[r][0];
      bool spans = false;
      for (const Autotuner::Switch& sw : histories[r]) {
        if (sw.cycle < 0) continue;
        if (sw.cycle >= s.first_cycle - 1 && sw.cycle <= s.end_cycle) spans = true;
        if (sw.cycle < s.first_cycle - 1) in_force = &sw;
      }
      if (spans) continue;
      const bool on = *in_force->parameters.hierarchical_allreduce;
      INFO("rank " << r << " step " << i << " (cycles " << s.first_cycle << ".." << s.end_cycle
                   << ") under " << DescribeParameters(in_force->parameters) << ": "
                   << s.hierarchical << " hierarchical, " << s.flat << " flat allreduces");
      if (on) {
        CHECK(s.hierarchical > 0);
        CHECK(s.flat == 0);
      } else {
        CHECK(s.hierarchical == 0);
        CHECK(s.flat > 0);
      }
      ++checked[on ? 1 : 0];
    }
  }
  // Both algorithms were seen under their points, and the choice held after the search.
  CHECK(checked[0] > 0);
  CHECK(checked[1] > 0);
}

TEST_CASE("autotune: hosts with different numbers of ranks leave hierarchical allreduce out",
          "[runtime][autotune][hierarchical]") {
  constexpr int kRanks = 3;
  testing::InProcessFabric fabric(kRanks, {0, 0, 1});
  Config config = AutotuneConfig(int64_t{64} << 20);
  config.hierarchical_allreduce = true;  // asked for, but this layout cannot run it
  Failures f;
  const std::vector<std::vector<Autotuner::Switch>> histories = RunRanks(
      fabric, kRanks, config, f, [&](Runtime& rt, int r) { TrainUntilTuned(rt, f, r, 400); });
  f.Report();
  INFO("rank 0's history:" << Describe(histories[0]));
  REQUIRE(histories[0].size() == 5);
  CHECK(SameHistories(histories));
  for (const Autotuner::Switch& s : histories[0]) {
    CHECK_FALSE(s.parameters.hierarchical_allreduce.has_value());
  }
}

TEST_CASE("autotune resumes in a re-formed world from the last best point", "[runtime][autotune]") {
  // World 1: A (rank 0) and B (rank 1) search. World 2: B becomes rank 0, A rank 1, and a new
  // runtime C joins as rank 2. Each process is configured with its own fusion threshold (none a
  // multiple of 4 KiB, so none a point the search itself would try): world 2 must start from
  // world 1's choice, which B holds, and not from B's or C's configuration.
  testing::InProcessFabric world1(2);
  testing::InProcessFabric world2(3);
  Failures f;
  const int64_t configured[] = {12345, 77777, 55555};  // A, B, C
  std::vector<std::vector<Autotuner::Switch>> first(2), second(3);
  std::latch tuned1(2), tuned2(3);
  std::vector<std::thread> threads;
  for (int who = 0; who < 3; ++who) {
    threads.emplace_back([&, who] {
      std::unique_ptr<Runtime> rt;
      if (who < 2) {
        absl::StatusOr<std::unique_ptr<Runtime>> created =
            Runtime::Create(AutotuneConfig(configured[who]), world1.CreateController(who));
        f.Check(created.ok(), who, created.status().ToString());
        if (created.ok()) rt = *std::move(created);
        if (rt != nullptr) TrainUntilTuned(*rt, f, who, 400);
        if (rt != nullptr) first[who] = rt->TEST_autotune_history();
        tuned1.arrive_and_wait();
        if (rt != nullptr) {
          const absl::Status reformed = rt->Reform(AutotuneConfig(configured[who]),
                                                   world2.CreateController(who == 0 ? 1 : 0));
          f.Check(reformed.ok(), who, reformed.ToString());
        }
      } else {
        absl::StatusOr<std::unique_ptr<Runtime>> created =
            Runtime::Create(AutotuneConfig(configured[who]), world2.CreateController(2));
        f.Check(created.ok(), who, created.status().ToString());
        if (created.ok()) rt = *std::move(created);
      }
      if (rt == nullptr) {
        tuned2.count_down();
        return;
      }
      TrainUntilTuned(*rt, f, who, 400);
      second[who] = rt->TEST_autotune_history();
      tuned2.arrive_and_wait();
      rt->Shutdown();
    });
  }
  for (std::thread& t : threads) t.join();
  f.Report();

  INFO("world 1, A:" << Describe(first[0]) << "\nworld 2, B:" << Describe(second[1]));
  REQUIRE(first[0].size() == 5);
  REQUIRE(first[0].back().done);
  CHECK(SameHistories(first));
  CHECK(first[0][0].parameters.fusion_threshold_bytes == 12345);  // A was rank 0
  const TunedParameters best = first[0].back().parameters;
  // World 2 started from world 1's choice on every rank, and searched again.
  REQUIRE(second[1].size() == 5);
  CHECK(second[1][0].cycle == -1);
  CHECK(second[1][0].parameters == best);
  CHECK(second[1].back().done);
  CHECK(SameHistories(second));
}

}  // namespace
}  // namespace chorus::runtime
