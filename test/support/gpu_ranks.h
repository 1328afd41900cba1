// File: test/support/gpu_ranks.h
//
// N simulated ranks as threads, each with its Runtime over one in-process fabric and its fake
// GPU platform (test/support/fake_gpu.h): the unit tier's way of running the runtime's GPU path
// (test/unit/runtime_gpu_test.cc, runtime_gpu_failures_test.cc).
#ifndef CHORUS_TEST_SUPPORT_GPU_RANKS_H_
#define CHORUS_TEST_SUPPORT_GPU_RANKS_H_

#include <barrier>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

#include "chorus/chorus.h"
#include "runtime/config.h"
#include "runtime/runtime.h"
#include "test/support/fake_gpu.h"
#include "test/support/fast_cycle_config.h"
#include "test/support/in_process_fabric.h"
#include "test/support/rank_failures.h"

namespace chorus::testing {

struct GpuRank {
  int rank = 0;
  runtime::Runtime* runtime = nullptr;
  FakeGpuPlatform* gpu = nullptr;
  FakeGpuCluster* cluster = nullptr;
};
using GpuRankFn = std::function<void(GpuRank&)>;

// Runs `fn` on `n` simulated ranks, each with its runtime and fake GPU platform (rank r uses
// `devices_per_rank` devices, runs on simulated host hosts[r], default all on one); `after` runs
// on each rank after its runtime shut down.
inline void RunGpuRanks(int n, const GpuRankFn& fn, Failures& f,
                        runtime::Config config = FastCycleConfig(), int devices_per_rank = 1,
                        const GpuRankFn& after = nullptr, std::vector<int> hosts = {}) {
  InProcessFabric fabric(n, std::move(hosts));
  FakeGpuCluster cluster;
  std::vector<std::shared_ptr<FakeGpuPlatform>> gpus;
  for (int r = 0; r < n; ++r) {
    gpus.push_back(std::make_shared<FakeGpuPlatform>(cluster, devices_per_rank));
  }
  std::barrier done(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto rt = runtime::Runtime::Create(config, fabric.CreateController(r), {}, gpus[r]);
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
std::vector<T> ReadBack(const void* p, size_t n) {
  std::vector<T> out(n);
  if (n > 0) std::memcpy(out.data(), p, n * sizeof(T));
  return out;
}

inline OpRequest GpuOp(OpType type, const std::string& name, TensorView input) {
  OpRequest r;
  r.type = type;
  r.name = name;
  r.input = std::move(input);
  return r;
}

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_GPU_RANKS_H_
