// Join and init-agreement edge cases of the runtime, over the in-process fabric: regression
// tests for a use-after-free at a join transition, a cache hit that could never meet requests
// left in the coordinator, joined ranks' contribution to min/max/product, join names that
// differ between ranks, and init-time process sets that differ between ranks.
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "runtime/runtime.h"
#include "test/support/fast_cycle_config.h"
#include "test/support/in_process_fabric.h"
#include "test/support/runtime_ranks.h"

namespace chorus::runtime {
namespace {

using testing::AllreduceOf;

OpRequest Join(const std::string& name = "") {
  OpRequest r;
  r.type = OpType::kJoin;
  r.name = name;
  return r;
}

// Thread-safe record of what each rank saw; checked on the main thread.
struct Record {
  std::mutex mu;
  std::vector<std::string> failures;
  void Check(bool ok, const std::string& what) {
    if (ok) return;
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(what);
  }
};

template <typename F>
void RunCreatedRanks(int n, F fn,
                     std::vector<std::vector<std::vector<int32_t>>> sets_per_rank = {}) {
  testing::InProcessFabric fabric(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto rt = Runtime::Create(
          testing::FastCycleConfig(), fabric.CreateController(r),
          sets_per_rank.empty() ? std::vector<std::vector<int32_t>>{} : sets_per_rank[r]);
      fn(r, rt);
      if (rt.ok()) (*rt)->Shutdown();
    });
  }
  for (auto& t : threads) t.join();
}

TEST_CASE("a cached op submitted after a world join meets the requests left before it",
          "[runtime][join]") {
  Record rec;
  RunCreatedRanks(3, [&](int rank, absl::StatusOr<std::unique_ptr<Runtime>>& created) {
    rec.Check(created.ok(), created.status().ToString());
    if (!created.ok()) return;
    Runtime& rt = **created;
    std::vector<float> x(1);
    for (int k = 0; k < 2; ++k) {  // "x" is now in every rank's response cache
      x[0] = static_cast<float>(rank + 1);
      auto h = rt.Enqueue(AllreduceOf("x", x));
      rec.Check(h.ok() && rt.Wait(*h).ok(), "warm-up");
    }
    x[0] = static_cast<float>(rank + 1);
    if (rank != 0) {
      // Submit x, then join: x waits in the coordinator for rank 0.
      auto hx = rt.Enqueue(AllreduceOf("x", x));
      auto hj = rt.Enqueue(Join());
      rec.Check(rt.Wait(*hj).ok(), "first join");
      rec.Check(rt.Wait(*hx).ok(), "x on a rank that joined");
      rec.Check(x[0] == 6.0f, absl::StrCat("rank ", rank, " x = ", x[0]));
      auto hj2 = rt.Enqueue(Join());
      rec.Check(rt.Wait(*hj2).ok(), "second join");
    } else {
      std::vector<float> probe(1, 1.0f);
      auto hp = rt.Enqueue(AllreduceOf("probe", probe));  // ready once ranks 1 and 2 joined
      rec.Check(rt.Wait(*hp).ok(), "probe");
      auto hj = rt.Enqueue(Join());
      rec.Check(rt.Wait(*hj).ok(), "first join");
      // The join cleared the cache, so x goes to the coordinator and meets ranks 1 and 2.
      auto hx = rt.Enqueue(AllreduceOf("x", x));
      auto hj2 = rt.Enqueue(Join());
      rec.Check(rt.Wait(*hx).ok(), "x on rank 0");
      rec.Check(x[0] == 6.0f, absl::StrCat("rank 0 x = ", x[0]));
      rec.Check(rt.Wait(*hj2).ok(), "second join");
    }
    std::vector<float> after(1, 1.0f);
    auto ha = rt.Enqueue(AllreduceOf("after", after));
    rec.Check(rt.Wait(*ha).ok() && after[0] == 3.0f, "after");
  });
  for (const std::string& f : rec.failures) FAIL_CHECK(f);
}

TEST_CASE("joined ranks contribute the identity of min, max and product", "[runtime][join]") {
  Record rec;
  RunCreatedRanks(2, [&](int rank, absl::StatusOr<std::unique_ptr<Runtime>>& created) {
    rec.Check(created.ok(), created.status().ToString());
    if (!created.ok()) return;
    Runtime& rt = **created;
    if (rank == 1) {
      auto hj = rt.Enqueue(Join());
      rec.Check(rt.Wait(*hj).ok(), "join");
      return;
    }
    std::vector<float> mx(300000, -5.0f), mn(4, 7.0f), pr(4, 3.0f);  // mx: in place, chunked
    auto hmx = rt.Enqueue(AllreduceOf("max", mx, ReduceOp::kMax));
    auto hmn = rt.Enqueue(AllreduceOf("min", mn, ReduceOp::kMin));
    auto hpr = rt.Enqueue(AllreduceOf("prod", pr, ReduceOp::kProduct));
    // Wait for all three before reading any buffer.
    const bool ok = rt.Wait(*hmx).ok() && rt.Wait(*hmn).ok() && rt.Wait(*hpr).ok();
    rec.Check(ok, "max/min/product failed");
    rec.Check(mx.back() == -5.0f, absl::StrCat("max ", mx.back()));
    rec.Check(mn[0] == 7.0f, absl::StrCat("min ", mn[0]));
    rec.Check(pr[0] == 3.0f, absl::StrCat("product ", pr[0]));
    auto hj = rt.Enqueue(Join());
    rec.Check(rt.Wait(*hj).ok(), "join");
  });
  for (const std::string& f : rec.failures) FAIL_CHECK(f);
}

TEST_CASE("join completes on every rank whatever each rank named it; one join at a time",
          "[runtime][join]") {
  Record rec;
  // Rank 1 joins only once rank 0's second join was refused: until then rank 0's first join
  // cannot complete, so the second one always finds it in flight.
  std::promise<void> refused;
  std::shared_future<void> refused_seen = refused.get_future().share();
  RunCreatedRanks(2, [&](int rank, absl::StatusOr<std::unique_ptr<Runtime>>& created) {
    rec.Check(created.ok(), created.status().ToString());
    if (!created.ok()) {
      if (rank == 0) refused.set_value();
      return;
    }
    Runtime& rt = **created;
    if (rank == 1) refused_seen.wait();
    auto hj = rt.Enqueue(Join(rank == 0 ? "join.a" : "join.b"));
    rec.Check(hj.ok(), "enqueue join");
    if (rank == 0) {
      auto second = rt.Enqueue(Join("join.again"));
      absl::Status st = rt.Wait(*second);
      rec.Check(absl::IsInvalidArgument(st) && absl::StrContains(st.message(), "in flight"),
                st.ToString());
      refused.set_value();
    }
    auto result = rt.Release(*hj);
    rec.Check(result.ok() && result->status.ok(), "join result");
    rec.Check(result.ok() && (result->last_joined_rank == 0 || result->last_joined_rank == 1),
              "last joined rank");
  });
  for (const std::string& f : rec.failures) FAIL_CHECK(f);
}

TEST_CASE("init-time process sets that differ between ranks fail init on every rank",
          "[runtime][process_set]") {
  Record rec;
  RunCreatedRanks(2,
                  [&](int rank, absl::StatusOr<std::unique_ptr<Runtime>>& created) {
                    rec.Check(absl::IsInvalidArgument(created.status()),
                              absl::StrCat("rank ", rank, ": ", created.status().ToString()));
                    // The rank whose sets differ from rank 0's says how; the others point at it.
                    rec.Check(
                        absl::StrContains(created.status().message(),
                                          rank == 1 ? "differ"
                                                    : "chorus init failed on rank 1 (rank 0 is "
                                                      "fine): its runtime could not start"),
                        std::string(created.status().message()));
                  },
                  {{{0, 1}}, {}});
  for (const std::string& f : rec.failures) FAIL_CHECK(f);
}

TEST_CASE("init-time process sets with invalid ranks fail init on every rank",
          "[runtime][process_set]") {
  Record rec;
  RunCreatedRanks(
      2,
      [&](int rank, absl::StatusOr<std::unique_ptr<Runtime>>& created) {
        rec.Check(absl::IsInvalidArgument(created.status()),
                  absl::StrCat("rank ", rank, ": ", created.status().ToString()));
        // Every rank sees the problem itself (the sets agree), so every rank names it.
        rec.Check(absl::StrContains(created.status().message(),
                                    "process set 2: process set ranks [0, 2] must be non-empty, "
                                    "ascending, unique world ranks below 2"),
                  std::string(created.status().message()));
      },
      {{{0, 1}, {0, 2}}, {{0, 1}, {0, 2}}});
  for (const std::string& f : rec.failures) FAIL_CHECK(f);
}

}  // namespace
}  // namespace chorus::runtime
