// End-to-end tests of the runtime (queue, loop, coordinator, cache, fusion, executor) with N
// simulated ranks as threads over the in-process fabric.
#include "runtime/runtime.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <latch>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "test/support/fast_cycle_config.h"
#include "test/support/in_process_fabric.h"
#include "test/support/rank_failures.h"
#include "test/support/runtime_ranks.h"

namespace chorus::runtime {
namespace {

using RankFn = testing::RuntimeRankFn;

std::vector<std::string> RunRanks(int n, const RankFn& fn,
                                  Config config = testing::FastCycleConfig(),
                                  std::vector<std::vector<int32_t>> sets = {}) {
  return testing::RunRuntimeRanks(n, fn, std::move(config), std::move(sets));
}

#define RANK_CHECK(failures, cond, msg)                                          \
  do {                                                                           \
    if (!(cond)) (failures).Check(false, absl::StrCat(#cond, " failed: ", msg)); \
  } while (0)

using testing::AllreduceOf;
using testing::Failures;

// Allreduces each data[t] under the name `prefix` + t, submitted together, and waits for all.
void AllreduceEach(Runtime& rt, Failures& f, const std::string& prefix,
                   std::vector<std::vector<float>>& data, ReduceOp op) {
  std::vector<Handle> hs;
  for (size_t t = 0; t < data.size(); ++t) {
    auto h = rt.Enqueue(AllreduceOf(absl::StrCat(prefix, t), data[t], op));
    RANK_CHECK(f, h.ok(), h.status().ToString());
    if (h.ok()) hs.push_back(*h);
  }
  for (Handle h : hs) RANK_CHECK(f, rt.Wait(h).ok(), "wait");
}

void ExpectNoErrors(const std::vector<std::string>& start_errors, Failures& f) {
  for (const std::string& e : start_errors) CHECK(e.empty());
  f.Report();
}

TEST_CASE("allreduce of shuffled submissions gives one answer on every rank", "[runtime]") {
  const int n = GENERATE(1, 2, 3, 4);
  const int tensors = 40;
  Failures f;
  auto errs = RunRanks(n, [&](int rank, Runtime& rt) {
    std::vector<std::vector<float>> data(tensors);
    std::vector<int> order(tensors);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(rank * 7919 + 1));
    std::vector<Handle> handles(tensors);
    for (int t : order) {
      // Sizes span tiny (packed) to large (in place, several chunks).
      data[t].assign(1 + t * t * 37, static_cast<float>(rank + 1) * (t + 1));
      auto h = rt.Enqueue(AllreduceOf(absl::StrCat("t", t), data[t], ReduceOp::kSum));
      RANK_CHECK(f, h.ok(), h.status().ToString());
      handles[t] = *h;
    }
    const float ranks_sum = n * (n + 1) / 2.0f;
    for (int t = 0; t < tensors; ++t) {
      absl::Status st = rt.Wait(handles[t]);
      RANK_CHECK(f, st.ok(), st.ToString());
      for (float v : data[t]) RANK_CHECK(f, v == ranks_sum * (t + 1), absl::StrCat("t", t, " ", v));
    }
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("steady state runs from the response cache without negotiation", "[runtime][cache]") {
  const int n = 3;
  Failures f;
  auto errs = RunRanks(n, [&](int rank, Runtime& rt) {
    std::vector<std::vector<float>> data(8, std::vector<float>(100));
    int64_t rounds_after_warmup = 0, hits_after_warmup = 0;
    for (int step = 0; step < 10; ++step) {
      for (auto& d : data) std::fill(d.begin(), d.end(), static_cast<float>(rank + step));
      AllreduceEach(rt, f, "g", data, ReduceOp::kAverage);
      for (auto& d : data) RANK_CHECK(f, d[0] == 1.0f + step, d[0]);
      if (step == 1) {
        rounds_after_warmup = rt.TEST_counters().negotiation_rounds.load();
        hits_after_warmup = rt.TEST_counters().cache_hits.load();
      }
    }
    // Steps 2..9 negotiated nothing: every tensor came from the cache.
    RANK_CHECK(f, rt.TEST_counters().negotiation_rounds.load() == rounds_after_warmup,
               rt.TEST_counters().negotiation_rounds.load());
    RANK_CHECK(f, rt.TEST_counters().cache_hits.load() - hits_after_warmup == 8 * 8,
               rt.TEST_counters().cache_hits.load() - hits_after_warmup);
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("once every rank's cached ops completed, no rank runs another cycle until new work",
          "[runtime][cache][cycles]") {
  // Whether another rank still has ops pending is judged after the cycle's execution (Note
  // [Cache bit vector]): a cycle that completes every rank's ops leaves all of them waiting
  // for local work, here for up to an hour. Judged before the execution, every rank would run
  // one more, empty, cycle after each step.
  const int n = 3;
  Config config = testing::FastCycleConfig();
  // A rank that judged others busy would run its empty cycle a cycle time after the last one:
  // long enough here for the count below to be read first.
  config.cycle_time = absl::Milliseconds(40);
  config.idle_cycle_time = absl::Hours(1);
  std::barrier step_done(n);
  Failures f;
  auto errs = RunRanks(
      n,
      [&](int rank, Runtime& rt) {
        std::vector<std::vector<float>> data(8, std::vector<float>(16));
        for (int step = 0; step < 6; ++step) {
          for (int t = 0; t < 8; ++t) {
            std::fill(data[t].begin(), data[t].end(), static_cast<float>(rank + t));
          }
          AllreduceEach(rt, f, "c", data, ReduceOp::kSum);
          for (int t = 0; t < 8; ++t) {
            RANK_CHECK(f, data[t][0] == static_cast<float>(3 + 3 * t), data[t][0]);
          }
          step_done.arrive_and_wait();  // every rank's ops are complete
          const int64_t cycles = rt.TEST_counters().cycles.load();
          std::this_thread::sleep_for(std::chrono::milliseconds(120));
          // Steps 0 and 1 negotiate (and fill the cache); from step 2 on every op is a hit.
          if (step >= 2) {
            RANK_CHECK(f, rt.TEST_counters().cycles.load() == cycles,
                       absl::StrCat("step ", step, ": cycles ", cycles, " -> ",
                                    rt.TEST_counters().cycles.load()));
          }
          step_done.arrive_and_wait();  // nobody submits the next step before all have looked
        }
      },
      config);
  ExpectNoErrors(errs, f);
}

TEST_CASE("a changed shape under a cached name renegotiates on every rank", "[runtime][cache]") {
  const int n = 2;
  Failures f;
  auto errs = RunRanks(n, [&](int rank, Runtime& rt) {
    for (int step = 0; step < 6; ++step) {
      std::vector<float> d(step < 3 ? 10 : 20, 1.0f);
      auto h = rt.Enqueue(AllreduceOf("w", d, ReduceOp::kSum));
      RANK_CHECK(f, h.ok() && rt.Wait(*h).ok(), step);
      RANK_CHECK(f, d.back() == 2.0f, d.back());
    }
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("a shape mismatch fails the op on every rank, naming tensor and ranks", "[runtime]") {
  const int n = 3;
  Failures f;
  auto errs = RunRanks(n, [&](int rank, Runtime& rt) {
    std::vector<float> d(rank == 1 ? 5 : 4, 1.0f);
    auto h = rt.Enqueue(AllreduceOf("bad", d, ReduceOp::kSum));
    RANK_CHECK(f, h.ok(), "enqueue");
    absl::Status st = rt.Wait(*h);
    RANK_CHECK(f, absl::IsInvalidArgument(st), st.ToString());
    RANK_CHECK(f, absl::StrContains(st.message(), "'bad'"), st.message());
    RANK_CHECK(f, absl::StrContains(st.message(), "rank 1"), st.message());
    // The runtime keeps working.
    std::vector<float> ok(3, 1.0f);
    auto h2 = rt.Enqueue(AllreduceOf("good", ok, ReduceOp::kSum));
    RANK_CHECK(f, h2.ok() && rt.Wait(*h2).ok() && ok[0] == 3.0f, ok[0]);
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("a duplicate in-flight name is refused at enqueue", "[runtime]") {
  Failures f;
  auto errs = RunRanks(2, [&](int rank, Runtime& rt) {
    std::vector<float> a(4, 1.0f), b(4, 1.0f);
    if (rank == 0) {
      auto h = rt.Enqueue(AllreduceOf("dup", a, ReduceOp::kSum));
      auto h2 = rt.Enqueue(AllreduceOf("dup", b, ReduceOp::kSum));
      RANK_CHECK(f, absl::IsInvalidArgument(h2.status()), h2.status().ToString());
      RANK_CHECK(f, rt.Wait(*h).ok(), "first completes");
    } else {
      auto h = rt.Enqueue(AllreduceOf("dup", a, ReduceOp::kSum));
      RANK_CHECK(f, rt.Wait(*h).ok(), "peer completes");
    }
    RANK_CHECK(f, a[0] == 2.0f, a[0]);
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("join: joined ranks contribute zeros and join returns the last rank", "[runtime]") {
  const int n = 3;
  Failures f;
  auto errs = RunRanks(n, [&](int rank, Runtime& rt) {
    // Rank r runs r + 1 steps; in step s the ranks r >= s take part.
    for (int s = 0; s <= rank; ++s) {
      std::vector<float> d(6, static_cast<float>(rank + 1));
      auto h = rt.Enqueue(AllreduceOf(absl::StrCat("step", s), d, ReduceOp::kSum));
      RANK_CHECK(f, h.ok(), h.status().ToString());
      absl::Status st = rt.Wait(*h);
      RANK_CHECK(f, st.ok(), st.ToString());
      float expect = 0;
      for (int r = s; r < n; ++r) expect += r + 1;
      RANK_CHECK(f, d[0] == expect, absl::StrCat("rank ", rank, " step ", s, ": ", d[0]));
    }
    OpRequest join;
    join.type = OpType::kJoin;
    auto h = rt.Enqueue(join);
    RANK_CHECK(f, h.ok(), h.status().ToString());
    auto result = rt.Release(*h);
    RANK_CHECK(f, result.ok() && result->status.ok(), "join");
    RANK_CHECK(f, result->last_joined_rank == n - 1, result->last_joined_rank);
    // After everyone joined, ordinary ops work again.
    std::vector<float> d(2, 1.0f);
    auto h2 = rt.Enqueue(AllreduceOf("after_join", d, ReduceOp::kSum));
    RANK_CHECK(f, h2.ok() && rt.Wait(*h2).ok() && d[0] == n, d[0]);
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("process sets: add, run inside, refuse outsiders, remove", "[runtime]") {
  const int n = 3;
  Failures f;
  auto errs = RunRanks(n, [&](int rank, Runtime& rt) {
    OpRequest add;
    add.type = OpType::kAddProcessSet;
    add.process_set_ranks = {0, 2};
    auto h = rt.Enqueue(add);
    RANK_CHECK(f, h.ok(), h.status().ToString());
    auto added = rt.Release(*h);
    RANK_CHECK(f, added.ok() && added->status.ok(), "add");
    const int32_t id = added->process_set_id;
    RANK_CHECK(f, id == 1, id);
    std::vector<float> d(5, static_cast<float>(rank));
    OpRequest r = AllreduceOf("in_set", d, ReduceOp::kSum);
    r.process_set_id = id;
    auto hs = rt.Enqueue(r);
    if (rank == 1) {
      RANK_CHECK(f, absl::IsInvalidArgument(hs.status()), hs.status().ToString());
    } else {
      RANK_CHECK(f, hs.ok() && rt.Wait(*hs).ok(), "member op");
      RANK_CHECK(f, d[0] == 2.0f, d[0]);  // ranks 0 and 2
    }
    OpRequest remove;
    remove.type = OpType::kRemoveProcessSet;
    remove.process_set_id = id;
    auto hr = rt.Enqueue(remove);
    RANK_CHECK(f, hr.ok() && rt.Wait(*hr).ok(), "remove");
    std::vector<float> e(5, 1.0f);
    OpRequest gone = AllreduceOf("gone", e, ReduceOp::kSum);
    gone.process_set_id = id;
    RANK_CHECK(f, absl::IsInvalidArgument(rt.Enqueue(gone).status()), "removed set refused");
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("add_process_set with invalid ranks is refused at enqueue", "[runtime]") {
  Failures f;
  auto errs = RunRanks(2, [&](int rank, Runtime& rt) {
    OpRequest add;
    add.type = OpType::kAddProcessSet;
    add.name = "bad_add";
    add.process_set_ranks = {1, 0};
    auto h = rt.Enqueue(add);
    RANK_CHECK(f, absl::IsInvalidArgument(h.status()), h.status().ToString());
    RANK_CHECK(f,
               h.status().message() ==
                   "add_process_set of tensor 'bad_add': process set ranks [1, 0] must be "
                   "non-empty, ascending, unique world ranks below 2",
               h.status().message());
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("stalled ops fail with DeadlineExceeded after the stall shutdown time", "[runtime]") {
  Config config = testing::FastCycleConfig();
  config.stall_warning_time = absl::Milliseconds(50);
  config.stall_shutdown_time = absl::Milliseconds(100);
  Failures f;
  std::promise<void> timed_out_promise;
  std::shared_future<void> timed_out = timed_out_promise.get_future().share();
  auto errs = RunRanks(
      2,
      [&](int rank, Runtime& rt) {
        std::vector<float> d(3, 1.0f);
        if (rank == 0) {
          auto h = rt.Enqueue(AllreduceOf("lonely", d, ReduceOp::kSum));
          absl::Status st = rt.Wait(*h);
          RANK_CHECK(f, absl::IsDeadlineExceeded(st), st.ToString());
          RANK_CHECK(f, absl::StrContains(st.message(), "lonely"), st.message());
          RANK_CHECK(f, absl::StrContains(st.message(), "1"), st.message());
          timed_out_promise.set_value();
        } else {
          timed_out.wait();
        }
        // Both ranks then agree again.
        std::vector<float> e(3, 1.0f);
        auto h = rt.Enqueue(AllreduceOf("together", e, ReduceOp::kSum));
        RANK_CHECK(f, h.ok() && rt.Wait(*h).ok() && e[0] == 2.0f, e[0]);
      },
      config);
  ExpectNoErrors(errs, f);
}

TEST_CASE("shutdown completes pending ops with Aborted", "[runtime]") {
  Failures f;
  std::latch enqueued(1);  // rank 1 shuts down (for everyone) only after rank 0's enqueue
  auto errs = RunRanks(2, [&](int rank, Runtime& rt) {
    std::vector<float> d(3, 1.0f);
    Handle h = 0;
    if (rank == 0) {
      auto handle = rt.Enqueue(AllreduceOf("never", d, ReduceOp::kSum));
      RANK_CHECK(f, handle.ok(), handle.status().ToString());
      h = handle.value_or(0);
      enqueued.count_down();
    } else {
      enqueued.wait();
    }
    rt.Shutdown();
    if (rank == 0) {
      absl::Status st = rt.Wait(h);
      RANK_CHECK(f, absl::IsAborted(st), st.ToString());
    }
    RANK_CHECK(
        f, absl::IsFailedPrecondition(rt.Enqueue(AllreduceOf("late", d, ReduceOp::kSum)).status()),
        "enqueue after shutdown");
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("a shutdown's cause reaches the ops it fails on the other ranks", "[runtime]") {
  Failures f;
  std::latch enqueued(1);  // rank 2 shuts down (for everyone) only after rank 0's enqueue
  auto errs = RunRanks(3, [&](int rank, Runtime& rt) {
    std::vector<float> d(3, 1.0f);
    if (rank == 0) {
      auto handle = rt.Enqueue(AllreduceOf("never", d, ReduceOp::kSum));
      RANK_CHECK(f, handle.ok(), handle.status().ToString());
      enqueued.count_down();
      const absl::Status st = rt.Wait(handle.value_or(0));
      RANK_CHECK(f, absl::IsAborted(st), st.ToString());
      // "... by rank 2 on <host> (ValueError: bad batch) before this op completed (...)"
      RANK_CHECK(f,
                 absl::StartsWith(st.message(), "chorus was shut down by rank 2 on ") &&
                     absl::StrContains(st.message(),
                                       " (ValueError: bad batch) before this op completed ("),
                 st.ToString());
    } else if (rank == 2) {
      enqueued.wait();
      rt.Shutdown("chorus was shut down", "ValueError: bad batch");
    }
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("grouped allreduce completes as one unit", "[runtime]") {
  const int n = 3;
  Failures f;
  auto errs = RunRanks(n, [&](int rank, Runtime& rt) {
    std::vector<std::vector<float>> data(5);
    std::vector<OpRequest> group;
    for (int t = 0; t < 5; ++t) {
      data[t].assign(10 + t, static_cast<float>(rank + t));
      group.push_back(AllreduceOf(absl::StrCat("grp", t), data[t], ReduceOp::kSum));
    }
    auto hs = rt.EnqueueGroup(group);
    RANK_CHECK(f, hs.ok(), hs.status().ToString());
    for (Handle h : *hs) RANK_CHECK(f, rt.Wait(h).ok(), "wait");
    for (int t = 0; t < 5; ++t) RANK_CHECK(f, data[t][0] == 3.0f + 3 * t, data[t][0]);
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("allgather, broadcast, alltoall and reducescatter over the fabric", "[runtime]") {
  const int n = 3;
  Failures f;
  auto errs = RunRanks(n, [&](int rank, Runtime& rt) {
    // allgather: rank r contributes r + 1 rows of 2.
    std::vector<int32_t> rows(2 * (rank + 1), rank);
    OpRequest ag;
    ag.type = OpType::kAllgather;
    ag.name = "ag";
    ag.input = {rows.data(), DataType::kInt32, {rank + 1, 2}};
    auto hag = rt.Enqueue(ag);
    // broadcast from rank 2.
    std::vector<double> b(4, rank == 2 ? 42.0 : 0.0);
    OpRequest bc;
    bc.type = OpType::kBroadcast;
    bc.name = "bc";
    bc.root_rank = 2;
    bc.input = {b.data(), DataType::kFloat64, {4}};
    auto hbc = rt.Enqueue(bc);
    // alltoall: send (r + 1) rows to each rank, rows tagged by sender.
    std::vector<int64_t> a2a_data(static_cast<size_t>((rank + 1) * n), rank);
    OpRequest a2a;
    a2a.type = OpType::kAlltoall;
    a2a.name = "a2a";
    a2a.input = {a2a_data.data(), DataType::kInt64, {(rank + 1) * n}};
    a2a.splits.assign(n, rank + 1);
    auto ha2a = rt.Enqueue(a2a);
    // reducescatter: 7 rows of 1 -> rows 3, 2, 2.
    std::vector<float> rs(7, static_cast<float>(rank + 1));
    OpRequest rsq;
    rsq.type = OpType::kReducescatter;
    rsq.name = "rs";
    rsq.input = {rs.data(), DataType::kFloat32, {7}};
    auto hrs = rt.Enqueue(rsq);

    auto rag = rt.Release(*hag);
    RANK_CHECK(f, rag.ok() && rag->status.ok(), "allgather");
    RANK_CHECK(f, (rag->output_shape == std::vector<int64_t>{6, 2}), "allgather shape");
    const auto* g = reinterpret_cast<const int32_t*>(rag->output->data());
    std::vector<int32_t> expect_g = {0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2};
    RANK_CHECK(f, std::equal(expect_g.begin(), expect_g.end(), g), "allgather values");
    RANK_CHECK(f, rt.Wait(*hbc).ok() && b[3] == 42.0, b[3]);
    auto ra = rt.Release(*ha2a);
    RANK_CHECK(f, ra.ok() && ra->status.ok(), "alltoall");
    RANK_CHECK(f, (ra->received_splits == std::vector<int64_t>{1, 2, 3}), "splits");
    const auto* a = reinterpret_cast<const int64_t*>(ra->output->data());
    std::vector<int64_t> expect_a = {0, 1, 1, 2, 2, 2};
    RANK_CHECK(f, std::equal(expect_a.begin(), expect_a.end(), a), "alltoall values");
    auto rr = rt.Release(*hrs);
    RANK_CHECK(f, rr.ok() && rr->status.ok(), "reducescatter");
    RANK_CHECK(f, rr->output_shape[0] == (rank == 0 ? 3 : 2), rr->output_shape[0]);
    RANK_CHECK(f, reinterpret_cast<const float*>(rr->output->data())[0] == 6.0f, "rs value");
  });
  ExpectNoErrors(errs, f);
}

TEST_CASE("EnqueueFrom takes a refilled request each time and hands back recycled buffers",
          "[runtime]") {
  const int n = 2;
  Failures f;
  auto errs = RunRanks(n, [&](int rank, Runtime& rt) {
    OpRequest request;  // refilled for every op, as the C ABI does
    for (int step = 0; step < 6; ++step) {
      std::vector<float> data(3 + step, static_cast<float>(rank + 1 + step));
      request.type = OpType::kAllreduce;
      request.name.assign(absl::StrCat("a.long.name.that.does.not.fit.inline.", step));
      request.input.data = data.data();
      request.input.dtype = DataType::kFloat32;
      request.input.shape.assign(1, static_cast<int64_t>(data.size()));
      request.reduce_op = ReduceOp::kSum;
      auto h = rt.EnqueueFrom(request);
      RANK_CHECK(f, h.ok(), h.status().ToString());
      if (!h.ok()) return;
      absl::Status st = rt.Wait(*h);
      RANK_CHECK(f, st.ok(), st.ToString());
      RANK_CHECK(f, rt.Release(*h).ok(), "release");
      const float sum = 1 + 2 + 2.0f * step;
      for (float v : data) RANK_CHECK(f, v == sum, absl::StrCat("step ", step, ": ", v));
      // From the second op on, the entry taken was recycled: its emptied buffers come back.
      if (step >= 1) {
        RANK_CHECK(f, request.name.empty() && request.name.capacity() >= 38,
                   absl::StrCat("step ", step, ": name capacity ", request.name.capacity()));
        RANK_CHECK(f, request.input.shape.empty() && request.input.shape.capacity() >= 1,
                   absl::StrCat("step ", step, ": shape capacity"));
      }
    }
  });
  ExpectNoErrors(errs, f);
}

}  // namespace
}  // namespace chorus::runtime
