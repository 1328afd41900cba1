// MPI-tier tests of the runtime's error paths through the public API (chorus/chorus.h): ranks
// that disagree on an op's parameters, a duplicate in-flight name, a rank outside a process
// set, and bad local arguments. Every error must reach every rank (none may hang), and the
// runtime must keep working afterwards.
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>

#include "chorus/chorus.h"
#include "chorus/types.h"
#include "test/mpi/test_util.h"
#include "test/support/catch_session.h"

namespace chorus::mpitest {
namespace {

// One side of a disagreement: what a rank submits under the shared name.
struct Variant {
  OpType type = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape = {4};
  ReduceOp reduce_op = ReduceOp::kSum;
  int32_t root_rank = 0;
  double prescale_factor = 1.0;
};

struct MismatchCase {
  std::string label;
  Variant common;    // every rank but the last
  Variant odd;       // the last rank
  std::string word;  // must appear in the error message, besides the tensor name ("" = none)
};

std::vector<MismatchCase> MismatchCases(const Topology& topo) {
  const int64_t even_rows = 2 * topo.size;  // an equal alltoall split
  Variant f32;
  Variant i32 = f32;
  i32.dtype = DataType::kInt32;
  Variant f32_5 = f32;
  f32_5.shape = {5};
  Variant max = f32;
  max.reduce_op = ReduceOp::kMax;
  Variant prescaled = f32;
  prescaled.prescale_factor = 2.0;
  Variant bcast0 = f32;
  bcast0.type = OpType::kBroadcast;
  Variant bcast1 = bcast0;
  bcast1.root_rank = 1;
  Variant gather = f32;
  gather.type = OpType::kAllgather;
  gather.shape = {2, 3};
  Variant gather_wide = gather;
  gather_wide.shape = {2, 4};
  Variant gather_int8 = gather;
  gather_int8.dtype = DataType::kInt8;
  Variant gather_uint8 = gather;
  gather_uint8.dtype = DataType::kUint8;
  Variant gather_as_allreduce = gather;
  gather_as_allreduce.shape = {4};
  Variant rs = f32;
  rs.type = OpType::kReducescatter;
  rs.shape = {6, 2};
  Variant rs_wide = rs;
  rs_wide.shape = {6, 3};
  Variant a2a = f32;
  a2a.type = OpType::kAlltoall;
  a2a.shape = {even_rows, 2};
  Variant a2a_f64 = a2a;
  a2a_f64.dtype = DataType::kFloat64;
  return {
      {"allreduce shape", f32, f32_5, "shape"},
      {"allreduce dtype", f32, i32, ""},
      {"allreduce reduce op", f32, max, ""},
      {"allreduce prescale", f32, prescaled, ""},
      {"broadcast root", bcast0, bcast1, ""},
      {"allreduce vs allgather", f32, gather_as_allreduce, ""},
      {"allreduce vs broadcast", f32, bcast0, ""},
      {"allgather trailing shape", gather, gather_wide, "shape"},
      {"allgather dtype", gather_int8, gather_uint8, ""},
      {"reducescatter shape", rs, rs_wide, "shape"},
      {"alltoall dtype", a2a, a2a_f64, ""},
  };
}

OpRequest FromVariant(const Variant& v, std::string name, Tensor& t) {
  OpRequest req = MakeRequest(v.type, std::move(name), t.view());
  req.reduce_op = v.reduce_op;
  req.root_rank = v.root_rank;
  req.prescale_factor = v.prescale_factor;
  return req;
}

TEST_CASE("ranks that disagree get InvalidArgument on every rank", "[mpi][errors]") {
  const Topology topo = InitAndTopology();
  const std::vector<MismatchCase> cases = MismatchCases(topo);
  const int index = GENERATE(range(0, 11));
  REQUIRE(static_cast<size_t>(index) < cases.size());
  const MismatchCase& c = cases[index];
  INFO(c.label << ", rank " << topo.rank);
  if (topo.size < 2) {
    chorus::testing::SkipCase("needs two ranks");
    return;
  }

  const bool odd = topo.rank == topo.size - 1;
  const Variant& mine = odd ? c.odd : c.common;
  Tensor t(mine.dtype, mine.shape);
  t.Fill([&](int64_t i) { return SumValue(mine.dtype, topo.rank, i); });
  const std::string name = "errors.mismatch." + std::to_string(index);
  auto seen = std::make_shared<Seen>();
  absl::StatusOr<Handle> h = Enqueue(FromVariant(mine, name, t), [seen](const OpResult& r) {
    seen->status = r.status;
    seen->calls.fetch_add(1, std::memory_order_release);
  });
  INFO("Enqueue: " << h.status().ToString());
  CHECK(h.ok());
  if (h.ok()) {
    absl::StatusOr<OpResult> r = Release(*h);
    REQUIRE(r.ok());
    const absl::Status& st = r->status;
    INFO("result: " << st.ToString());
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK(st.message().find(name) != absl::string_view::npos);
    if (!c.word.empty()) CHECK(st.message().find(c.word) != absl::string_view::npos);
    CHECK(seen->calls.load(std::memory_order_acquire) == 1);
    CHECK(seen->status == st);
  }
  CheckRuntimeStillWorks("errors.mismatch.after." + std::to_string(index), topo);
}

TEST_CASE("a failed op does not disturb the ops negotiated with it", "[mpi][errors]") {
  const Topology topo = InitAndTopology();
  if (topo.size < 2) {
    chorus::testing::SkipCase("needs two ranks");
    return;
  }
  const bool odd = topo.rank == topo.size - 1;
  std::vector<std::unique_ptr<Tensor>> good;
  std::vector<OpRequest> requests;
  for (int k = 0; k < 4; ++k) {
    good.push_back(std::make_unique<Tensor>(DataType::kFloat32, std::vector<int64_t>{k + 2}));
    good[k]->Fill([&](int64_t i) { return SumValue(DataType::kFloat32, topo.rank, i + k); });
    requests.push_back(AllreduceRequest("errors.neighbour.good." + std::to_string(k), *good[k]));
  }
  Tensor bad(DataType::kFloat32, {odd ? 3 : 2});
  requests.push_back(AllreduceRequest("errors.neighbour.bad", bad));
  const std::vector<OpResult> results =
      ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/400));
  for (int k = 0; k < 4; ++k) {
    INFO("good " << k << ": " << results[k].status.ToString());
    CHECK(results[k].status.ok());
    CHECK(good[k]->Mismatch([&](int64_t i) {
      double s = 0;
      for (int r = 0; r < topo.size; ++r) s += SumValue(DataType::kFloat32, r, i + k);
      return s;
    }) == "");
  }
  INFO("bad: " << results[4].status.ToString());
  CHECK(results[4].status.code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a duplicate in-flight name is rejected by Enqueue", "[mpi][errors]") {
  const Topology topo = InitAndTopology();
  // Round k: rank k submits X_k and its duplicate; the others submit X_k only after the gate
  // op completes, so X_k is certainly still pending on rank k when it submits the duplicate.
  for (int k = 0; k < topo.size; ++k) {
    INFO("round " << k << ", rank " << topo.rank);
    const std::string name = "errors.dup." + std::to_string(k);
    Tensor x(DataType::kInt32, {3});
    x.Fill([&](int64_t i) { return SumValue(DataType::kInt32, topo.rank, i); });
    Tensor x_again(DataType::kInt32, {3});
    Handle h = kNoHandle;
    auto enqueue_x = [&] {
      absl::StatusOr<Handle> first = Enqueue(AllreduceRequest(name, x));
      INFO(first.status().ToString());
      CHECK(first.ok());
      if (first.ok()) h = *first;
    };
    if (topo.rank == k) {
      enqueue_x();
      absl::StatusOr<Handle> dup = Enqueue(AllreduceRequest(name, x_again));
      INFO("duplicate: " << dup.status().ToString());
      CHECK(dup.status().code() == absl::StatusCode::kInvalidArgument);
      // A wrongly accepted duplicate is not waited for: it may never complete.
    }
    CheckRuntimeStillWorks("errors.dup.gate." + std::to_string(k), topo);
    if (topo.rank != k) enqueue_x();
    if (h != kNoHandle) {
      const OpResult r = std::move(ReleaseAll({h})[0]);
      INFO(r.status.ToString());
      CHECK(r.status.ok());
      CHECK(x.Mismatch([&](int64_t i) {
        double s = 0;
        for (int q = 0; q < topo.size; ++q) s += SumValue(DataType::kInt32, q, i);
        return s;
      }) == "");
    }
  }

  // Within one group.
  Tensor a(DataType::kFloat32, {2});
  Tensor b(DataType::kFloat32, {2});
  std::vector<OpRequest> group;
  group.push_back(AllreduceRequest("errors.dup.group", a));
  group.push_back(AllreduceRequest("errors.dup.group", b));
  absl::StatusOr<std::vector<Handle>> g = EnqueueGroup(std::move(group));
  INFO("group: " << g.status().ToString());
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  if (g.ok()) (void)ReleaseAll(*g);
  CheckRuntimeStillWorks("errors.dup.after", topo);
}

TEST_CASE("a rank outside a process set cannot submit to it", "[mpi][errors][process_set]") {
  const Topology topo = InitAndTopology();
  OpRequest add;
  add.type = OpType::kAddProcessSet;
  add.name = "errors.pset.add";
  add.process_set_ranks = {0};
  const OpResult added = RunOp(std::move(add));
  INFO("add: " << added.status.ToString());
  CHECK(added.status.ok());
  const int32_t id = added.process_set_id;

  Tensor t(DataType::kInt32, {4});
  t.Fill([&](int64_t i) { return SumValue(DataType::kInt32, topo.rank, i); });
  OpRequest req = AllreduceRequest("errors.pset.op", t);
  req.process_set_id = id;
  if (topo.rank == 0) {  // a set of one: the result is the input
    const OpResult r = RunOp(std::move(req));
    INFO(r.status.ToString());
    CHECK(r.status.ok());
    CHECK(t.Mismatch([&](int64_t i) { return SumValue(DataType::kInt32, 0, i); }) == "");
  } else {
    absl::StatusOr<Handle> h = Enqueue(std::move(req));
    INFO("non-member: " << h.status().ToString());
    CHECK_FALSE(h.ok());  // if wrongly accepted, releasing it could hang: leave it
  }

  OpRequest remove;
  remove.type = OpType::kRemoveProcessSet;
  remove.name = "errors.pset.remove";
  remove.process_set_id = id;
  const OpResult removed = RunOp(std::move(remove));
  INFO("remove: " << removed.status.ToString());
  CHECK(removed.status.ok());
  CheckRuntimeStillWorks("errors.pset.after", topo);
}

TEST_CASE("bad local arguments are rejected by Enqueue", "[mpi][errors]") {
  const Topology topo = InitAndTopology();
  const int64_t uneven = topo.size + 1;  // a first dimension the size does not divide (size > 1)
  Tensor f32(DataType::kFloat32, {4});
  Tensor f32_7(DataType::kFloat32, {7});
  Tensor i32(DataType::kInt32, {4});
  Tensor flag(DataType::kBool, {4});
  Tensor flags(DataType::kBool, {4, 2});
  Tensor rows(DataType::kFloat32, {uneven, 2});

  struct BadCase {
    std::string label;
    absl::StatusCode code;  // kOk: any error
    std::function<OpRequest()> make;
  };
  auto allreduce = [&](std::string name) { return AllreduceRequest(std::move(name), f32); };
  auto alltoall = [&](std::string name, std::vector<int64_t> splits) {
    OpRequest r = MakeRequest(OpType::kAlltoall, std::move(name), rows.view());
    r.splits = std::move(splits);
    return r;
  };
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  std::vector<BadCase> cases = {
      {"empty name", kInvalid, [&] { return allreduce(""); }},
      {"null data with elements", kInvalid,
       [&] {
         OpRequest r = allreduce("errors.local.null");
         r.input.data = nullptr;
         return r;
       }},
      {"bool allreduce", kInvalid, [&] { return AllreduceRequest("errors.local.bool", flag); }},
      {"bool reducescatter", kInvalid,
       [&] { return MakeRequest(OpType::kReducescatter, "errors.local.boolrs", flags.view()); }},
      {"alltoall splits do not sum to dim0", kInvalid,
       [&] { return alltoall("errors.local.splitsum", std::vector<int64_t>(topo.size, 1)); }},
      {"alltoall splits whose sum overflows", kInvalid,
       [&] {
         // With 3 or more ranks the sum wraps around to the first dimension exactly.
         constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
         std::vector<int64_t> s(topo.size, 0);
         s[0] = kMax;
         if (topo.size >= 3) {
           s[1] = kMax;
           s[2] = uneven + 2;
         } else if (topo.size == 2) {
           s[1] = uneven;
         }
         return alltoall("errors.local.splitwrap", s);
       }},
      {"alltoall splits of the wrong length", kInvalid,
       [&] {
         std::vector<int64_t> s(topo.size + 1, 0);
         s[0] = uneven;
         return alltoall("errors.local.splitlen", s);
       }},
      {"alltoall negative split", kInvalid,
       [&] {
         std::vector<int64_t> s(topo.size, 0);
         s[0] = -1;
         s[topo.size - 1] += uneven + 1;
         return alltoall("errors.local.splitneg", s);
       }},
      {"alltoall equal split of an uneven dim0", topo.size > 1 ? kInvalid : absl::StatusCode::kOk,
       [&] { return alltoall("errors.local.uneven", {}); }},
      {"broadcast root == size", kInvalid,
       [&] {
         OpRequest r = MakeRequest(OpType::kBroadcast, "errors.local.root", f32.view());
         r.root_rank = topo.size;
         return r;
       }},
      {"broadcast root -1", kInvalid,
       [&] {
         OpRequest r = MakeRequest(OpType::kBroadcast, "errors.local.rootneg", f32.view());
         r.root_rank = -1;
         return r;
       }},
      {"output of another element count", kInvalid,
       [&] {
         OpRequest r = allreduce("errors.local.outcount");
         r.output = f32_7.view();
         return r;
       }},
      {"output of another dtype", kInvalid,
       [&] {
         OpRequest r = allreduce("errors.local.outdtype");
         r.output = i32.view();
         return r;
       }},
      {"undefined dtype", kInvalid,
       [&] {
         OpRequest r = allreduce("errors.local.dtype");
         r.input.dtype = static_cast<DataType>(42);
         return r;
       }},
      {"undefined reduce op", kInvalid,
       [&] {
         OpRequest r = allreduce("errors.local.op");
         r.reduce_op = static_cast<ReduceOp>(42);
         return r;
       }},
      {"undefined op type", kInvalid,
       [&] {
         OpRequest r = allreduce("errors.local.type");
         r.type = static_cast<OpType>(42);
         return r;
       }},
      {"an empty tensor whose other dimensions multiply past 2^56", kInvalid,
       [&] {
         OpRequest r = allreduce("errors.local.hugeempty");
         r.input.shape = {0, int64_t{1} << 40, int64_t{1} << 40};
         return r;
       }},
      {"negative dimension", kInvalid,
       [&] {
         OpRequest r = allreduce("errors.local.negdim");
         r.input.shape = {-4};
         return r;
       }},
      {"Adasum (reserved)", absl::StatusCode::kOk,
       [&] {
         OpRequest r = allreduce("errors.local.adasum");
         r.reduce_op = ReduceOp::kAdasum;
         return r;
       }},
      {"unknown process set", absl::StatusCode::kOk,
       [&] {
         OpRequest r = allreduce("errors.local.pset");
         r.process_set_id = 4242;
         return r;
       }},
      {"add-process-set with a rank out of range", kInvalid,
       [&] {
         OpRequest r;
         r.type = OpType::kAddProcessSet;
         r.name = "errors.local.addrange";
         r.process_set_ranks = {0, topo.size};
         return r;
       }},
      {"add-process-set with ranks not ascending", topo.size > 1 ? kInvalid : absl::StatusCode::kOk,
       [&] {
         OpRequest r;
         r.type = OpType::kAddProcessSet;
         r.name = "errors.local.addorder";
         r.process_set_ranks = {topo.size - 1, 0};
         return r;
       }},
      {"remove the global process set", absl::StatusCode::kOk,
       [&] {
         OpRequest r;
         r.type = OpType::kRemoveProcessSet;
         r.name = "errors.local.removeglobal";
         r.process_set_id = kGlobalProcessSetId;
         return r;
       }},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    INFO(cases[k].label);
    ExpectRejected(cases[k].make(), cases[k].code);
    CheckRuntimeStillWorks("errors.local.after." + std::to_string(k), topo);
  }

  CHECK(Poll(Handle{987654321}).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("a group with one bad request is rejected as a whole", "[mpi][errors][group]") {
  const Topology topo = InitAndTopology();
  Tensor a(DataType::kFloat32, {3});
  Tensor bad(DataType::kBool, {3});
  Tensor c(DataType::kFloat32, {5});
  a.Fill([&](int64_t i) { return SumValue(DataType::kFloat32, topo.rank, i); });
  c.Fill([&](int64_t i) { return SumValue(DataType::kFloat32, topo.rank, i + 1); });
  std::vector<OpRequest> group;
  group.push_back(AllreduceRequest("errors.group.a", a));
  group.push_back(AllreduceRequest("errors.group.bad", bad));
  group.push_back(AllreduceRequest("errors.group.c", c));
  absl::StatusOr<std::vector<Handle>> g = EnqueueGroup(std::move(group));
  INFO("group: " << g.status().ToString());
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  if (g.ok()) (void)ReleaseAll(*g);

  // None of the group was accepted: the same names are free.
  std::vector<OpRequest> requests;
  requests.push_back(AllreduceRequest("errors.group.a", a));
  requests.push_back(AllreduceRequest("errors.group.c", c));
  const std::vector<OpResult> results =
      ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/500));
  for (const OpResult& r : results) {
    INFO(r.status.ToString());
    CHECK(r.status.ok());
  }
  auto sum = [&](int64_t i) {
    double s = 0;
    for (int r = 0; r < topo.size; ++r) s += SumValue(DataType::kFloat32, r, i);
    return s;
  };
  CHECK(a.Mismatch(sum) == "");
  CHECK(c.Mismatch([&](int64_t i) { return sum(i + 1); }) == "");
}

}  // namespace
}  // namespace chorus::mpitest
