// The runtime with CHORUS_HIERARCHICAL_ALLREDUCE / _ALLGATHER over the in-process fabric with
// simulated hosts: fused batches run in pieces (each piece decides for itself: the last, short
// one runs flat), tensors that do not divide by the local size, allgathers with different rows
// per rank, a process set on some of the hosts, and the flat fallback of a layout whose hosts run
// different numbers of ranks. Whether the hierarchical path ran is read from the fabric's count
// of collectives on group backends.
#include <barrier>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "runtime/runtime.h"
#include "test/support/fast_cycle_config.h"
#include "test/support/in_process_fabric.h"
#include "test/support/rank_failures.h"

namespace chorus::runtime {
namespace {

using testing::Failures;

using HostRankFn = std::function<void(int rank, Runtime& rt, Failures& f)>;

// Runs `fn` on one runtime per simulated rank (rank r on host hosts[r]) and returns how many
// collectives ran on group backends.
int64_t RunOnHosts(const std::vector<int>& hosts, const Config& config, const HostRankFn& fn,
                   std::vector<std::vector<int32_t>> sets = {}) {
  const int n = static_cast<int>(hosts.size());
  testing::InProcessFabric fabric(n, hosts);
  Failures f;
  std::barrier done(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto rt = Runtime::Create(config, fabric.CreateController(r), sets);
      if (!rt.ok()) {
        f.Check(false, rt.status().ToString());
        done.arrive_and_drop();
        return;
      }
      fn(r, **rt, f);
      done.arrive_and_wait();
      (*rt)->Shutdown();
    });
  }
  for (auto& t : threads) t.join();
  f.Report();
  return fabric.group_collectives();
}

Config HierarchicalConfig(bool allreduce, bool allgather) {
  Config c = testing::FastCycleConfig();
  c.hierarchical_allreduce = allreduce;
  c.hierarchical_allgather = allgather;
  c.pipeline_chunk_bytes = 4096;  // 1024 int32 a piece
  c.inplace_min_bytes = 16384;    // 4096 int32 and more: reduced in place, piece by piece
  return c;
}

// Sizes spanning packed tensors, a packed window cut into pieces, and tensors reduced in place
// whose last piece is shorter than the local size (flat) or not a multiple of it.
const std::vector<int64_t> kCounts = {1, 7, 1000, 1025, 3333, 4097, 10241, 5};

// Allreduces int32 tensors of kCounts (rank r's element i: r * 1000 + i) fused in one batch, then
// allgathers rank r's r + 1 rows of 3; checks both exactly.
void Step(int rank, int n, Runtime& rt, Failures& f, int32_t set_id = 0,
          const std::vector<int>& members = {}) {
  std::vector<int> ranks = members;
  if (ranks.empty()) {
    ranks.resize(n);
    std::iota(ranks.begin(), ranks.end(), 0);
  }
  std::vector<std::vector<int32_t>> data(kCounts.size());
  std::vector<Handle> handles;
  for (size_t t = 0; t < kCounts.size(); ++t) {
    data[t].resize(static_cast<size_t>(kCounts[t]));
    for (int64_t i = 0; i < kCounts[t]; ++i) data[t][i] = rank * 1000 + static_cast<int32_t>(i);
    OpRequest r;
    r.type = OpType::kAllreduce;
    r.name = absl::StrCat("set", set_id, ".t", t);
    r.process_set_id = set_id;
    r.input = {data[t].data(), DataType::kInt32, {kCounts[t]}};
    auto h = rt.Enqueue(r);
    f.Check(h.ok(), h.status().ToString());
    if (h.ok()) handles.push_back(*h);
  }
  std::vector<int32_t> rows(static_cast<size_t>(3 * (rank + 1)), rank);
  OpRequest ag;
  ag.type = OpType::kAllgather;
  ag.name = absl::StrCat("set", set_id, ".ag");
  ag.process_set_id = set_id;
  ag.input = {rows.data(), DataType::kInt32, {rank + 1, 3}};
  auto hag = rt.Enqueue(ag);
  f.Check(hag.ok(), hag.status().ToString());
  for (Handle h : handles) f.Check(rt.Wait(h).ok(), "allreduce wait");
  int32_t rank_sum = 0;
  for (int r : ranks) rank_sum += r;
  for (size_t t = 0; t < kCounts.size(); ++t) {
    for (int64_t i = 0; i < kCounts[t]; ++i) {
      const int32_t want = rank_sum * 1000 + static_cast<int32_t>(ranks.size() * i);
      if (data[t][i] != want) {
        f.Check(false, absl::StrCat("rank ", rank, " tensor ", t, "[", i, "] = ", data[t][i],
                                    ", want ", want));
        break;
      }
    }
  }
  if (!hag.ok()) return;
  auto result = rt.Release(*hag);
  f.Check(result.ok() && result->status.ok(), "allgather");
  if (!result.ok() || !result->status.ok()) return;
  std::vector<int32_t> want;
  for (int r : ranks) want.insert(want.end(), static_cast<size_t>(3 * (r + 1)), r);
  const auto* got = reinterpret_cast<const int32_t*>(result->output->data());
  f.Check(result->output->size() == want.size() * sizeof(int32_t) &&
              std::equal(want.begin(), want.end(), got),
          absl::StrCat("rank ", rank, ": allgather values"));
}

TEST_CASE("Hierarchical allreduce and allgather in the runtime: fused batches in pieces",
          "[hierarchical][runtime]") {
  const std::vector<int> hosts = GENERATE(std::vector<int>{0, 0, 1, 1, 2, 2},  // 3 x 2
                                          std::vector<int>{0, 1, 0, 1});       // interleaved
  const int n = static_cast<int>(hosts.size());
  auto step = [n](int rank, Runtime& rt, Failures& f) {
    for (int s = 0; s < 3; ++s) Step(rank, n, rt, f);  // the later steps from the cache
  };
  SECTION("on") { CHECK(RunOnHosts(hosts, HierarchicalConfig(true, true), step) > 0); }
  SECTION("allgather only") { CHECK(RunOnHosts(hosts, HierarchicalConfig(false, true), step) > 0); }
  SECTION("off: the group backends exist but carry nothing") {
    CHECK(RunOnHosts(hosts, HierarchicalConfig(false, false), step) == 0);
  }
}

TEST_CASE("Hierarchical collectives of a process set on some of the hosts",
          "[hierarchical][runtime][process_set]") {
  // Set 1: ranks 0, 1 (host 0) and 4, 5 (host 2): 2 x 2. Set 2: ranks 0, 1, 2: hosts run 2 and 1.
  const std::vector<int> hosts = {0, 0, 1, 1, 2, 2};
  const std::vector<std::vector<int32_t>> sets = {{0, 1, 4, 5}, {0, 1, 2}};
  const bool on = GENERATE(false, true);
  const int64_t group_calls = RunOnHosts(
      hosts, HierarchicalConfig(on, on),
      [](int rank, Runtime& rt, Failures& f) {
        if (rank == 0 || rank == 1 || rank == 4 || rank == 5) Step(rank, 6, rt, f, 1, {0, 1, 4, 5});
        if (rank <= 2) Step(rank, 6, rt, f, 2, {0, 1, 2});
      },
      sets);
  CHECK((group_calls > 0) == on);
}

TEST_CASE("Hosts with different numbers of ranks run flat", "[hierarchical][runtime]") {
  const std::vector<int> hosts = {0, 0, 1};
  CHECK(RunOnHosts(hosts, HierarchicalConfig(true, true),
                   [](int rank, Runtime& rt, Failures& f) { Step(rank, 3, rt, f); }) == 0);
}

}  // namespace
}  // namespace chorus::runtime
