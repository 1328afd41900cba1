// MPI tier: HierarchicalBackend (ops/hierarchical/hierarchical_backend.h) across the real ranks
// of the mpirun, over the sub-communicators MpiController::CreateGroupBackend splits and over the
// UCX views UcxController::CreateGroupBackend makes (a UCX world formed through MPI, as under
// CHORUS_CONTROLLER=ucx). This machine is one host, so the hosts are simulated: rank r on host
// r / 2 (host by host) or r % (size / 2) (interleaved), which is what the partition needs; the
// traffic between real hosts is test/cluster's. Needs a grid: 4 or 6 ranks (ctest
// mpi_hierarchical_np4/np6); with other sizes the cases say so and pass. Allreduce results are
// checked against the exact ones (test/support/hierarchical_inputs.h), allgathers against every
// rank's block in rank order.
//
// Every rank runs every case in the same order (the calls are collective); failures use CHECK.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <mpi.h>

#include "ops/hierarchical/hierarchical_backend.h"
#include "ops/ucx/ucx_transport.h"
#include "runtime/mpi/mpi_controller.h"
#include "runtime/ucx/controller_address_exchange.h"
#include "runtime/ucx/ucx_controller.h"
#include "test/mpi/world.h"
#include "test/support/hierarchical_inputs.h"
#include "test/support/summation_bound.h"
#include "test/support/typed_values.h"

namespace chorus {
namespace {

using testing::Load;
using testing::Store;
using testing::WorldSize;

// The controllers, created once (collectively) on first use.
struct Controllers {
  std::unique_ptr<runtime::MpiController> mpi;
  std::unique_ptr<runtime::UcxController> ucx;
};

Controllers& GetControllers() {
  static Controllers c = [] {
    Controllers out;
    auto mpi = runtime::MpiController::Create(nullptr);
    if (!mpi.ok()) return out;
    out.mpi = std::move(*mpi);
    runtime::ControllerAddressExchange exchange(out.mpi.get());
    auto transport = ops::UcxTransport::Create();
    if (!transport.ok()) return out;
    auto ucx = runtime::UcxController::Create(out.mpi->topology(), std::move(*transport), exchange);
    if (ucx.ok()) out.ucx = std::move(*ucx);
    return out;
  }();
  return c;
}

// This rank's HierarchicalBackend over the whole world with simulated hosts `hosts`, built by
// `controller` as the runtime builds it (collective).
std::unique_ptr<ops::HierarchicalBackend> Build(runtime::Controller& controller,
                                                const std::vector<int32_t>& hosts) {
  const ops::HierarchyPlan plan = ops::PlanHierarchy(hosts);
  if (plan.kind != ops::HierarchyPlan::Kind::kHierarchical) return nullptr;
  const int n = controller.size();
  std::vector<int32_t> all(n);
  for (int r = 0; r < n; ++r) all[r] = r;
  auto flat = controller.CreateBackend(all);
  auto local = controller.CreateGroupBackend(plan.layout.host);
  auto cross = controller.CreateGroupBackend(plan.layout.local);
  if (!flat.ok() || !local.ok() || !cross.ok()) return nullptr;
  auto backend = ops::HierarchicalBackend::Create(*std::move(flat), *std::move(local),
                                                  *std::move(cross), plan);
  return backend.ok() ? *std::move(backend) : nullptr;
}

// The simulated layouts of this world: host by host and interleaved, local size 2 (and 3 with 6
// ranks).
std::vector<std::vector<int32_t>> Layouts(int n) {
  std::vector<std::vector<int32_t>> out;
  for (int local : {2, 3}) {
    if (n % local != 0 || n / local < 2) continue;
    std::vector<int32_t> by_host(n), interleaved(n);
    for (int r = 0; r < n; ++r) {
      by_host[r] = r / local;
      interleaved[r] = r % (n / local);
    }
    out.push_back(by_host);
    out.push_back(interleaved);
  }
  return out;
}

TEST_CASE("Hierarchical allreduce over MPI and UCX sub-groups gives the exact results",
          "[mpi][hierarchical]") {
  const int n = WorldSize();
  if (Layouts(n).empty()) {
    SUCCEED("a grid of hosts needs 4 or 6 ranks; this run has " << n);
    return;
  }
  Controllers& c = GetControllers();
  REQUIRE(c.mpi != nullptr);
  REQUIRE(c.ucx != nullptr);
  const int rank = c.mpi->rank();
  // Every (controller, layout): its backend, built once.
  struct Built {
    runtime::Controller* controller;
    std::vector<int32_t> hosts;
    std::unique_ptr<ops::HierarchicalBackend> backend;
  };
  std::vector<Built> backends;
  for (runtime::Controller* controller : {static_cast<runtime::Controller*>(c.mpi.get()),
                                          static_cast<runtime::Controller*>(c.ucx.get())}) {
    for (const std::vector<int32_t>& hosts : Layouts(n)) {
      std::unique_ptr<ops::HierarchicalBackend> backend = Build(*controller, hosts);
      CHECK(backend != nullptr);
      if (backend != nullptr) backends.push_back({controller, hosts, std::move(backend)});
    }
  }
  constexpr int64_t kMaxCount = 70001;
  for (DataType d : testing::kReducibleDtypes) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      // This rank's input and the exact results, element by element (the same for every count,
      // controller and layout): integers, min and max are checked bit for bit, float sums and
      // products within the summation-order bound.
      const size_t size = DataTypeSize(d);
      const bool exact = !testing::IsFloat(d) || op == ReduceOp::kMin || op == ReduceOp::kMax;
      std::vector<std::byte> input(kMaxCount * size), want(kMaxCount * size);
      std::vector<double> want_value(kMaxCount), magnitude(kMaxCount);
      for (int64_t i = 0; i < kMaxCount; ++i) {
        Store(d, input.data(), i, testing::HierarchicalInput(d, op, rank, i));
        const testing::ExactReduction e = testing::HierarchicalExpected(d, op, n, i);
        want_value[i] = static_cast<double>(e.value);
        magnitude[i] = e.magnitude;
        Store(d, want.data(), i, want_value[i]);
      }
      for (Built& b : backends) {
        const int local_size = b.backend->layout().local_size;
        for (int64_t count : {int64_t{local_size}, int64_t{5}, int64_t{1001}, kMaxCount}) {
          for (bool in_place : {false, true}) {
            INFO(b.controller->name() << ", hosts of rank 0/1: " << b.hosts[0] << "/" << b.hosts[1]
                                      << ", " << DataTypeName(d) << " " << ReduceOpName(op)
                                      << ", count " << count << (in_place ? ", in place" : ""));
            const size_t bytes = static_cast<size_t>(count) * size;
            std::vector<std::byte> hier(bytes);
            if (in_place) std::memcpy(hier.data(), input.data(), bytes);
            b.backend->set_modes({true, false});
            CHECK(b.backend
                      ->Allreduce(in_place ? hier.data() : input.data(), hier.data(), count, d, op)
                      .ok());
            if (exact) {
              CHECK(std::memcmp(hier.data(), want.data(), bytes) == 0);  // bit for bit
              continue;
            }
            int64_t outside = 0;
            for (int64_t i = 0; i < count; ++i) {
              const double h = Load(d, hier.data(), i);
              if (std::abs(h - want_value[i]) >
                  testing::SummationOrderBound(d, n, magnitude[i], std::abs(want_value[i]))) {
                ++outside;
              }
            }
            CHECK(outside == 0);
          }
        }
      }
    }
  }
  for (Built& b : backends) CHECK(b.backend->counters().hierarchical_allreduces > 0);
}

TEST_CASE("Hierarchical allgather over MPI and UCX sub-groups gives every rank's blocks",
          "[mpi][hierarchical]") {
  const int n = WorldSize();
  if (Layouts(n).empty()) {
    SUCCEED("a grid of hosts needs 4 or 6 ranks; this run has " << n);
    return;
  }
  Controllers& c = GetControllers();
  REQUIRE(c.mpi != nullptr);
  REQUIRE(c.ucx != nullptr);
  const int rank = c.mpi->rank();
  for (runtime::Controller* controller : {static_cast<runtime::Controller*>(c.mpi.get()),
                                          static_cast<runtime::Controller*>(c.ucx.get())}) {
    for (const std::vector<int32_t>& hosts : Layouts(n)) {
      std::unique_ptr<ops::HierarchicalBackend> backend = Build(*controller, hosts);
      CHECK(backend != nullptr);
      if (backend == nullptr) continue;
      for (int round = 0; round < 6; ++round) {
        std::vector<int64_t> blocks(n);
        int64_t total = 0, offset = 0;
        for (int r = 0; r < n; ++r) {
          // Zeros on some ranks, up to 300 KB (several UCX pieces) on others.
          blocks[r] = (round + r) % 3 == 0 ? 0 : ((r + 1) * 7919 * (round + 1)) % 300000;
          if (r == rank) offset = total;
          total += blocks[r];
        }
        // Rank r's block is the bytes r + 7 i: the result is every rank's block in rank order.
        std::vector<std::byte> want(static_cast<size_t>(total));
        for (int64_t r = 0, at = 0; r < n; at += blocks[r], ++r) {
          for (int64_t i = 0; i < blocks[r]; ++i) want[at + i] = static_cast<std::byte>(r + i * 7);
        }
        std::vector<std::byte> mine(want.begin() + offset, want.begin() + offset + blocks[rank]);
        std::vector<std::byte> hier(static_cast<size_t>(total));
        backend->set_modes({false, true});
        const bool in_place = round % 2 == 1;
        if (in_place && !mine.empty()) std::memcpy(hier.data() + offset, mine.data(), mine.size());
        CHECK(
            backend->Allgatherv(in_place ? hier.data() + offset : mine.data(), hier.data(), blocks)
                .ok());
        INFO(controller->name() << ", round " << round);
        CHECK(hier == want);
      }
      CHECK(backend->counters().hierarchical_allgathers > 0);
    }
  }
}

}  // namespace
}  // namespace chorus
