// The runtime's GPU path (runtime/gpu/) end to end with N simulated ranks over the in-process
// fabric and the fake GPU platform (test/support/fake_gpu.h): routing of GPU tensors, fused
// launches, ready events, completion off the background thread, failures and the communicator
// lifecycle. The kernels and NCCL themselves are tested on a GPU (test/gpu/).
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
#include "test/support/in_process_fabric.h"
#include "test/support/rank_failures.h"

namespace chorus::runtime {
namespace {

using testing::FakeGpuCluster;
using testing::FakeGpuPlatform;

// Thread-safe record of failed checks in rank threads (Catch2 is not thread-safe).
using testing::Failures;

struct GpuRank {
  int rank = 0;
  Runtime* runtime = nullptr;
  FakeGpuPlatform* gpu = nullptr;
  FakeGpuCluster* cluster = nullptr;
};
using GpuRankFn = std::function<void(GpuRank&)>;

// Runs `fn` on `n` simulated ranks, each with its runtime and fake GPU platform (rank r uses
// `devices_per_rank` devices, runs on simulated host hosts[r], default all on one); `after` runs
// on each rank after its runtime shut down.
void RunGpuRanks(int n, const GpuRankFn& fn, Failures& f,
                 Config config = testing::FastCycleConfig(), int devices_per_rank = 1,
                 const GpuRankFn& after = nullptr, std::vector<int> hosts = {}) {
  testing::InProcessFabric fabric(n, std::move(hosts));
  FakeGpuCluster cluster;
  std::vector<std::shared_ptr<FakeGpuPlatform>> gpus;
  for (int r = 0; r < n; ++r) {
    gpus.push_back(std::make_shared<FakeGpuPlatform>(cluster, devices_per_rank));
  }
  std::barrier done(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto rt = Runtime::Create(config, fabric.CreateController(r), {}, gpus[r]);
      f.Check(rt.ok(), absl::StrCat("rank ", r, " start: ", rt.status().ToString()));
      if (!rt.ok()) {
        done.arrive_and_drop();
        return;
      }
      GpuRank me{r, rt->get(), gpus[r].get(), &cluster};
      fn(me);
      done.arrive_and_wait();
      (*rt)->Shutdown();
      rt->reset();
      if (after) after(me);
    });
  }
  for (std::thread& t : threads) t.join();
}

// A tensor in fake device memory holding `values`; freed with the platform.
template <typename T>
TensorView DeviceTensor(FakeGpuPlatform& gpu, const std::vector<T>& values,
                        std::vector<int64_t> shape, DataType dtype, int device = 0) {
  void* p = *gpu.Allocate(device, static_cast<int64_t>(values.size() * sizeof(T)));
  if (!values.empty()) std::memcpy(p, values.data(), values.size() * sizeof(T));
  return TensorView{p, dtype, std::move(shape), device};
}

template <typename T>
std::vector<T> Read(const void* p, size_t n) {
  std::vector<T> out(n);
  if (n > 0) std::memcpy(out.data(), p, n * sizeof(T));
  return out;
}

OpRequest Op(OpType type, const std::string& name, TensorView input) {
  OpRequest r;
  r.type = type;
  r.name = name;
  r.input = std::move(input);
  return r;
}

TEST_CASE("GPU allreduce of a fused group: one copy-in, one collective, one copy-out",
          "[runtime][gpu]") {
  const int n = GENERATE(2, 3);
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                               ReduceOp::kProduct);
  Failures f;
  RunGpuRanks(
      n,
      [&](GpuRank& me) {
        // Five tensors of different sizes (one empty), value (rank + 1) * (t + 1) + i.
        const std::vector<int64_t> sizes = {3, 0, 1000, 17, 64};
        std::vector<OpRequest> group;
        for (size_t t = 0; t < sizes.size(); ++t) {
          std::vector<float> v(sizes[t]);
          for (int64_t i = 0; i < sizes[t]; ++i) v[i] = (me.rank + 1.0f) * (t + 1.0f) + i % 5;
          OpRequest r = Op(OpType::kAllreduce, absl::StrCat("g", t),
                           DeviceTensor(*me.gpu, v, {sizes[t]}, DataType::kFloat32));
          r.reduce_op = op;
          r.prescale_factor = 2.0;
          r.postscale_factor = 0.5;
          group.push_back(r);
        }
        const FakeGpuPlatform::Counters before = me.gpu->counters();
        auto handles = me.runtime->EnqueueGroup(group);
        f.Check(handles.ok(), handles.status().ToString());
        if (!handles.ok()) return;
        for (Handle h : *handles) f.Check(me.runtime->Wait(h).ok(), "wait");
        const FakeGpuPlatform::Counters after = me.gpu->counters();
        f.Check(after.collectives - before.collectives == 1,
                absl::StrCat("collectives: ", after.collectives - before.collectives));
        f.Check(after.copy_launches - before.copy_launches == 2,
                absl::StrCat("copy launches: ", after.copy_launches - before.copy_launches));
        for (size_t t = 0; t < sizes.size(); ++t) {
          const std::vector<float> got = Read<float>(group[t].input.data, sizes[t]);
          for (int64_t i = 0; i < sizes[t]; ++i) {
            // Every rank's prescaled value 2 * ((r + 1)(t + 1) + i % 5), reduced, then halved.
            double want = 0;
            for (int r = 0; r < n; ++r) {
              const double x = 2.0 * ((r + 1.0) * (t + 1.0) + i % 5);
              if (r == 0)
                want = x;
              else if (op == ReduceOp::kSum || op == ReduceOp::kAverage)
                want += x;
              else if (op == ReduceOp::kMin)
                want = std::min(want, x);
              else if (op == ReduceOp::kMax)
                want = std::max(want, x);
              else
                want *= x;
            }
            want *= 0.5;
            if (op == ReduceOp::kAverage) want /= n;
            f.Check(std::abs(got[i] - want) <= 1e-5 * std::abs(want),
                    absl::StrCat(ReduceOpName(op), " t", t, "[", i, "]: ", got[i], " != ", want));
          }
        }
      },
      f);
  f.Report();
}

// The expected allreduce of rank r's values 2 * ((r + 1)(t + 1) + i % 5), halved (and averaged).
double Expected(ReduceOp op, int n, size_t t, int64_t i) {
  double want = 0;
  for (int r = 0; r < n; ++r) {
    const double x = 2.0 * ((r + 1.0) * (t + 1.0) + static_cast<double>(i % 5));
    if (r == 0)
      want = x;
    else if (op == ReduceOp::kSum || op == ReduceOp::kAverage)
      want += x;
    else if (op == ReduceOp::kMin)
      want = std::min(want, x);
    else if (op == ReduceOp::kMax)
      want = std::max(want, x);
    else
      want *= x;
  }
  want *= 0.5;
  if (op == ReduceOp::kAverage) want /= n;
  return want;
}

TEST_CASE("GPU hierarchical allreduce: NCCL reduce-scatter, cross allreduce, allgather",
          "[runtime][gpu][hierarchical]") {
  const std::vector<int> hosts =
      GENERATE(std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 0, 1, 1, 2, 2},
               std::vector<int>{0, 1, 0, 1});
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                               ReduceOp::kProduct);
  const int n = static_cast<int>(hosts.size());
  Config config = testing::FastCycleConfig();
  config.hierarchical_allreduce = true;
  Failures f;
  RunGpuRanks(
      n,
      [&](GpuRank& me) {
        // A fused group (packed, padded to a multiple of the local size); single tensors of 6
        // elements (splits evenly: reduced in place), 7 (padded in the fusion buffer) and 1
        // (below the local size: flat).
        const std::vector<std::vector<int64_t>> batches = {{3, 0, 1000, 17, 65}, {6}, {7}, {1}};
        const std::vector<int64_t> collectives = {3, 3, 3, 1};
        for (size_t b = 0; b < batches.size(); ++b) {
          const std::vector<int64_t>& sizes = batches[b];
          std::vector<OpRequest> group;
          for (size_t t = 0; t < sizes.size(); ++t) {
            std::vector<float> v(sizes[t]);
            for (int64_t i = 0; i < sizes[t]; ++i) v[i] = (me.rank + 1.0f) * (t + 1.0f) + i % 5;
            OpRequest r = Op(OpType::kAllreduce, absl::StrCat("b", b, ".", t),
                             DeviceTensor(*me.gpu, v, {sizes[t]}, DataType::kFloat32));
            r.reduce_op = op;
            r.prescale_factor = 2.0;
            r.postscale_factor = 0.5;
            group.push_back(r);
          }
          const FakeGpuPlatform::Counters before = me.gpu->counters();
          auto handles = me.runtime->EnqueueGroup(group);
          f.Check(handles.ok(), handles.status().ToString());
          if (!handles.ok()) return;
          for (Handle h : *handles) f.Check(me.runtime->Wait(h).ok(), "wait");
          const FakeGpuPlatform::Counters after = me.gpu->counters();
          f.Check(after.collectives - before.collectives == collectives[b],
                  absl::StrCat("batch ", b, ": ", after.collectives - before.collectives,
                               " collectives"));
          for (size_t t = 0; t < sizes.size(); ++t) {
            const std::vector<float> got = Read<float>(group[t].input.data, sizes[t]);
            for (int64_t i = 0; i < sizes[t]; ++i) {
              const double want = Expected(op, n, t, i);
              f.Check(std::abs(got[i] - want) <= 1e-5 * std::abs(want),
                      absl::StrCat(ReduceOpName(op), " batch ", b, " t", t, "[", i, "]: ", got[i],
                                   " != ", want));
            }
          }
        }
      },
      f, config, 1,
      [&](GpuRank& me) {
        // The lane's communicator over the set, and this rank's host and cross communicators.
        f.Check(me.gpu->counters().communicators_created == 3,
                absl::StrCat("communicators: ", me.gpu->counters().communicators_created));
        f.Check(me.gpu->counters().communicators_destroyed == 3, "destroyed at shutdown");
      },
      hosts);
  f.Report();
}

TEST_CASE("GPU allreduce runs flat when hierarchy is off or the hosts differ",
          "[runtime][gpu][hierarchical]") {
  struct Case {
    std::vector<int> hosts;
    bool on;
  };
  const Case c = GENERATE(Case{{0, 0, 1, 1}, false}, Case{{0, 0, 1}, true});
  Config config = testing::FastCycleConfig();
  config.hierarchical_allreduce = c.on;
  Failures f;
  const int n = static_cast<int>(c.hosts.size());
  RunGpuRanks(
      n,
      [&](GpuRank& me) {
        std::vector<float> v(1000, static_cast<float>(me.rank + 1));
        OpRequest r =
            Op(OpType::kAllreduce, "x", DeviceTensor(*me.gpu, v, {1000}, DataType::kFloat32));
        auto h = me.runtime->Enqueue(r);
        f.Check(h.ok() && me.runtime->Wait(*h).ok(), "allreduce");
        f.Check(me.gpu->counters().collectives == 1, "one collective");
        f.Check(Read<float>(r.input.data, 1)[0] == n * (n + 1) / 2.0f, "sum");
      },
      f, config, 1,
      [&](GpuRank& me) {
        f.Check(me.gpu->counters().communicators_created == 1, "one communicator");
      },
      c.hosts);
  f.Report();
}

TEST_CASE("GPU allreduce of one tensor runs in place with no fusion copy", "[runtime][gpu]") {
  Failures f;
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        std::vector<int64_t> v = {me.rank + 1, 10 * (me.rank + 1), -7};
        OpRequest r =
            Op(OpType::kAllreduce, "one", DeviceTensor(*me.gpu, v, {3}, DataType::kInt64));
        // A separate output tensor on the same device.
        r.output = DeviceTensor(*me.gpu, std::vector<int64_t>(3, 0), {3}, DataType::kInt64);
        auto h = me.runtime->Enqueue(r);
        f.Check(h.ok() && me.runtime->Wait(*h).ok(), "allreduce");
        f.Check(me.gpu->counters().copy_launches == 0, "no copy for one unscaled tensor");
        f.Check(Read<int64_t>(r.output.data, 3) == std::vector<int64_t>({3, 30, -14}), "sum");
        f.Check(Read<int64_t>(r.input.data, 3) == v, "input untouched");
      },
      f);
  f.Report();
}

TEST_CASE("GPU batches complete through the device's host callback, or by polling without one",
          "[runtime][gpu]") {
  const bool callbacks = GENERATE(true, false);
  Failures f;
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        if (!callbacks) me.gpu->DisableHostCallbacks();
        for (int step = 0; step < 20; ++step) {
          std::vector<float> v(8, static_cast<float>(me.rank + step));
          OpRequest r = Op(OpType::kAllreduce, absl::StrCat("wake.", step % 3),
                           DeviceTensor(*me.gpu, v, {8}, DataType::kFloat32));
          auto h = me.runtime->Enqueue(r);
          f.Check(h.ok() && me.runtime->Wait(*h).ok(), "allreduce");
          f.Check(Read<float>(r.input.data, 8) == std::vector<float>(8, 1.0f + 2.0f * step),
                  absl::StrCat("step ", step, ": sum over the ranks"));
        }
        const int64_t queued = me.gpu->counters().host_callbacks;
        f.Check(callbacks ? queued >= 20 : queued == 0,
                absl::StrCat(queued, " host callbacks queued for 20 batches"));
      },
      f);
  f.Report();
}

TEST_CASE("GPU allgather, broadcast, alltoall and reducescatter give device outputs",
          "[runtime][gpu]") {
  const int n = GENERATE(2, 3);
  Failures f;
  RunGpuRanks(
      n,
      [&](GpuRank& me) {
        const int r = me.rank;
        // allgather: rank r contributes r + 1 rows of 2 int32; two tensors fused as a group.
        std::vector<OpRequest> gathers;
        for (int t = 0; t < 2; ++t) {
          std::vector<int32_t> v;
          for (int row = 0; row <= r; ++row) v.insert(v.end(), {100 * t + 10 * r + row, -r});
          gathers.push_back(Op(OpType::kAllgather, absl::StrCat("ag", t),
                               DeviceTensor(*me.gpu, v, {r + 1, 2}, DataType::kInt32)));
        }
        auto hg = me.runtime->EnqueueGroup(gathers);
        // broadcast from rank 1 (in place).
        std::vector<double> b = {r * 1.5, r * 2.5};
        OpRequest bc =
            Op(OpType::kBroadcast, "bc", DeviceTensor(*me.gpu, b, {2}, DataType::kFloat64));
        bc.root_rank = 1;
        auto hb = me.runtime->Enqueue(bc);
        // alltoall: rank r sends j + 1 rows (of one uint8 each) to rank j, valued 10 * r + j.
        std::vector<uint8_t> a;
        std::vector<int64_t> splits;
        for (int j = 0; j < n; ++j) {
          splits.push_back(j + 1);
          for (int k = 0; k <= j; ++k) a.push_back(static_cast<uint8_t>(10 * r + j));
        }
        OpRequest at =
            Op(OpType::kAlltoall, "a2a",
               DeviceTensor(*me.gpu, a, {static_cast<int64_t>(a.size())}, DataType::kUint8));
        at.splits = splits;
        auto ha = me.runtime->Enqueue(at);
        // reducescatter of 2n + 1 rows of one float, average with prescale 3.
        std::vector<float> s(2 * n + 1);
        for (int i = 0; i < 2 * n + 1; ++i) s[i] = static_cast<float>(i + r);
        OpRequest rs = Op(OpType::kReducescatter, "rs",
                          DeviceTensor(*me.gpu, s, {2 * n + 1}, DataType::kFloat32));
        rs.reduce_op = ReduceOp::kAverage;
        rs.prescale_factor = 3.0;
        auto hr = me.runtime->Enqueue(rs);

        f.Check(hg.ok() && hb.ok() && ha.ok() && hr.ok(), "enqueue");
        if (!(hg.ok() && hb.ok() && ha.ok() && hr.ok())) return;
        for (int t = 0; t < 2; ++t) {
          auto res = me.runtime->Release((*hg)[t]);
          f.Check(res.ok() && res->status.ok(), "allgather");
          if (!res.ok() || !res->status.ok()) continue;
          const int64_t rows = n * (n + 1) / 2;
          f.Check(res->output_shape == std::vector<int64_t>({rows, 2}), "allgather shape");
          f.Check(
              res->output->device() == 0 && me.gpu->IsDeviceMemory(res->output->data(), rows * 8),
              "allgather output on the device");
          std::vector<int32_t> want;
          for (int q = 0; q < n; ++q) {
            for (int row = 0; row <= q; ++row)
              want.insert(want.end(), {100 * t + 10 * q + row, -q});
          }
          f.Check(Read<int32_t>(res->output->data(), want.size()) == want, "allgather values");
        }
        f.Check(me.runtime->Wait(*hb).ok(), "broadcast");
        f.Check(Read<double>(bc.input.data, 2) == std::vector<double>({1.5, 2.5}),
                "broadcast values");
        auto ra = me.runtime->Release(*ha);
        f.Check(ra.ok() && ra->status.ok(), "alltoall");
        if (ra.ok() && ra->status.ok()) {
          f.Check(ra->received_splits == std::vector<int64_t>(n, r + 1), "received splits");
          std::vector<uint8_t> want;
          for (int q = 0; q < n; ++q) {
            for (int k = 0; k <= r; ++k) want.push_back(static_cast<uint8_t>(10 * q + r));
          }
          f.Check(Read<uint8_t>(ra->output->data(), want.size()) == want, "alltoall values");
        }
        auto rr = me.runtime->Release(*hr);
        f.Check(rr.ok() && rr->status.ok(), "reducescatter");
        if (rr.ok() && rr->status.ok()) {
          // Rows split as evenly as possible, the first ranks taking one more.
          const int64_t rows = (2 * n + 1) / n + (r < (2 * n + 1) % n ? 1 : 0);
          int64_t first = 0;
          for (int q = 0; q < r; ++q) first += (2 * n + 1) / n + (q < (2 * n + 1) % n ? 1 : 0);
          f.Check(rr->output_shape == std::vector<int64_t>({rows}), "reducescatter shape");
          const std::vector<float> got = Read<float>(rr->output->data(), rows);
          for (int64_t i = 0; i < rows; ++i) {
            // mean over q of 3 * (first + i + q)
            const double want = 3.0 * (first + i + (n - 1) / 2.0);
            f.Check(std::abs(got[i] - want) < 1e-5,
                    absl::StrCat("rs[", i, "] ", got[i], " ", want));
          }
        }
      },
      f);
  f.Report();
}

TEST_CASE("a GPU allreduce with a wire dtype reduces in float16 or bfloat16 inside the copies",
          "[runtime][gpu]") {
  const int n = GENERATE(2, 3);
  const DataType wire = GENERATE(DataType::kFloat16, DataType::kBfloat16);
  const int tensors = GENERATE(1, 3);
  Failures f;
  RunGpuRanks(
      n,
      [&](GpuRank& me) {
        // 1 + 2^-12 is not a float16 (nor bfloat16) value: it rounds to 1 on the way in.
        const float odd = 1.0f + 1.0f / 4096;
        std::vector<OpRequest> ops;
        for (int t = 0; t < tensors; ++t) {
          std::vector<float> v = {odd, (me.rank + 1.0f) * 0.5f, 8.0f * (t + 1)};
          OpRequest r = Op(OpType::kAllreduce, absl::StrCat("w", t),
                           DeviceTensor(*me.gpu, v, {3}, DataType::kFloat32));
          r.reduce_op = ReduceOp::kAverage;
          r.prescale_factor = 2.0;
          r.wire_dtype = wire;
          ops.push_back(r);
        }
        auto hs = me.runtime->EnqueueGroup(ops);
        f.Check(hs.ok(), hs.status().ToString());
        if (!hs.ok()) return;
        for (Handle h : *hs) f.Check(me.runtime->Wait(h).ok(), "wait");
        const FakeGpuPlatform::Counters c = me.gpu->counters();
        f.Check(c.copy_launches == 2 && c.collectives == 1,
                absl::StrCat("launches ", c.copy_launches, ", collectives ", c.collectives));
        // Three 2-byte elements per tensor, each slot 16-byte aligned: the reduction ran in `wire`.
        f.Check(c.allreduce_bytes == (tensors - 1) * 16 + 6,
                absl::StrCat("allreduce bytes ", c.allreduce_bytes));
        double sum = 0;
        for (int r = 0; r < n; ++r) sum += (r + 1.0) * 0.5 * 2;
        for (int t = 0; t < tensors; ++t) {
          const std::vector<float> got = Read<float>(ops[t].input.data, 3);
          // The mean of 2 * value over the ranks: exact in the wire dtype for these values.
          f.Check(got[0] == 2.0f, absl::StrCat("rounded on the way in: ", got[0]));
          f.Check(got[1] == static_cast<float>(sum / n), absl::StrCat("mean ", got[1]));
          f.Check(got[2] == 16.0f * (t + 1), absl::StrCat("t", t, " ", got[2]));
        }
      },
      f);
  f.Report();
}

TEST_CASE("a wire dtype outside float32 GPU allreduces is refused, and ranks must agree",
          "[runtime][gpu]") {
  Failures f;
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        std::vector<float> host = {1};
        OpRequest cpu =
            Op(OpType::kAllreduce, "cpu", TensorView{host.data(), DataType::kFloat32, {1}});
        cpu.wire_dtype = DataType::kFloat16;
        auto h = me.runtime->Enqueue(cpu);
        f.Check(absl::IsInvalidArgument(h.status()) &&
                    absl::StrContains(h.status().message(), "wire dtype"),
                h.status().ToString());
        std::vector<double> d = {1};
        OpRequest f64 =
            Op(OpType::kAllreduce, "f64", DeviceTensor(*me.gpu, d, {1}, DataType::kFloat64));
        f64.wire_dtype = DataType::kFloat16;
        f.Check(absl::IsInvalidArgument(me.runtime->Enqueue(f64).status()), "float64 refused");
        // Rank 1 reduces in bfloat16, rank 0 in float16: an error on both.
        std::vector<float> v = {1};
        OpRequest mixed =
            Op(OpType::kAllreduce, "mixed", DeviceTensor(*me.gpu, v, {1}, DataType::kFloat32));
        mixed.wire_dtype = me.rank == 0 ? DataType::kFloat16 : DataType::kBfloat16;
        auto hm = me.runtime->Enqueue(mixed);
        absl::Status s = hm.ok() ? me.runtime->Wait(*hm) : hm.status();
        f.Check(
            absl::IsInvalidArgument(s) && absl::StrContains(s.message(), "mismatched wire dtype"),
            s.ToString());
      },
      f);
  f.Report();
}

TEST_CASE("GPU ops read their inputs only after the framework's stream produced them",
          "[runtime][gpu]") {
  Failures f;
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        // The framework's stream writes the input only when the test lets it.
        auto framework_stream = me.gpu->CreateStream(0);
        f.Check(framework_stream.ok(), "stream");
        std::vector<float> stale = {-1, -1};
        OpRequest r =
            Op(OpType::kAllreduce, "late", DeviceTensor(*me.gpu, stale, {2}, DataType::kFloat32));
        r.stream = *framework_stream;
        std::promise<void> go;
        std::shared_future<void> ready = go.get_future().share();
        float* data = static_cast<float*>(r.input.data);
        const float value = me.rank + 1.0f;
        me.gpu->EnqueueHostWork(*framework_stream, [ready, data, value] {
          ready.wait();
          data[0] = value;
          data[1] = 2 * value;
        });
        auto h = me.runtime->Enqueue(r);
        f.Check(h.ok(), "enqueue");
        if (!h.ok()) return;
        // Let the runtime launch the collective first: it must still wait for the framework.
        while (me.gpu->counters().collectives == 0) std::this_thread::yield();
        f.Check(!*me.runtime->Poll(*h), "not done before the input exists");
        go.set_value();
        f.Check(me.runtime->Wait(*h).ok(), "wait");
        f.Check(Read<float>(data, 2) == std::vector<float>({3, 6}), "reduced the produced values");
        me.gpu->DestroyStream(0, *framework_stream);
      },
      f);
  f.Report();
}

TEST_CASE("a GPU batch waits once per framework stream, on the event recorded last",
          "[runtime][gpu]") {
  constexpr int kTensors = 6;
  Failures f;
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        // Two framework streams; tensor t comes from stream t % 2, written there only when the
        // test lets the streams go. Each submission records its tensor's ready event after the
        // write is queued, so the last event of a stream covers its earlier ones.
        std::vector<ops::gpu::StreamHandle> streams;
        for (int s = 0; s < 2; ++s) {
          auto stream = me.gpu->CreateStream(0);
          f.Check(stream.ok(), "stream");
          if (!stream.ok()) return;
          streams.push_back(*stream);
        }
        std::promise<void> go;
        std::shared_future<void> ready = go.get_future().share();
        std::vector<OpRequest> group;
        for (int t = 0; t < kTensors; ++t) {
          OpRequest r =
              Op(OpType::kAllreduce, absl::StrCat("waits.", t),
                 DeviceTensor(*me.gpu, std::vector<float>(3, -1.0f), {3}, DataType::kFloat32));
          r.stream = streams[t % 2];
          float* data = static_cast<float*>(r.input.data);
          const float value = static_cast<float>((me.rank + 1) * (t + 1));
          me.gpu->EnqueueHostWork(r.stream, [ready, data, value] {
            ready.wait();
            for (int i = 0; i < 3; ++i) data[i] = value;
          });
          group.push_back(r);
        }
        const int64_t waits_before = me.gpu->counters().stream_waits;
        auto handles = me.runtime->EnqueueGroup(group);
        f.Check(handles.ok(), handles.status().ToString());
        if (!handles.ok()) return;
        while (me.gpu->counters().collectives == 0) std::this_thread::yield();
        f.Check(!*me.runtime->Poll(handles->back()), "not done before the inputs exist");
        go.set_value();
        for (Handle h : *handles) f.Check(me.runtime->Wait(h).ok(), "wait");
        f.Check(me.gpu->counters().stream_waits - waits_before == 2,
                absl::StrCat("stream waits: ", me.gpu->counters().stream_waits - waits_before,
                             " for 2 framework streams"));
        for (int t = 0; t < kTensors; ++t) {
          // (1 + 2) * (t + 1) summed over the two ranks: the produced values, not -1.
          f.Check(Read<float>(group[t].input.data, 3) == std::vector<float>(3, 3.0f * (t + 1)),
                  absl::StrCat("tensor ", t, " reduced its produced values"));
        }
        for (ops::gpu::StreamHandle s : streams) me.gpu->DestroyStream(0, s);
      },
      f);
  f.Report();
}

TEST_CASE("a running GPU collective does not hold up CPU ops", "[runtime][gpu]") {
  Failures f;
  std::barrier checked(2);
  RunGpuRanks(
      2,
      [&](GpuRank& me) {
        if (me.rank == 0) me.cluster->HoldCollectives();
        std::vector<float> g = {1, 2};
        OpRequest gpu_op =
            Op(OpType::kAllreduce, "gpu", DeviceTensor(*me.gpu, g, {2}, DataType::kFloat32));
        auto hg = me.runtime->Enqueue(gpu_op);
        me.cluster->WaitUntilHeld(2);  // both ranks' collectives are stuck in "NCCL"
        std::vector<float> c = {me.rank + 1.0f};
        OpRequest cpu_op = Op(OpType::kAllreduce, "cpu",
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
        f.Check(Read<float>(gpu_op.input.data, 2) == std::vector<float>({2, 4}), "GPU values");
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
            Op(OpType::kAllreduce, "doomed", DeviceTensor(*me.gpu, g, {1}, DataType::kFloat32)));
        // A CPU op only this rank submits: pending when the failure comes.
        std::vector<float> c = {1};
        auto hc = me.runtime->Enqueue(Op(OpType::kAllreduce, absl::StrCat("lonely", me.rank),
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
            Op(OpType::kAllreduce, "later", TensorView{c.data(), DataType::kFloat32, {1}}));
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
            Op(OpType::kAllreduce, "stuck", DeviceTensor(*me.gpu, g, {1}, DataType::kFloat32)));
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
            Op(OpType::kAllreduce, "cpu", TensorView{c.data(), DataType::kFloat32, {1}}));
        f.Check(hc.ok() && me.runtime->Wait(*hc).ok(), "cpu op");
        f.Check(me.gpu->counters().communicators_created == 0, "no communicator for CPU work");
        for (int step = 0; step < 4; ++step) {
          std::vector<float> g = {static_cast<float>(step)};
          auto h = me.runtime->Enqueue(
              Op(OpType::kAllreduce, "g", DeviceTensor(*me.gpu, g, {1}, DataType::kFloat32)));
          f.Check(h.ok() && me.runtime->Wait(*h).ok(), "gpu op");
          // Allgather outputs are released with their result.
          std::vector<int8_t> a = {1, 2};
          auto ha = me.runtime->Enqueue(
              Op(OpType::kAllgather, "ag", DeviceTensor(*me.gpu, a, {2}, DataType::kInt8)));
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
          OpRequest r =
              Op(OpType::kAllreduce, "in_set", DeviceTensor(*me.gpu, v, {1}, DataType::kFloat32));
          r.process_set_id = id;
          auto hr = me.runtime->Enqueue(r);
          f.Check(hr.ok() && me.runtime->Wait(*hr).ok(), "set allreduce");
          f.Check(Read<float>(r.input.data, 1)[0] == 4.0f, "ranks 0 and 2 summed");
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
              Op(OpType::kAllreduce, "g", TensorView{host.data(), DataType::kFloat32, {1}, 0}));
          f.Check(absl::IsFailedPrecondition(h.status()) &&
                      absl::StrContains(h.status().message(), "allreduce of tensor 'g'") &&
                      absl::StrContains(h.status().message(), "no CUDA device visible"),
                  h.status().ToString());
          // CPU work is unaffected.
          auto hc = me.runtime->Enqueue(
              Op(OpType::kAllreduce, "c", TensorView{host.data(), DataType::kFloat32, {1}}));
          f.Check(hc.ok() && me.runtime->Wait(*hc).ok() && host[0] == 2.0f, "cpu op");
        },
        f, testing::FastCycleConfig(), /*devices_per_rank=*/0);
  }
  SECTION("a second GPU in one process, or one that does not exist") {
    RunGpuRanks(
        1,
        [&](GpuRank& me) {
          std::vector<float> v = {1};
          auto h0 = me.runtime->Enqueue(
              Op(OpType::kAllreduce, "g0", DeviceTensor(*me.gpu, v, {1}, DataType::kFloat32, 0)));
          f.Check(h0.ok() && me.runtime->Wait(*h0).ok(), "GPU 0");
          auto h1 = me.runtime->Enqueue(
              Op(OpType::kAllreduce, "g1", DeviceTensor(*me.gpu, v, {1}, DataType::kFloat32, 1)));
          f.Check(absl::IsFailedPrecondition(h1.status()) &&
                      absl::StrContains(h1.status().message(), "one GPU per process"),
                  h1.status().ToString());
          auto h5 = me.runtime->Enqueue(
              Op(OpType::kAllreduce, "g5", TensorView{v.data(), DataType::kFloat32, {1}, 5}));
          f.Check(absl::IsFailedPrecondition(h5.status()) &&
                      absl::StrContains(h5.status().message(), "GPU 5 is not visible"),
                  h5.status().ToString());
          std::vector<int16_t> s = {1};
          auto hs = me.runtime->Enqueue(
              Op(OpType::kAllreduce, "s", DeviceTensor(*me.gpu, s, {1}, DataType::kInt16)));
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
        Op(OpType::kAllreduce, "g", TensorView{host.data(), DataType::kFloat32, {1}, 0}));
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
        auto h = me.runtime->Enqueue(Op(
            OpType::kAllreduce, "x", DeviceTensor(*me.gpu, v, {1}, DataType::kFloat32, me.rank)));
        f.Check(h.ok() && me.runtime->Wait(*h).ok(), "different ordinals");
        // Rank 1 passes a CPU tensor under the same name: an error on every rank.
        std::vector<float> w = {1};
        TensorView t = me.rank == 1 ? TensorView{w.data(), DataType::kFloat32, {1}}
                                    : DeviceTensor(*me.gpu, w, {1}, DataType::kFloat32, me.rank);
        auto hm = me.runtime->Enqueue(Op(OpType::kAllreduce, "mixed", t));
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
          OpRequest r = Op(OpType::kAllreduce, absl::StrCat("j", t),
                           DeviceTensor(*me.gpu, v, {2}, DataType::kFloat32));
          r.reduce_op = ReduceOp::kMin;
          group.push_back(r);
        }
        auto hs = me.runtime->EnqueueGroup(group);
        f.Check(hs.ok(), "enqueue");
        if (!hs.ok()) return;
        for (Handle h : *hs) f.Check(me.runtime->Wait(h).ok(), "wait");
        for (int t = 0; t < 2; ++t) {
          f.Check(Read<float>(group[t].input.data, 2) == std::vector<float>({5.0f + t, -3.0f}),
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
          OpRequest op = Op(OpType::kAllreduce, absl::StrCat("grad.", i), tensors[i]);
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
          f.Check(Read<float>(tensors[i].data, 5 + i) == std::vector<float>(5 + i, want),
                  absl::StrCat(when, ": grad.", i, " is not ", want, " everywhere"));
        }
      };
      sum_all(3, "world 1");  // 1 + 2
      f.Check(gpu->counters().communicators_created == 1, "one communicator in world 1");
      (*rt)->Shutdown("chorus is suspended until its world is re-formed");
      auto refused = (*rt)->Enqueue(Op(OpType::kAllreduce, "grad.0", tensors[0]));
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
}  // namespace
}  // namespace chorus::runtime

namespace chorus::runtime {
namespace {

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
          OpRequest r = Op(OpType::kAllreduce, absl::StrCat("reg.", k), tensors.back());
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
            const std::vector<float> got = Read<float>(t.data, static_cast<size_t>(t.shape[0]));
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
          absl::StatusOr<OpSlot> slot =
              me.runtime->RegisterOp(Op(OpType::kAllreduce, absl::StrCat("reg.", k), tensors[k]));
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
