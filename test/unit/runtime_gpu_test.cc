// The runtime's GPU path (runtime/gpu/) end to end with N simulated ranks over the in-process
// fabric and the fake GPU platform (test/support/gpu_ranks.h): routing of GPU tensors, fused
// launches, hierarchical allreduce, the other collectives, wire dtypes, ready events. Failures,
// the communicators' lifecycle, joins, re-forms and registered ops:
// runtime_gpu_failures_test.cc. The kernels and NCCL themselves are tested on a GPU (test/gpu/).
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
          OpRequest r = GpuOp(OpType::kAllreduce, absl::StrCat("g", t),
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
          const std::vector<float> got = ReadBack<float>(group[t].input.data, sizes[t]);
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
            OpRequest r = GpuOp(OpType::kAllreduce, absl::StrCat("b", b, ".", t),
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
            const std::vector<float> got = ReadBack<float>(group[t].input.data, sizes[t]);
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
            GpuOp(OpType::kAllreduce, "x", DeviceTensor(*me.gpu, v, {1000}, DataType::kFloat32));
        auto h = me.runtime->Enqueue(r);
        f.Check(h.ok() && me.runtime->Wait(*h).ok(), "allreduce");
        f.Check(me.gpu->counters().collectives == 1, "one collective");
        f.Check(ReadBack<float>(r.input.data, 1)[0] == n * (n + 1) / 2.0f, "sum");
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
            GpuOp(OpType::kAllreduce, "one", DeviceTensor(*me.gpu, v, {3}, DataType::kInt64));
        // A separate output tensor on the same device.
        r.output = DeviceTensor(*me.gpu, std::vector<int64_t>(3, 0), {3}, DataType::kInt64);
        auto h = me.runtime->Enqueue(r);
        f.Check(h.ok() && me.runtime->Wait(*h).ok(), "allreduce");
        f.Check(me.gpu->counters().copy_launches == 0, "no copy for one unscaled tensor");
        f.Check(ReadBack<int64_t>(r.output.data, 3) == std::vector<int64_t>({3, 30, -14}), "sum");
        f.Check(ReadBack<int64_t>(r.input.data, 3) == v, "input untouched");
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
          OpRequest r = GpuOp(OpType::kAllreduce, absl::StrCat("wake.", step % 3),
                              DeviceTensor(*me.gpu, v, {8}, DataType::kFloat32));
          auto h = me.runtime->Enqueue(r);
          f.Check(h.ok() && me.runtime->Wait(*h).ok(), "allreduce");
          f.Check(ReadBack<float>(r.input.data, 8) == std::vector<float>(8, 1.0f + 2.0f * step),
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
          gathers.push_back(GpuOp(OpType::kAllgather, absl::StrCat("ag", t),
                                  DeviceTensor(*me.gpu, v, {r + 1, 2}, DataType::kInt32)));
        }
        auto hg = me.runtime->EnqueueGroup(gathers);
        // broadcast from rank 1 (in place).
        std::vector<double> b = {r * 1.5, r * 2.5};
        OpRequest bc =
            GpuOp(OpType::kBroadcast, "bc", DeviceTensor(*me.gpu, b, {2}, DataType::kFloat64));
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
            GpuOp(OpType::kAlltoall, "a2a",
                  DeviceTensor(*me.gpu, a, {static_cast<int64_t>(a.size())}, DataType::kUint8));
        at.splits = splits;
        auto ha = me.runtime->Enqueue(at);
        // reducescatter of 2n + 1 rows of one float, average with prescale 3.
        std::vector<float> s(2 * n + 1);
        for (int i = 0; i < 2 * n + 1; ++i) s[i] = static_cast<float>(i + r);
        OpRequest rs = GpuOp(OpType::kReducescatter, "rs",
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
          f.Check(ReadBack<int32_t>(res->output->data(), want.size()) == want, "allgather values");
        }
        f.Check(me.runtime->Wait(*hb).ok(), "broadcast");
        f.Check(ReadBack<double>(bc.input.data, 2) == std::vector<double>({1.5, 2.5}),
                "broadcast values");
        auto ra = me.runtime->Release(*ha);
        f.Check(ra.ok() && ra->status.ok(), "alltoall");
        if (ra.ok() && ra->status.ok()) {
          f.Check(ra->received_splits == std::vector<int64_t>(n, r + 1), "received splits");
          std::vector<uint8_t> want;
          for (int q = 0; q < n; ++q) {
            for (int k = 0; k <= r; ++k) want.push_back(static_cast<uint8_t>(10 * q + r));
          }
          f.Check(ReadBack<uint8_t>(ra->output->data(), want.size()) == want, "alltoall values");
        }
        auto rr = me.runtime->Release(*hr);
        f.Check(rr.ok() && rr->status.ok(), "reducescatter");
        if (rr.ok() && rr->status.ok()) {
          // Rows split as evenly as possible, the first ranks taking one more.
          const int64_t rows = (2 * n + 1) / n + (r < (2 * n + 1) % n ? 1 : 0);
          int64_t first = 0;
          for (int q = 0; q < r; ++q) first += (2 * n + 1) / n + (q < (2 * n + 1) % n ? 1 : 0);
          f.Check(rr->output_shape == std::vector<int64_t>({rows}), "reducescatter shape");
          const std::vector<float> got = ReadBack<float>(rr->output->data(), rows);
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
          OpRequest r = GpuOp(OpType::kAllreduce, absl::StrCat("w", t),
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
          const std::vector<float> got = ReadBack<float>(ops[t].input.data, 3);
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
            GpuOp(OpType::kAllreduce, "cpu", TensorView{host.data(), DataType::kFloat32, {1}});
        cpu.wire_dtype = DataType::kFloat16;
        auto h = me.runtime->Enqueue(cpu);
        f.Check(absl::IsInvalidArgument(h.status()) &&
                    absl::StrContains(h.status().message(), "wire dtype"),
                h.status().ToString());
        std::vector<double> d = {1};
        OpRequest f64 =
            GpuOp(OpType::kAllreduce, "f64", DeviceTensor(*me.gpu, d, {1}, DataType::kFloat64));
        f64.wire_dtype = DataType::kFloat16;
        f.Check(absl::IsInvalidArgument(me.runtime->Enqueue(f64).status()), "float64 refused");
        // Rank 1 reduces in bfloat16, rank 0 in float16: an error on both.
        std::vector<float> v = {1};
        OpRequest mixed =
            GpuOp(OpType::kAllreduce, "mixed", DeviceTensor(*me.gpu, v, {1}, DataType::kFloat32));
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
        OpRequest r = GpuOp(OpType::kAllreduce, "late",
                            DeviceTensor(*me.gpu, stale, {2}, DataType::kFloat32));
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
        f.Check(ReadBack<float>(data, 2) == std::vector<float>({3, 6}),
                "reduced the produced values");
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
              GpuOp(OpType::kAllreduce, absl::StrCat("waits.", t),
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
          f.Check(ReadBack<float>(group[t].input.data, 3) == std::vector<float>(3, 3.0f * (t + 1)),
                  absl::StrCat("tensor ", t, " reduced its produced values"));
        }
        for (ops::gpu::StreamHandle s : streams) me.gpu->DestroyStream(0, s);
      },
      f);
  f.Report();
}

}  // namespace
}  // namespace chorus::runtime
