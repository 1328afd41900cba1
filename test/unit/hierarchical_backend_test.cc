// HierarchicalBackend (ops/hierarchical/hierarchical_backend.h) over the in-process fabric: N
// ranks as threads on simulated hosts, its sub-backends made by the controller's
// CreateBackend/CreateGroupBackend as the runtime makes them. The hierarchical result is compared
// with the flat backend's on the same inputs: every dtype and reduce op, counts that do not divide
// by the local size, in place and not, layouts host by host and interleaved.
#include "ops/hierarchical/hierarchical_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "test/support/hierarchical_inputs.h"
#include "test/support/in_process_fabric.h"
#include "test/support/sanitized.h"
#include "test/support/summation_bound.h"
#include "test/support/typed_values.h"

namespace chorus::ops {
namespace {

using testing::HierarchicalInput;
using testing::HierarchicalInputMagnitude;
using testing::IsFloat;
using testing::kReducibleDtypes;
using testing::Load;
using testing::Store;

// The set of all world ranks as one HierarchicalBackend per rank, built as the runtime builds it.
using RankFn = std::function<void(int rank, HierarchicalBackend& backend)>;

void RunOnHosts(const std::vector<int>& host_of_rank, const RankFn& fn) {
  const int n = static_cast<int>(host_of_rank.size());
  testing::InProcessFabric fabric(n, host_of_rank);
  const HierarchyPlan plan =
      PlanHierarchy(std::vector<int32_t>(host_of_rank.begin(), host_of_rank.end()));
  REQUIRE(plan.kind == HierarchyPlan::Kind::kHierarchical);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<runtime::Controller> controller = fabric.CreateController(r);
      std::vector<int32_t> all(n), local_group(n), cross_group(n);
      for (int i = 0; i < n; ++i) {
        all[i] = i;
        local_group[i] = plan.layout.host[i];
        cross_group[i] = plan.layout.local[i];
      }
      auto flat = controller->CreateBackend(all);
      auto local = controller->CreateGroupBackend(local_group);
      auto cross = controller->CreateGroupBackend(cross_group);
      if (!flat.ok() || !local.ok() || !cross.ok()) {
        errors[r] = "creating the backends failed";
        return;
      }
      auto backend =
          HierarchicalBackend::Create(*std::move(flat), *std::move(local), *std::move(cross), plan);
      if (!backend.ok()) {
        errors[r] = backend.status().ToString();
        return;
      }
      fn(r, **backend);
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) CHECK(e.empty());
}

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};

// One rank's outputs of one case.
struct Outputs {
  std::vector<std::byte> flat, hierarchical;
};

TEST_CASE("Hierarchical allreduce equals the flat one: every dtype and op, uneven counts",
          "[hierarchical][large]") {
  using Hosts = std::vector<int>;
  const Hosts hosts = GENERATE(
      from_range(chorus::testing::FullOrSanitized<Hosts>({{0, 0, 1, 1},        // 2 x 2
                                                          {0, 0, 1, 1, 2, 2},  // 3 x 2
                                                          {0, 0, 0, 1, 1, 1},  // 2 x 3
                                                          {0, 1, 0, 1}},       // interleaved
                                                         {{0, 0, 1, 1, 2, 2}, {0, 1, 0, 1}})));
  const int n = static_cast<int>(hosts.size());
  const int local_size = n / (*std::max_element(hosts.begin(), hosts.end()) + 1);
  // 40001: blocks above kCrossAllreduceMaxBytes for the 4- and 8-byte types (the cross step as
  // reduce-scatter + allgather), below it for the others.
  const std::vector<int64_t> counts = {local_size - 1, local_size, 5, 1001, 40001};
  struct Case {
    DataType dtype;
    ReduceOp op;
    int64_t count;
    bool in_place;
  };
  std::vector<Case> cases;
  for (DataType d : kReducibleDtypes) {
    for (ReduceOp op : kOps) {
      for (int64_t count : counts) {
        for (bool in_place : {false, true}) cases.push_back({d, op, count, in_place});
      }
    }
  }
  // [case][rank]
  std::vector<std::vector<Outputs>> out(cases.size(), std::vector<Outputs>(n));
  std::vector<HierarchicalBackend::Counters> counters(n);
  std::mutex mu;
  std::vector<std::string> failures;
  RunOnHosts(hosts, [&](int rank, HierarchicalBackend& backend) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const Case& k = cases[c];
      const int64_t bytes = k.count * static_cast<int64_t>(DataTypeSize(k.dtype));
      std::vector<std::byte> input(static_cast<size_t>(bytes));
      for (int64_t i = 0; i < k.count; ++i) {
        Store(k.dtype, input.data(), i, HierarchicalInput(k.dtype, k.op, rank, i));
      }
      Outputs& o = out[c][rank];
      o.flat.assign(input.size(), std::byte{0});
      o.hierarchical = k.in_place ? input : std::vector<std::byte>(input.size(), std::byte{0xee});
      backend.set_modes({false, false});
      absl::Status flat = backend.Allreduce(input.data(), o.flat.data(), k.count, k.dtype, k.op);
      backend.set_modes({true, false});
      absl::Status hier = backend.Allreduce(k.in_place ? o.hierarchical.data() : input.data(),
                                            o.hierarchical.data(), k.count, k.dtype, k.op);
      if (!flat.ok() || !hier.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(absl::StrCat("rank ", rank, " case ", c, ": ", flat.ToString(), " / ",
                                        hier.ToString()));
      }
    }
    counters[rank] = backend.counters();
  });
  for (const std::string& f : failures) FAIL_CHECK(f);
  REQUIRE(failures.empty());

  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    INFO("dtype " << DataTypeName(k.dtype) << ", op " << ReduceOpName(k.op) << ", count " << k.count
                  << (k.in_place ? ", in place" : ""));
    for (int r = 0; r < n; ++r) {
      // Every rank ends with the same bits.
      CHECK(out[c][r].hierarchical == out[c][0].hierarchical);
      CHECK(out[c][r].flat == out[c][0].flat);
    }
    const bool exact = !IsFloat(k.dtype) || k.op == ReduceOp::kMin || k.op == ReduceOp::kMax;
    if (exact) {
      CHECK(out[c][0].hierarchical == out[c][0].flat);
      continue;
    }
    int64_t worst = -1;
    for (int64_t i = 0; i < k.count && worst < 0; ++i) {
      const double magnitude = HierarchicalInputMagnitude(k.dtype, k.op, n, i);
      const double h = Load(k.dtype, out[c][0].hierarchical.data(), i);
      const double f = Load(k.dtype, out[c][0].flat.data(), i);
      const double bound = testing::SummationOrderBound(k.dtype, n, magnitude, std::abs(f));
      if (std::abs(h - f) > bound) worst = i;
    }
    CHECK(worst == -1);
  }
  // Counts below the local size run flat, every other one hierarchically.
  const int64_t per_count = static_cast<int64_t>(std::size(kReducibleDtypes) * std::size(kOps) * 2);
  for (int r = 0; r < n; ++r) {
    CHECK(counters[r].hierarchical_allreduces == per_count * 4);
    CHECK(counters[r].flat_allreduces == per_count * 6);  // the flat runs and count L - 1
  }
}

TEST_CASE("Hierarchical allgather equals the flat one, blocks of any size, in place or not",
          "[hierarchical]") {
  const std::vector<int> hosts =
      GENERATE(std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 0, 1, 1, 2, 2},
               std::vector<int>{1, 0, 2, 0, 1, 2},  // interleaved
               std::vector<int>{0, 0, 0, 1, 1, 1});
  const int n = static_cast<int>(hosts.size());
  // Block sizes per case, the same on every rank.
  std::vector<std::vector<int64_t>> blocks;
  std::mt19937 gen(42);
  for (int c = 0; c < 12; ++c) {
    std::vector<int64_t> b(n);
    for (int r = 0; r < n; ++r) b[r] = (c % 3 == 0 && r % 2 == 1) ? 0 : gen() % 3000;
    blocks.push_back(b);
  }
  blocks.push_back(std::vector<int64_t>(n, 1));
  std::vector<std::vector<Outputs>> out(blocks.size() * 2, std::vector<Outputs>(n));
  std::vector<HierarchicalBackend::Counters> counters(n);
  std::mutex mu;
  std::vector<std::string> failures;
  RunOnHosts(hosts, [&](int rank, HierarchicalBackend& backend) {
    for (size_t c = 0; c < blocks.size() * 2; ++c) {
      const std::vector<int64_t>& b = blocks[c / 2];
      const bool in_place = c % 2 == 1;
      int64_t total = 0, offset = 0;
      for (int r = 0; r < n; ++r) {
        if (r == rank) offset = total;
        total += b[r];
      }
      std::vector<std::byte> mine(static_cast<size_t>(b[rank]));
      for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<std::byte>(rank * 37 + i * 13);
      Outputs& o = out[c][rank];
      o.flat.assign(static_cast<size_t>(total), std::byte{0x11});
      o.hierarchical.assign(static_cast<size_t>(total), std::byte{0x22});
      if (in_place && !mine.empty())
        std::memcpy(o.hierarchical.data() + offset, mine.data(), mine.size());
      backend.set_modes({false, false});
      absl::Status flat = backend.Allgatherv(mine.data(), o.flat.data(), b);
      backend.set_modes({false, true});
      absl::Status hier = backend.Allgatherv(
          in_place ? static_cast<const void*>(o.hierarchical.data() + offset) : mine.data(),
          o.hierarchical.data(), b);
      if (!flat.ok() || !hier.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(absl::StrCat("rank ", rank, " case ", c, ": ", flat.ToString(), " / ",
                                        hier.ToString()));
      }
    }
    counters[rank] = backend.counters();
  });
  for (const std::string& f : failures) FAIL_CHECK(f);
  for (size_t c = 0; c < out.size(); ++c) {
    INFO("case " << c);
    for (int r = 0; r < n; ++r) CHECK(out[c][r].hierarchical == out[c][r].flat);
  }
  for (int r = 0; r < n; ++r) {
    CHECK(counters[r].hierarchical_allgathers == static_cast<int64_t>(blocks.size() * 2));
  }
}

TEST_CASE("HierarchicalBackend refuses sub-backends that do not match the layout",
          "[hierarchical]") {
  // Two ranks on two hosts, each its own local group: the plan is one per host, not a grid.
  testing::InProcessFabric fabric(1);
  std::unique_ptr<runtime::Controller> controller = fabric.CreateController(0);
  auto make = [&] { return *controller->CreateBackend(std::vector<int32_t>{0}); };
  auto not_grid =
      HierarchicalBackend::Create(make(), make(), make(), PlanHierarchy(std::vector<int32_t>{0}));
  CHECK(not_grid.status().code() == absl::StatusCode::kInvalidArgument);
  // A grid plan for 4 ranks over one-rank backends.
  auto mismatched = HierarchicalBackend::Create(make(), make(), make(),
                                                PlanHierarchy(std::vector<int32_t>{0, 0, 1, 1}));
  CHECK(mismatched.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(mismatched.status().message()), Catch::Contains("the layout"));
}

}  // namespace
}  // namespace chorus::ops
