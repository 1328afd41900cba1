// File: test/support/runtime_ranks.h
//
// N simulated ranks as threads, each with its own Runtime over one in-process fabric: the unit
// tier's way of running the whole runtime (queue, loop, coordinator, cache, executor) across
// ranks without MPI.
#ifndef CHORUS_TEST_SUPPORT_RUNTIME_RANKS_H_
#define CHORUS_TEST_SUPPORT_RUNTIME_RANKS_H_

#include <barrier>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "runtime/config.h"
#include "runtime/controller.h"
#include "runtime/runtime.h"
#include "test/support/fast_cycle_config.h"
#include "test/support/in_process_fabric.h"

namespace chorus::testing {

using RuntimeRankFn = std::function<void(int rank, runtime::Runtime& rt)>;
// Wraps rank `rank`'s controller (a decorator that injects faults, say).
using ControllerWrap = std::function<std::unique_ptr<runtime::Controller>(
    int rank, std::unique_ptr<runtime::Controller> controller)>;

// Runs `fn` on `n` simulated ranks, each with its own Runtime (created with `config`, the
// init-time process sets `sets` and its fabric controller, wrapped by `wrap` if set), then
// shuts them all down once every rank returned from `fn` (a shutdown on any rank stops every
// rank). Returns each rank's start error (empty when it started). `fn` runs on the rank
// threads: record failures with testing::Failures, not Catch2.
inline std::vector<std::string> RunRuntimeRanks(int n, const RuntimeRankFn& fn,
                                                runtime::Config config = FastCycleConfig(),
                                                std::vector<std::vector<int32_t>> sets = {},
                                                const ControllerWrap& wrap = nullptr) {
  InProcessFabric fabric(n);
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  std::barrier done(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<runtime::Controller> controller = fabric.CreateController(r);
      if (wrap) controller = wrap(r, std::move(controller));
      auto rt = runtime::Runtime::Create(config, std::move(controller), sets);
      if (!rt.ok()) {
        errors[static_cast<size_t>(r)] = rt.status().ToString();
        done.arrive_and_drop();
        return;
      }
      fn(r, **rt);
      done.arrive_and_wait();
      (*rt)->Shutdown();
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// An in-place allreduce of `data` named `name`.
inline OpRequest AllreduceOf(const std::string& name, std::vector<float>& data,
                             ReduceOp op = ReduceOp::kSum) {
  OpRequest r;
  r.type = OpType::kAllreduce;
  r.name = name;
  r.input = {data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}};
  r.reduce_op = op;
  return r;
}

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_RUNTIME_RANKS_H_
