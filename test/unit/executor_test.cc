// The executor's fusion buffer when it cannot be mapped (Note [Fusion buffer reservation] in
// docs/fusion.md): every rank of the set fails the op with ResourceExhausted, nobody is left
// in a collective, and the next ops run. N simulated ranks as threads over the in-process fabric.
#include "runtime/execute/executor.h"

#include <barrier>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "runtime/config.h"
#include "runtime/controller.h"
#include "runtime/runtime.h"
#include "test/support/in_process_fabric.h"

namespace chorus::runtime {
namespace {

SharedConfig TestSharedConfig() {
  SharedConfig c;
  c.fusion_threshold_bytes = int64_t{64} << 20;
  c.pipeline_chunk_bytes = int64_t{4} << 20;
  c.inplace_min_bytes = int64_t{256} << 10;
  return c;
}

// One rank's tensors of a fused allreduce of `names` (small: packed into the fusion buffer).
struct RankTensors {
  std::vector<std::vector<float>> data;
  std::vector<std::unique_ptr<TensorEntry>> owned;
  std::vector<TensorEntry*> entries;
};

Response FusedAllreduce(const std::vector<std::string>& names, int64_t count) {
  Response response;
  response.type = OpType::kAllreduce;
  response.dtype = DataType::kFloat32;
  response.reduce_op = ReduceOp::kSum;
  response.names = names;
  response.shapes.assign(names.size(), {count});
  return response;
}

RankTensors MakeTensors(const Response& response, int rank) {
  RankTensors t;
  for (size_t i = 0; i < response.names.size(); ++i) {
    t.data.emplace_back(response.shapes[i][0], static_cast<float>(rank + 1));
    auto entry = std::make_unique<TensorEntry>();
    entry->op.type = OpType::kAllreduce;
    entry->op.name = response.names[i];
    entry->op.input = {t.data.back().data(), DataType::kFloat32, response.shapes[i]};
    entry->request.name = response.names[i];
    t.entries.push_back(entry.get());
    t.owned.push_back(std::move(entry));
  }
  return t;
}

// What each rank saw, checked on the test's thread (Catch2 asserts are not thread-safe).
struct RankOutcome {
  std::vector<absl::Status> execute;           // Execute's status, per attempt
  std::vector<std::vector<absl::Status>> ops;  // each op's status, per attempt
  std::vector<float> first_values;             // data[0][0] after each attempt
  int allocations = 0;                         // calls of the allocator

  void Add(const absl::Status& status, const std::vector<OpResult>& results) {
    execute.push_back(status);
    ops.emplace_back();
    for (const OpResult& result : results) ops.back().push_back(result.status);
  }
};

// Runs body(rank, controller, outcome) for `n` ranks over one fabric, one thread per rank.
void RunRanks(int n, std::vector<RankOutcome>* outcomes,
              const std::function<void(int, Controller&, RankOutcome&)>& body) {
  testing::InProcessFabric fabric(n);
  outcomes->assign(n, RankOutcome());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Controller> controller = fabric.CreateController(r);
      body(r, *controller, (*outcomes)[r]);
    });
  }
  for (std::thread& t : threads) t.join();
}

// An executor whose first mapping fails when `fail` (as mmap does when out of memory); counts
// the mappings in `out`.
Executor MakeExecutor(RankOutcome& out, bool fail) {
  Executor::Options options;
  options.allocate = [&out, fail](int64_t bytes) {
    ++out.allocations;
    if (fail && out.allocations == 1) return HugePageBuffer(nullptr, HugePageBufferDeleter{});
    return AllocateHugePageBuffer(bytes, /*huge=*/false);
  };
  return Executor(TestSharedConfig(), std::move(options));
}

TEST_CASE("A fusion buffer one rank cannot map fails the op on every rank, and the next runs",
          "[executor]") {
  const int n = GENERATE(2, 3);
  const int failing = GENERATE_COPY(0, n - 1);
  const Response response = FusedAllreduce({"a", "b", "c"}, 100);
  std::vector<RankOutcome> outcomes;
  RunRanks(n, &outcomes, [&](int r, Controller& controller, RankOutcome& out) {
    std::vector<int32_t> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    auto backend = controller.CreateBackend(all);
    if (!backend.ok()) {
      out.execute.push_back(backend.status());
      return;
    }
    Executor executor = MakeExecutor(out, r == failing);
    RankTensors tensors = MakeTensors(response, r);
    for (int attempt = 0; attempt < 3; ++attempt) {
      std::vector<OpResult> results;
      out.Add(executor.Execute(response, tensors.entries, **backend, &results), results);
      out.first_values.push_back(tensors.data[0][0]);
    }
  });

  const float sum = static_cast<float>(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << " of " << n << ", rank " << failing << " cannot map");
    const RankOutcome& out = outcomes[r];
    REQUIRE(out.execute.size() == 3);
    // Attempt 1: refused everywhere, the tensors untouched; the loop goes on (OK).
    CHECK(out.execute[0].ok());
    REQUIRE(out.ops[0].size() == 3);
    for (const absl::Status& s : out.ops[0]) {
      CHECK(s.code() == absl::StatusCode::kResourceExhausted);
      CHECK(absl::StrContains(s.message(), absl::StrCat("rank ", failing, " of process set 0")));
      CHECK(absl::StrContains(s.message(), "allreduce of tensor 'a' and 2 more"));
    }
    CHECK(out.first_values[0] == static_cast<float>(r + 1));
    // Attempt 2: the same op again, now mapped everywhere, reduces.
    CHECK(out.execute[1].ok());
    for (const absl::Status& s : out.ops[1]) CHECK(s.ok());
    CHECK(out.first_values[1] == sum);
    // Attempt 3: reserved already: no new mapping (and no agreement).
    CHECK(out.execute[2].ok());
    for (const absl::Status& s : out.ops[2]) CHECK(s.ok());
    CHECK(out.first_values[2] == sum * static_cast<float>(n));
    CHECK(out.allocations == (r == failing ? 2 : 1));
  }
}

TEST_CASE("The fusion buffer is reserved per process set, once it must grow", "[executor]") {
  // Rank 2 is outside set {0, 1}: after the set's op, the world's op of the same size must
  // still be agreed on by all three (rank 2 has reserved nothing yet), and rank 2's failure
  // must fail it everywhere, even on ranks whose buffer is large enough.
  const int n = 3;
  Response in_set = FusedAllreduce({"s0", "s1"}, 1000);
  in_set.process_set_id = 1;
  const Response world = FusedAllreduce({"w0", "w1"}, 1000);
  std::vector<RankOutcome> outcomes;
  RunRanks(n, &outcomes, [&](int r, Controller& controller, RankOutcome& out) {
    auto set = controller.CreateBackend(std::vector<int32_t>{0, 1});
    auto all = controller.CreateBackend(std::vector<int32_t>{0, 1, 2});
    if (!set.ok() || !all.ok()) {
      out.execute.push_back(!set.ok() ? set.status() : all.status());
      return;
    }
    Executor executor = MakeExecutor(out, r == 2);
    std::vector<OpResult> results;
    if (*set != nullptr) {
      RankTensors tensors = MakeTensors(in_set, r);
      out.Add(executor.Execute(in_set, tensors.entries, **set, &results), results);
    }
    RankTensors tensors = MakeTensors(world, r);
    out.Add(executor.Execute(world, tensors.entries, **all, &results), results);
  });

  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    const RankOutcome& out = outcomes[r];
    REQUIRE(out.execute.size() == (r < 2 ? 2u : 1u));
    for (const absl::Status& s : out.execute) CHECK(s.ok());
    if (r < 2) {
      for (const absl::Status& s : out.ops[0]) CHECK(s.ok());  // the set's op
    }
    for (const absl::Status& s : out.ops.back()) {
      CHECK(s.code() == absl::StatusCode::kResourceExhausted);
      CHECK(absl::StrContains(s.message(), "rank 2 of process set 0"));
    }
    CHECK(out.allocations == 1);  // ranks 0 and 1: once for the set, large enough for the world
  }
}

TEST_CASE("Runtime: an unmappable fusion buffer fails the op everywhere; the next ops run",
          "[executor][runtime]") {
  // A reducescatter with a prescale copies its input into the fusion buffer first. This input
  // claims 2^56 float64 elements (512 PiB: no address space can map that) but is never read:
  // the mapping fails first, on every rank.
  const int n = GENERATE(1, 2, 3);
  testing::InProcessFabric fabric(n);
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](std::string message) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(std::move(message));
  };
  std::barrier done(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Config config;
      config.cycle_time = absl::Microseconds(200);
      config.idle_cycle_time = absl::Milliseconds(2);
      auto rt = Runtime::Create(config, fabric.CreateController(r));
      if (!rt.ok()) {
        fail(absl::StrCat("rank ", r, ": ", rt.status().ToString()));
        done.arrive_and_drop();
        return;
      }
      std::vector<double> small(8, 1.0);
      OpRequest huge;
      huge.type = OpType::kReducescatter;
      huge.name = "huge";
      huge.input = {small.data(), DataType::kFloat64, {int64_t{1} << 56}};
      huge.prescale_factor = 2.0;
      auto result = (*rt)->Enqueue(huge);
      if (!result.ok()) {
        fail(absl::StrCat("rank ", r, ": enqueue: ", result.status().ToString()));
      } else {
        const absl::Status s = (*rt)->Wait(*result);
        if (s.code() != absl::StatusCode::kResourceExhausted ||
            !absl::StrContains(s.message(), "could not map a fusion buffer")) {
          fail(absl::StrCat("rank ", r, ": huge reducescatter: ", s.ToString()));
        }
        (void)(*rt)->Release(*result);
      }
      // The runtime goes on: a fused allreduce (through the fusion buffer) works.
      std::vector<std::vector<float>> data(3, std::vector<float>(10, static_cast<float>(r + 1)));
      std::vector<Handle> handles;
      for (size_t t = 0; t < data.size(); ++t) {
        OpRequest op;
        op.type = OpType::kAllreduce;
        op.name = absl::StrCat("after.", t);
        op.input = {data[t].data(), DataType::kFloat32, {10}};
        auto h = (*rt)->Enqueue(op);
        if (!h.ok()) {
          fail(absl::StrCat("rank ", r, ": enqueue after: ", h.status().ToString()));
          continue;
        }
        handles.push_back(*h);
      }
      for (Handle h : handles) {
        const absl::Status s = (*rt)->Wait(h);
        if (!s.ok()) fail(absl::StrCat("rank ", r, ": allreduce after: ", s.ToString()));
      }
      const float sum = static_cast<float>(n * (n + 1) / 2);
      for (const std::vector<float>& d : data) {
        if (d[9] != sum) fail(absl::StrCat("rank ", r, ": allreduce after gave ", d[9]));
      }
      done.arrive_and_wait();
      (*rt)->Shutdown();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) FAIL_CHECK(f);
}

}  // namespace
}  // namespace chorus::runtime
