// The runtime's GPU path (runtime/gpu/) over N simulated ranks (test/support/gpu_ranks.h), as
// runtime_gpu_test.cc, for what goes wrong and what changes: CPU ops beside a stuck GPU
// collective, asynchronous NCCL errors, batches that never complete, the communicators'
// lifecycle and process sets, refused tensors, joins, re-forms in place, registered ops.
#include <barrier>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "ops/gpu_platform.h"
#include "runtime/runtime.h"
#include "test/support/fake_gpu.h"
#include "test/support/fast_cycle_config.h"
#include "test/support/gpu_ranks.h"
#include "test/support/rank_failures.h"

namespace chorus::runtime {
namespace {

using testing::DeviceTensor;
using testing::Failures;  // thread-safe record of failed checks in rank threads
using testing::FakeGpuCluster;
using testing::FakeGpuPlatform;
using testing::GpuOp;
using testing::GpuRank;
using testing::ReadBack;
using testing::RunGpuRanks;

TEST_CASE("a running GPU collective does not hold up CPU ops", "[runtime][gpu]") {
  Failures f;
  std::barrier checked(2);
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        if (me.rank == 0) me.cluster->HoldCollectives();
        std::vector<float> g = {1, 2};
        OpRequest gpu_op =
            GpuOp(OpType::kAllreduce, "gpu", DeviceTensor(*me.gpu, g, {2}, DataType::kFloat32));
        auto hg = me.runtime->Enqueue(gpu_op);
        me.cluster->WaitUntilHeld(2);  // both ranks' collectives are stuck in "NCCL"
        std::vector<float> c = {me.rank + 1.0f};
        OpRequest cpu_op = GpuOp(OpType::kAllreduce, "cpu",
                                 TensorView{c.data(), DataType::kFloat32, {1}, kCpuDevice});
        auto hc = me.runtime->Enqueue(cpu_op);
        f.Check(hg.ok() && hc.ok(), "enqueue");
        if (!hg.ok() || !hc.ok()) {
          checked.arrive_and_drop();
          return;
        }
        f.Check(me.runtime->Wait(*hc).ok() && c[0] == 3.0f, "CPU op completed meanwhile");
        f.Check(!*me.runtime->Poll(*hg), "GPU op still running");
        checked.arrive_and_wait();  // no rank's GPU op is released before both have looked
        if (me.rank == 0) me.cluster->ReleaseCollectives();
        f.Check(me.runtime->Wait(*hg).ok(), "GPU op completes once released");
        f.Check(ReadBack<float>(gpu_op.input.data, 2) == std::vector<float>({2, 4}), "GPU values");
      },
      f);
  f.Report();
}

TEST_CASE("an asynchronous NCCL error fails every pending op and aborts the communicators",
          "[runtime][gpu]") {
  Failures f;
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        if (me.rank == 0) me.cluster->HoldCollectives();
        std::vector<float> g = {1};
        auto hg = me.runtime->Enqueue(
            GpuOp(OpType::kAllreduce, "doomed", DeviceTensor(*me.gpu, g, {1}, DataType::kFloat32)));
        // A CPU op only this rank submits: pending when the failure comes.
        std::vector<float> c = {1};
        auto hc = me.runtime->Enqueue(GpuOp(OpType::kAllreduce, absl::StrCat("lonely", me.rank),
                                            TensorView{c.data(), DataType::kFloat32, {1}}));
        me.cluster->WaitUntilHeld(2);
        if (me.rank == 0) me.cluster->InjectAsyncError("unhandled system error (fake)");
        f.Check(hg.ok() && hc.ok(), "enqueue");
        if (!hg.ok() || !hc.ok()) return;
        // The rank that sees the error first names it; a rank stopped by that one's failure
        // before its own poll says so. Both name the op.
        absl::Status sg = me.runtime->Wait(*hg);
        f.Check(absl::IsUnavailable(sg), sg.ToString());
        f.Check(absl::StrContains(sg.message(), "allreduce of 'doomed'") &&
                    (absl::StrContains(sg.message(),
                                       "NCCL error in allreduce of 'doomed': "
                                       "unhandled system error (fake)") ||
                     absl::StrContains(sg.message(), "GPU data plane of another rank failed")),
                sg.ToString());
        // The op failed only once the device work queued for it had run (after the abort).
        f.Check(me.gpu->counters().queued_work == 0, "device work drained before the failure");
        absl::Status sc = me.runtime->Wait(*hc);
        f.Check(absl::IsUnavailable(sc), absl::StrCat("pending CPU op: ", sc.ToString()));
        auto later = me.runtime->Enqueue(
            GpuOp(OpType::kAllreduce, "later", TensorView{c.data(), DataType::kFloat32, {1}}));
        f.Check(!later.ok(), "enqueue after the failure is refused");
        f.Check(me.gpu->counters().communicators_aborted == 1, "communicator aborted");
        if (me.rank == 0) me.cluster->ReleaseCollectives();
      },
      f);
  f.Report();
}

TEST_CASE("a GPU batch that never completes times out on every rank", "[runtime][gpu]") {
  Failures f;
  Config config = testing::FastCycleConfig();
  config.no_progress_timeout = absl::Milliseconds(300);
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        if (me.rank == 0) me.cluster->HoldCollectives();
        std::vector<float> g = {1};
        auto h = me.runtime->Enqueue(
            GpuOp(OpType::kAllreduce, "stuck", DeviceTensor(*me.gpu, g, {1}, DataType::kFloat32)));
        f.Check(h.ok(), "enqueue");
        if (!h.ok()) return;
        absl::Status s = me.runtime->Wait(*h);
        // The no-progress report, as the MPI and UCX paths give it (or the other rank's).
        const std::string report =
            absl::StrCat("rank ", me.rank, ": no progress for 300ms: the NCCL work on GPU 0",
                         " has not completed, running allreduce of 'stuck'; it waits on rank ",
                         1 - me.rank, ". ");
        f.Check(absl::IsUnavailable(s) &&
                    ((absl::StrContains(s.message(), report) &&
                      absl::StrContains(s.message(), "CHORUS_NO_PROGRESS_TIMEOUT_SECONDS")) ||
                     absl::StrContains(s.message(), "GPU data plane of another rank failed")),
                s.ToString());
        f.Check(me.gpu->counters().communicators_aborted == 1, "communicator aborted");
      },
      f, config);
  f.Report();
}

TEST_CASE("GPU communicators are created on first use, per stream, and destroyed at shutdown",
          "[runtime][gpu]") {
  const int streams = GENERATE(1, 2);
  Failures f;
  Config config = testing::FastCycleConfig();
  config.num_nccl_streams = streams;
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        std::vector<float> c = {1};
        auto hc = me.runtime->Enqueue(
            GpuOp(OpType::kAllreduce, "cpu", TensorView{c.data(), DataType::kFloat32, {1}}));
        f.Check(hc.ok() && me.runtime->Wait(*hc).ok(), "cpu op");
        f.Check(me.gpu->counters().communicators_created == 0, "no communicator for CPU work");
        for (int step = 0; step < 4; ++step) {
          std::vector<float> g = {static_cast<float>(step)};
          auto h = me.runtime->Enqueue(
              GpuOp(OpType::kAllreduce, "g", DeviceTensor(*me.gpu, g, {1}, DataType::kFloat32)));
          f.Check(h.ok() && me.runtime->Wait(*h).ok(), "gpu op");
          // Allgather outputs are released with their result.
          std::vector<int8_t> a = {1, 2};
          auto ha = me.runtime->Enqueue(
              GpuOp(OpType::kAllgather, "ag", DeviceTensor(*me.gpu, a, {2}, DataType::kInt8)));
          f.Check(ha.ok() && me.runtime->Release(*ha).ok(), "allgather");
        }
        f.Check(me.gpu->counters().communicators_created == streams,
                absl::StrCat("communicators: ", me.gpu->counters().communicators_created));
      },
      f, config, 1,
      [&](GpuRank& me) {
        const FakeGpuPlatform::Counters c = me.gpu->counters();
        f.Check(c.communicators_destroyed == streams && c.communicators_aborted == 0,
                "destroyed at shutdown");
        f.Check(c.live_streams == 0, absl::StrCat("streams left: ", c.live_streams));
        f.Check(c.live_events == 0, absl::StrCat("events left: ", c.live_events));
        // What is left: the 8 input tensors this test allocated.
        f.Check(c.live_allocations == 8, absl::StrCat("allocations left: ", c.live_allocations));
      });
  f.Report();
}

TEST_CASE("a process set's GPU communicator goes with the set", "[runtime][gpu][process_set]") {
  Failures f;
  RunGpuRanks(
      3,
      [&](GpuRank& me) {
        OpRequest add;
        add.type = OpType::kAddProcessSet;
        add.process_set_ranks = {0, 2};
        auto h = me.runtime->Enqueue(add);
        auto added = h.ok() ? me.runtime->Release(*h) : absl::StatusOr<OpResult>(h.status());
        f.Check(added.ok() && added->status.ok(), "add");
        if (!added.ok() || !added->status.ok()) return;
        const int32_t id = added->process_set_id;
        if (me.rank != 1) {
          std::vector<float> v = {me.rank + 1.0f};
          OpRequest r = GpuOp(OpType::kAllreduce, "in_set",
                              DeviceTensor(*me.gpu, v, {1}, DataType::kFloat32));
          r.process_set_id = id;
          auto hr = me.runtime->Enqueue(r);
          f.Check(hr.ok() && me.runtime->Wait(*hr).ok(), "set allreduce");
          f.Check(ReadBack<float>(r.input.data, 1)[0] == 4.0f, "ranks 0 and 2 summed");
        }
        f.Check(me.gpu->counters().communicators_created == (me.rank != 1 ? 1 : 0), "created");
        OpRequest remove;
        remove.type = OpType::kRemoveProcessSet;
        remove.process_set_id = id;
        auto hm = me.runtime->Enqueue(remove);
        f.Check(hm.ok() && me.runtime->Wait(*hm).ok(), "remove");
        f.Check(me.gpu->counters().communicators_destroyed == (me.rank != 1 ? 1 : 0),
                "destroyed with the set, before shutdown");
      },
      f);
  f.Report();
}

TEST_CASE("GPU tensors without a usable device are refused at enqueue", "[runtime][gpu]") {
  Failures f;
  SECTION("no device visible") {
    RunGpuRanks(
        2,
        [&](GpuRank& me) {
          std::vector<float> host = {1};
          auto h = me.runtime->Enqueue(
              GpuOp(OpType::kAllreduce, "g", TensorView{host.data(), DataType::kFloat32, {1}, 0}));
          f.Check(absl::IsFailedPrecondition(h.status()) &&
                      absl::StrContains(h.status().message(), "allreduce of tensor 'g'") &&
                      absl::StrContains(h.status().message(), "no CUDA device visible"),
                  h.status().ToString());
          // CPU work is unaffected.
          auto hc = me.runtime->Enqueue(
              GpuOp(OpType::kAllreduce, "c", TensorView{host.data(), DataType::kFloat32, {1}}));
          f.Check(hc.ok() && me.runtime->Wait(*hc).ok() && host[0] == 2.0f, "cpu op");
        },
        f, testing::FastCycleConfig(), /*devices_per_rank=*/0);
  }
  SECTION("a second GPU in one process, or one that does not exist") {
    RunGpuRanks(
        1,
        [&](GpuRank& me) {
          std::vector<float> v = {1};
          auto h0 = me.runtime->Enqueue(GpuOp(
              OpType::kAllreduce, "g0", DeviceTensor(*me.gpu, v, {1}, DataType::kFloat32, 0)));
          f.Check(h0.ok() && me.runtime->Wait(*h0).ok(), "GPU 0");
          auto h1 = me.runtime->Enqueue(GpuOp(
              OpType::kAllreduce, "g1", DeviceTensor(*me.gpu, v, {1}, DataType::kFloat32, 1)));
          f.Check(absl::IsFailedPrecondition(h1.status()) &&
                      absl::StrContains(h1.status().message(), "one GPU per process"),
                  h1.status().ToString());
          auto h5 = me.runtime->Enqueue(
              GpuOp(OpType::kAllreduce, "g5", TensorView{v.data(), DataType::kFloat32, {1}, 5}));
          f.Check(absl::IsFailedPrecondition(h5.status()) &&
                      absl::StrContains(h5.status().message(), "GPU 5 is not visible"),
                  h5.status().ToString());
          std::vector<int16_t> s = {1};
          auto hs = me.runtime->Enqueue(
              GpuOp(OpType::kAllreduce, "s", DeviceTensor(*me.gpu, s, {1}, DataType::kInt16)));
          f.Check(absl::IsInvalidArgument(hs.status()) &&
                      absl::StrContains(hs.status().message(), "int16"),
                  hs.status().ToString());
        },
        f, testing::FastCycleConfig(), /*devices_per_rank=*/2);
  }
  SECTION("this build's own platform") {
    testing::InProcessFabric fabric(1);
    auto rt = Runtime::Create(testing::FastCycleConfig(), fabric.CreateController(0));
    REQUIRE(rt.ok());
    std::vector<float> host = {1};
    auto h = (*rt)->Enqueue(
        GpuOp(OpType::kAllreduce, "g", TensorView{host.data(), DataType::kFloat32, {1}, 0}));
    // Built with CUDA on a machine without a GPU, or built without CUDA. (On a GPU machine
    // the op is accepted; test/gpu covers that.)
    if (!h.ok()) {
      CHECK(absl::IsFailedPrecondition(h.status()));
      CHECK((absl::StrContains(h.status().message(), "no CUDA device visible") ||
             absl::StrContains(h.status().message(), "built without CUDA")));
    } else {
      CHECK((*rt)->Wait(*h).ok());
    }
  }
  f.Report();
}

TEST_CASE("GPU ranks may use different ordinals but must agree on CPU versus GPU",
          "[runtime][gpu]") {
  Failures f;
  RunGpuRanks(
      3,
      [&](GpuRank& me) {
        std::vector<float> v = {me.rank + 1.0f};
        // Rank r drives GPU r.
        auto h = me.runtime->Enqueue(GpuOp(
            OpType::kAllreduce, "x", DeviceTensor(*me.gpu, v, {1}, DataType::kFloat32, me.rank)));
        f.Check(h.ok() && me.runtime->Wait(*h).ok(), "different ordinals");
        // Rank 1 passes a CPU tensor under the same name: an error on every rank.
        std::vector<float> w = {1};
        TensorView t = me.rank == 1 ? TensorView{w.data(), DataType::kFloat32, {1}}
                                    : DeviceTensor(*me.gpu, w, {1}, DataType::kFloat32, me.rank);
        auto hm = me.runtime->Enqueue(GpuOp(OpType::kAllreduce, "mixed", t));
        absl::Status s = hm.ok() ? me.runtime->Wait(*hm) : hm.status();
        f.Check(absl::IsInvalidArgument(s) && absl::StrContains(s.message(), "'mixed'") &&
                    absl::StrContains(s.message(), "mismatched device"),
                s.ToString());
      },
      f, testing::FastCycleConfig(), /*devices_per_rank=*/3);
  f.Report();
}

TEST_CASE("a joined rank contributes the identity to GPU allreduces", "[runtime][gpu]") {
  Failures f;
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        OpRequest join;
        join.type = OpType::kJoin;
        if (me.rank == 1) {
          auto hj = me.runtime->Enqueue(join);
          f.Check(hj.ok() && me.runtime->Wait(*hj).ok(), "join");
          return;
        }
        // Rank 0 alone: a fused pair and a single tensor; min makes the identity visible.
        std::vector<OpRequest> group;
        for (int t = 0; t < 2; ++t) {
          std::vector<float> v = {5.0f + t, -3.0f};
          OpRequest r = GpuOp(OpType::kAllreduce, absl::StrCat("j", t),
                              DeviceTensor(*me.gpu, v, {2}, DataType::kFloat32));
          r.reduce_op = ReduceOp::kMin;
          group.push_back(r);
        }
        auto hs = me.runtime->EnqueueGroup(group);
        f.Check(hs.ok(), "enqueue");
        if (!hs.ok()) return;
        for (Handle h : *hs) f.Check(me.runtime->Wait(h).ok(), "wait");
        for (int t = 0; t < 2; ++t) {
          f.Check(ReadBack<float>(group[t].input.data, 2) == std::vector<float>({5.0f + t, -3.0f}),
                  "min with the identity is the value");
        }
        auto hj = me.runtime->Enqueue(join);
        f.Check(hj.ok() && me.runtime->Wait(*hj).ok(), "join");
      },
      f);
  f.Report();
}

TEST_CASE("a runtime suspended and re-formed in place runs GPU allreduces on new communicators",
          "[runtime][gpu][reform]") {
  // Two ranks allreduce a fused group of GPU tensors, suspend (Shutdown, as chorus::Suspend
  // does), re-form in place over a new two-rank world (ranks swapped) and allreduce again: the
  // old world's communicator is destroyed with it and the new world gets its own.
  testing::InProcessFabric world1(2), world2(2);
  FakeGpuCluster cluster;
  Failures f;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto gpu = std::make_shared<FakeGpuPlatform>(cluster, 1);
      auto rt = Runtime::Create(testing::FastCycleConfig(), world1.CreateController(r), {}, gpu);
      f.Check(rt.ok(), absl::StrCat("rank ", r, " start: ", rt.status().ToString()));
      if (!rt.ok()) return;
      std::vector<TensorView> tensors;
      for (int i = 0; i < 3; ++i) {
        tensors.push_back(DeviceTensor(*gpu, std::vector<float>(5 + i, static_cast<float>(r + 1)),
                                       {5 + i}, DataType::kFloat32));
      }
      // Sums `tensors` in place; every element must become `want`.
      const auto sum_all = [&](float want, const std::string& when) {
        std::vector<Handle> handles;
        for (int i = 0; i < 3; ++i) {
          OpRequest op = GpuOp(OpType::kAllreduce, absl::StrCat("grad.", i), tensors[i]);
          op.reduce_op = ReduceOp::kSum;
          auto h = (*rt)->Enqueue(std::move(op));
          f.Check(h.ok(), absl::StrCat(when, ": enqueue: ", h.status().ToString()));
          if (h.ok()) handles.push_back(*h);
        }
        for (const Handle h : handles) {
          const absl::Status st = (*rt)->Wait(h);
          f.Check(st.ok(), absl::StrCat(when, ": ", st.ToString()));
        }
        for (int i = 0; i < 3; ++i) {
          f.Check(ReadBack<float>(tensors[i].data, 5 + i) == std::vector<float>(5 + i, want),
                  absl::StrCat(when, ": grad.", i, " is not ", want, " everywhere"));
        }
      };
      sum_all(3, "world 1");  // 1 + 2
      f.Check(gpu->counters().communicators_created == 1, "one communicator in world 1");
      (*rt)->Shutdown("chorus is suspended until its world is re-formed");
      auto refused = (*rt)->Enqueue(GpuOp(OpType::kAllreduce, "grad.0", tensors[0]));
      f.Check(absl::IsFailedPrecondition(refused.status()) &&
                  absl::StrContains(refused.status().message(), "suspended"),
              absl::StrCat("enqueue while suspended: ", refused.status().ToString()));
      const FakeGpuPlatform::Counters suspended = gpu->counters();
      f.Check(suspended.communicators_destroyed == 1 && suspended.communicators_aborted == 0,
              "the suspend destroys world 1's communicator");
      const absl::Status reformed =
          (*rt)->Reform(testing::FastCycleConfig(), world2.CreateController(1 - r));
      f.Check(reformed.ok(), absl::StrCat("reform: ", reformed.ToString()));
      if (!reformed.ok()) return;
      f.Check((*rt)->topology().rank == 1 - r, "new rank");
      sum_all(6, "world 2");  // 3 + 3
      f.Check(gpu->counters().communicators_created == 2, "a new communicator in world 2");
      (*rt)->Shutdown();
      rt->reset();
      f.Check(gpu->counters().communicators_destroyed == 2, "world 2's communicator destroyed");
    });
  }
  for (std::thread& t : threads) t.join();
  f.Report();
}

TEST_CASE("GPU registered allreduces: each keeps one ready event, recorded by each submission",
          "[runtime][gpu][registered]") {
  constexpr int kTensors = 6;
  constexpr int kSteps = 5;
  Failures f;
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        std::vector<TensorView> tensors;
        std::vector<OpSlot> slots;
        for (int k = 0; k < kTensors; ++k) {
          tensors.push_back(DeviceTensor(*me.gpu, std::vector<float>(static_cast<size_t>(5 + k)),
                                         {5 + k}, DataType::kFloat32));
          OpRequest r = GpuOp(OpType::kAllreduce, absl::StrCat("reg.", k), tensors.back());
          absl::StatusOr<OpSlot> slot = me.runtime->RegisterOp(r);
          f.Check(slot.ok(), slot.status().ToString());
          if (!slot.ok()) return;
          slots.push_back(*slot);
        }
        int64_t events = -1;
        for (int step = 0; step < kSteps; ++step) {
          for (const TensorView& t : tensors) {
            const std::vector<float> v(static_cast<size_t>(t.shape[0]),
                                       static_cast<float>((me.rank + 1) * (step + 1)));
            std::memcpy(t.data, v.data(), v.size() * sizeof(float));  // fake device memory
          }
          std::vector<Handle> handles;
          for (int k = 0; k < kTensors; ++k) {
            absl::StatusOr<Handle> h = me.runtime->Submit(slots[k], SubmitArgs{tensors[k].data});
            f.Check(h.ok(), h.status().ToString());
            if (h.ok()) handles.push_back(*h);
          }
          for (Handle h : handles) {
            absl::StatusOr<OpResult> r = me.runtime->Release(h);
            f.Check(r.ok() && r->status.ok(), "registered GPU allreduce");
          }
          for (const TensorView& t : tensors) {
            const std::vector<float> got = ReadBack<float>(t.data, static_cast<size_t>(t.shape[0]));
            f.Check(got == std::vector<float>(got.size(), 3.0f * static_cast<float>(step + 1)),
                    absl::StrCat("step ", step, ": sum of (rank + 1) * (step + 1)"));
          }
          // One event per registered op, created by its first submission and kept.
          const int64_t live = me.gpu->counters().live_events;
          if (step == 0) events = live;
          f.Check(live == events,
                  absl::StrCat("step ", step, ": ", live, " events, then ", events));
        }
        f.Check(events >= kTensors, absl::StrCat(events, " events for ", kTensors, " ops"));
        for (OpSlot s : slots) f.Check(me.runtime->UnregisterOp(s).ok(), "unregister");
        f.Check(me.gpu->counters().live_events == events - kTensors,
                "unregistering destroys the ops' events");
        // Registered again, left registered: the runtime's end destroys their events.
        for (int k = 0; k < kTensors; ++k) {
          absl::StatusOr<OpSlot> slot = me.runtime->RegisterOp(
              GpuOp(OpType::kAllreduce, absl::StrCat("reg.", k), tensors[k]));
          absl::StatusOr<Handle> h =
              slot.ok() ? me.runtime->Submit(*slot, SubmitArgs{tensors[k].data}) : slot.status();
          f.Check(h.ok() && me.runtime->Release(*h).ok(), "registered again");
        }
      },
      f, testing::FastCycleConfig(), 1,
      [&](GpuRank& me) {
        const FakeGpuPlatform::Counters c = me.gpu->counters();
        f.Check(c.live_events == 0, absl::StrCat("events left: ", c.live_events));
      });
  f.Report();
}

}  // namespace
}  // namespace chorus::runtime
