// MPI tier: autotune over real processes (runtime/autotune/autotuner.h). A runtime of its own
// per rank (the internal API: the search's history is not part of the public one) on MPI, or on
// UCX under mpirun when CHORUS_CONTROLLER=ucx: training steps until rank 0's search has ended,
// every result checked; then every rank must have switched in the same cycles to the same
// parameters, ending with the choice rank 0 wrote to its log.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include <catch2/catch.hpp>
#include <mpi.h>

#include "chorus/chorus.h"
#include "runtime/autotune/knob_space.h"
#include "runtime/config.h"
#include "runtime/controller_factory.h"
#include "runtime/runtime.h"

namespace chorus::mpitest {
namespace {

using runtime::Autotuner;

OpRequest Sum(const std::string& name, std::vector<float>& data) {
  OpRequest r;
  r.type = OpType::kAllreduce;
  r.name = name;
  r.input = {data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}};
  r.reduce_op = ReduceOp::kSum;
  return r;
}

// Rank 0's text, on every rank.
std::string FromRoot(std::string text) {
  int size = static_cast<int>(text.size());
  MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD);
  text.resize(static_cast<size_t>(size));
  MPI_Bcast(text.data(), size, MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

std::string Describe(const std::vector<Autotuner::Switch>& history) {
  std::string text;
  for (const Autotuner::Switch& s : history) {
    absl::StrAppend(&text, "cycle ", s.cycle, s.done ? " done " : " ",
                    runtime::DescribeParameters(s.parameters), "\n");
  }
  return text;
}

TEST_CASE("autotune: the search ends with the same parameters on every rank", "[autotune]") {
  // This test runs a runtime of its own: the process-wide one (other test cases') goes first.
  CHECK(chorus::Shutdown().ok());
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string log_path = FromRoot(absl::StrCat("/tmp/chorus_mpi_autotune.", ::getpid()));
  constexpr int kWarmup = 1, kSamples = 6;

  absl::StatusOr<runtime::Config> config = runtime::Config::FromEnvironment();
  REQUIRE(config.ok());
  config->autotune = true;
  config->autotune_log = log_path;
  config->autotune_warmup_samples = kWarmup;
  config->autotune_steps_per_sample = 3;
  config->autotune_bayes_opt_max_samples = kSamples;
  config->stall_shutdown_time = absl::Seconds(60);  // a stuck op fails instead of hanging
  auto controller = runtime::CreateController(*config, nullptr);
  REQUIRE(controller.ok());
  auto created = runtime::Runtime::Create(*config, *std::move(controller));
  REQUIRE(created.ok());
  runtime::Runtime& rt = **created;

  const int64_t sizes[] = {1, 1000, 30000, 300000, 1000000};
  int steps = 0;
  bool wrong = false, failed = false, done = false;
  while (!done && !failed && steps < 2000) {
    std::vector<std::vector<float>> grads;
    for (int64_t n : sizes) grads.emplace_back(n, static_cast<float>(rank + 1 + steps));
    std::vector<Handle> handles;
    for (size_t g = 0; g < grads.size(); ++g) {
      absl::StatusOr<Handle> h = rt.Enqueue(Sum(absl::StrCat("grad.", g), grads[g]));
      failed |= !h.ok();
      if (h.ok()) handles.push_back(*h);
    }
    for (Handle h : handles) failed |= !rt.Wait(h).ok();
    const float expected = static_cast<float>(size * (size + 1) / 2 + size * steps);
    for (const std::vector<float>& g : grads)
      wrong |= g.front() != expected || g.back() != expected;
    // Rank 0 says when its search is done; every rank stops after the same step.
    const std::vector<Autotuner::Switch> history = rt.TEST_autotune_history();
    std::vector<float> stop = {rank == 0 && !history.empty() && history.back().done ? 1.f : 0.f};
    absl::StatusOr<Handle> h = rt.Enqueue(Sum("autotune.done", stop));
    failed |= !h.ok() || !rt.Wait(*h).ok();
    done = stop[0] > 0;
    ++steps;
  }
  INFO("rank " << rank << " after " << steps << " steps");
  CHECK_FALSE(failed);
  CHECK_FALSE(wrong);
  CHECK(done);

  const std::vector<Autotuner::Switch> history = rt.TEST_autotune_history();
  const std::string mine = Describe(history);
  const std::string root = FromRoot(mine);
  INFO("this rank switched:\n" << mine << "rank 0 switched:\n" << root);
  CHECK(mine == root);
  // The start, then one switch per sample; the last keeps the choice.
  CHECK(history.size() == 1 + kSamples);
  CHECK((!history.empty() && history.back().done));
  rt.Shutdown();

  if (rank == 0) {
    std::ifstream in(log_path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    INFO("the autotune log:\n" << absl::StrJoin(lines, "\n"));
    CHECK(lines.size() == 1 + kWarmup + kSamples + 1);
    CHECK((!lines.empty() && lines.back().find(",best,") != std::string::npos));
    // The choice's parameters are the ones every rank kept.
    if (!history.empty() && !lines.empty()) {
      const runtime::TunedParameters& kept = history.back().parameters;
      CHECK(lines.back().find(absl::StrCat(",best,", kept.fusion_threshold_bytes, ",",
                                           kept.pipeline_chunk_bytes, ",", kept.inplace_min_bytes,
                                           ",")) != std::string::npos);
    }
    std::remove(log_path.c_str());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace chorus::mpitest
