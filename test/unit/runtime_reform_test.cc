// Runtime::Reform (runtime/runtime.h, Note [Re-forming in place]): simulated ranks as threads
// over in-process fabrics, one fabric per world. A rank that re-forms keeps its Runtime object
// and moves to the next world's fabric.
#include <atomic>
#include <latch>
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
#include "test/support/rank_failures.h"

namespace chorus::runtime {
namespace {

// Stalled ops fail (DeadlineExceeded) instead of waiting for ever: ranks that disagree on a
// name after a reform end the test with an error, not a hang.
Config ReformConfig() {
  Config c = testing::FastCycleConfig();
  c.stall_shutdown_time = absl::Seconds(10);
  return c;
}

using testing::Failures;

OpRequest SumOf(const std::string& name, std::vector<float>& data) {
  OpRequest r;
  r.type = OpType::kAllreduce;
  r.name = name;
  r.input = {data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}};
  r.reduce_op = ReduceOp::kSum;
  return r;
}

OpRequest UnnamedBarrier() {
  OpRequest r;
  r.type = OpType::kBarrier;
  return r;
}

// Allreduces `value` (4 floats) under `name`; the sum, or -1 on an error (recorded).
float Sum(Runtime& rt, Failures& f, int who, const std::string& name, float value) {
  std::vector<float> data(4, value);
  absl::StatusOr<Handle> h = rt.Enqueue(SumOf(name, data));
  f.Check(h.ok(), who, absl::StrCat(name, ": ", h.status().ToString()));
  if (!h.ok()) return -1;
  absl::Status done = rt.Wait(*h);
  f.Check(done.ok(), who, absl::StrCat(name, ": ", done.ToString()));
  return done.ok() ? data[0] : -1;
}

void Barrier(Runtime& rt, Failures& f, int who) {
  absl::StatusOr<Handle> h = rt.Enqueue(UnnamedBarrier());
  f.Check(h.ok() && rt.Wait(*h).ok(), who, "unnamed barrier failed");
}

TEST_CASE("a runtime re-formed after a lost rank keeps its handles and runs in the new world",
          "[runtime][reform]") {
  // World 1: ranks 0, 1, 2 with process set 1 = {0, 2}. Rank 1 is lost while ranks 0 and 2
  // wait on an allreduce; they re-form as ranks 0 and 1 of world 2.
  testing::InProcessFabric world1(3);
  testing::InProcessFabric world2(2);
  Failures f;
  std::latch submitted(3);  // ranks 0 and 2 have queued "lost"; rank 1 is ready to die
  std::latch finished(2);   // the survivors are done with world 2
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Runtime>> created =
          Runtime::Create(ReformConfig(), world1.CreateController(r), {{0, 2}});
      f.Check(created.ok(), r, created.status().ToString());
      if (!created.ok()) {
        submitted.count_down();
        if (r != 1) finished.count_down();
        return;
      }
      Runtime& rt = **created;
      f.Check(Sum(rt, f, r, "before", r + 1) == 6, r, "sum over world 1 is not 6");
      Barrier(rt, f, r);  // auto-named "__barrier.0.0" in world 1
      if (r == 1) {
        submitted.arrive_and_wait();
        world1.Kill(1);
        return;  // the runtime goes with the thread, as with a dead process
      }
      std::vector<float> lost_data(4, 1.0f);
      absl::StatusOr<Handle> lost = rt.Enqueue(SumOf("lost", lost_data));
      f.Check(lost.ok(), r, lost.status().ToString());
      submitted.arrive_and_wait();
      if (!lost.ok()) {
        finished.count_down();
        return;
      }
      const absl::Status failed = rt.Wait(*lost);
      f.Check(!failed.ok(), r, "the op pending when rank 1 died completed");

      const int new_rank = r == 0 ? 0 : 1;
      const absl::Status reformed = rt.Reform(ReformConfig(), world2.CreateController(new_rank));
      f.Check(reformed.ok(), r, reformed.ToString());
      const Topology t = rt.topology();
      f.Check(t.rank == new_rank && t.size == 2, r,
              absl::StrCat("topology after reform: rank ", t.rank, " of ", t.size));
      // The failed op's handle outlives the reform and carries its error.
      absl::StatusOr<OpResult> released = rt.Release(*lost);
      f.Check(released.ok() && !released->status.ok(), r,
              "the handle of the failed op was not released with its error");
      // Process sets other than the global one are gone.
      std::vector<float> in_set(4, 1.0f);
      OpRequest set_op = SumOf("in_set", in_set);
      set_op.process_set_id = 1;
      absl::StatusOr<Handle> refused = rt.Enqueue(set_op);
      f.Check(!refused.ok() && absl::StrContains(refused.status().message(), "does not exist"), r,
              absl::StrCat("process set 1 after reform: ", refused.status().ToString()));
      // The new world computes, names free again ("lost" completed) and auto-names restarted.
      f.Check(Sum(rt, f, r, "lost", new_rank + 1) == 3, r, "sum over world 2 is not 3");
      Barrier(rt, f, r);
      finished.arrive_and_wait();
      rt.Shutdown();
    });
  }
  for (std::thread& t : threads) t.join();
  f.Report();
}

TEST_CASE("re-forming a healthy world in place lets a new runtime join it", "[runtime][reform]") {
  // World 1: ranks 0 and 1, which issue unnamed barriers (their counters move on). World 2:
  // they re-form as ranks 0 and 1, and a new runtime (counters at zero) joins as rank 2.
  testing::InProcessFabric world1(2);
  testing::InProcessFabric world2(3);
  Failures f;
  std::latch finished(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Runtime> rt;
      if (r < 2) {
        absl::StatusOr<std::unique_ptr<Runtime>> created =
            Runtime::Create(ReformConfig(), world1.CreateController(r));
        f.Check(created.ok(), r, created.status().ToString());
        if (created.ok()) rt = *std::move(created);
        if (rt != nullptr) {
          f.Check(Sum(*rt, f, r, "x", r + 1) == 3, r, "sum over world 1 is not 3");
          Barrier(*rt, f, r);
          Barrier(*rt, f, r);
          // Collective over world 1 (its loop stops on both ranks), then over world 2. Another
          // thread reads the world's description meanwhile: it sees world 1 or world 2.
          std::atomic<bool> reforming{true};
          std::thread reader([&] {
            while (reforming.load()) {
              const Topology seen = rt->topology();
              f.Check(seen.rank == r && (seen.size == 2 || seen.size == 3), r,
                      absl::StrCat("read during reform: rank ", seen.rank, " of ", seen.size));
            }
          });
          const absl::Status reformed = rt->Reform(ReformConfig(), world2.CreateController(r));
          reforming.store(false);
          reader.join();
          f.Check(reformed.ok(), r, reformed.ToString());
        }
      } else {
        absl::StatusOr<std::unique_ptr<Runtime>> created =
            Runtime::Create(ReformConfig(), world2.CreateController(2));
        f.Check(created.ok(), r, created.status().ToString());
        if (created.ok()) rt = *std::move(created);
      }
      if (rt == nullptr) {
        finished.count_down();
        return;
      }
      const Topology t = rt->topology();
      f.Check(t.rank == r && t.size == 3, r,
              absl::StrCat("topology in world 2: rank ", t.rank, " of ", t.size));
      Barrier(*rt, f, r);  // "__barrier.0.0" on the survivors and the new runtime alike
      f.Check(Sum(*rt, f, r, "x", r + 1) == 6, r, "sum over world 2 is not 6");
      finished.arrive_and_wait();
      rt->Shutdown();
    });
  }
  for (std::thread& t : threads) t.join();
  f.Report();
}

}  // namespace
}  // namespace chorus::runtime
