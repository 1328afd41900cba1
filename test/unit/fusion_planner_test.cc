#include "runtime/execute/fusion_planner.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>

#include "runtime/message.h"

namespace chorus::runtime {
namespace {

// An allreduce of `floats` float32 elements (4 bytes each).
Response AR(const std::string& name, int64_t floats) {
  Response r;
  r.type = OpType::kAllreduce;
  r.names = {name};
  r.shapes = {{floats}};
  return r;
}

int SetSize(int32_t id) { return id == 0 ? 2 : 3; }

std::vector<std::vector<std::string>> Batches(const std::vector<Response>& plan) {
  std::vector<std::vector<std::string>> out;
  for (const Response& r : plan) out.push_back(r.names);
  return out;
}

using Plan = std::vector<std::vector<std::string>>;

TEST_CASE("ResponseBytes", "[fusion_planner]") {
  Response ar = AR("a", 6);
  ar.shapes = {{2, 3}, {4}, {}};  // 6 + 4 + 1 (scalar) elements
  ar.names = {"a", "b", "c"};
  CHECK(ResponseBytes(ar, 2) == 44);
  ar.dtype = DataType::kFloat64;
  CHECK(ResponseBytes(ar, 2) == 88);

  Response ag;
  ag.type = OpType::kAllgather;
  ag.dtype = DataType::kInt16;
  ag.names = {"x", "y"};
  ag.shapes = {{1, 3, 2}, {4}};
  ag.first_dims = {1, 2, 3, 4, 0, 1};  // tensor-major, set size 3
  // x: (1 + 2 + 3) rows * 6 elements * 2 bytes; y: (4 + 0 + 1) rows * 1 * 2.
  CHECK(ResponseBytes(ag, 3) == 72 + 10);
}

TEST_CASE("Threshold is inclusive, to the byte", "[fusion_planner]") {
  // Three 1 KiB allreduces.
  auto [threshold, expected] = GENERATE(table<int64_t, Plan>({
      {2047, {{"a"}, {"b"}, {"c"}}},
      {2048, {{"a", "b"}, {"c"}}},
      {2049, {{"a", "b"}, {"c"}}},
      {3071, {{"a", "b"}, {"c"}}},
      {3072, {{"a", "b", "c"}}},
      {0, {{"a"}, {"b"}, {"c"}}},
      {1023, {{"a"}, {"b"}, {"c"}}},
  }));
  std::vector<Response> in = {AR("a", 256), AR("b", 256), AR("c", 256)};
  std::vector<Response> plan = PlanFusion(in, threshold, SetSize);
  CHECK(Batches(plan) == expected);
  for (const Response& r : plan) CHECK(r.shapes.size() == r.names.size());
}

TEST_CASE("A response larger than the threshold is alone; smaller later ones still fuse",
          "[fusion_planner]") {
  std::vector<Response> in = {AR("a", 10), AR("big", 1000), AR("c", 10), AR("d", 10)};
  std::vector<Response> plan = PlanFusion(in, 120, SetSize);  // exactly a + c + d
  CHECK(Batches(plan) == Plan{{"a", "c", "d"}, {"big"}});
  CHECK(plan[0].shapes == std::vector<std::vector<int64_t>>{{10}, {10}, {10}});
}

TEST_CASE("Incompatible responses are not fused", "[fusion_planner]") {
  const std::vector<std::pair<const char*, std::function<void(Response&)>>> changes = {
      {"dtype", [](Response& r) { r.dtype = DataType::kFloat16; }},
      {"reduce op", [](Response& r) { r.reduce_op = ReduceOp::kMax; }},
      {"prescale", [](Response& r) { r.prescale_factor = 0.5; }},
      {"postscale", [](Response& r) { r.postscale_factor = 2.0; }},
      {"device", [](Response& r) { r.device = 0; }},
      {"process set", [](Response& r) { r.process_set_id = 1; }},
      {"group", [](Response& r) { r.group_key = "g"; }},
      {"type",
       [](Response& r) {
         r.type = OpType::kAllgather;
         r.first_dims = {4, 4};
       }},
  };
  const size_t i = GENERATE(range(size_t{0}, size_t{8}));
  REQUIRE(changes.size() == 8);
  INFO(changes[i].first);
  std::vector<Response> in = {AR("a", 4), AR("b", 4), AR("c", 4), AR("d", 4)};
  changes[i].second(in[1]);
  std::vector<Response> plan = PlanFusion(in, 1 << 20, SetSize);
  CHECK(Batches(plan) == Plan{{"a", "c", "d"}, {"b"}});
  // Scalar fields come from the batch's first response.
  CHECK(plan[0].dtype == DataType::kFloat32);
  CHECK(plan[1] == in[1]);
}

TEST_CASE("Other ops and errors pass through alone, in order", "[fusion_planner]") {
  Response bcast = AR("bc", 4);
  bcast.type = OpType::kBroadcast;
  Response err = AR("err", 4);
  err.error_code = absl::StatusCode::kInvalidArgument;
  err.error_message = "bad";
  Response bcast2 = bcast;
  bcast2.names = {"bc2"};
  std::vector<Response> in = {bcast, AR("a", 4), err, bcast2, AR("b", 4)};
  std::vector<Response> plan = PlanFusion(in, 1 << 20, SetSize);
  CHECK(Batches(plan) == Plan{{"bc"}, {"a", "b"}, {"err"}, {"bc2"}});
  CHECK(plan[2] == err);
  CHECK(plan[0] == bcast);
}

TEST_CASE("A group fuses as one unit beyond the threshold", "[fusion_planner]") {
  const int64_t threshold = GENERATE(0, 100, 1 << 20);
  std::vector<Response> in;
  in.push_back(AR("u1", 10));
  for (const char* n : {"g1", "g2", "g3"}) {
    Response r = AR(n, 1000);  // 4000 bytes each
    r.group_key = "grp";
    in.push_back(r);
  }
  in.push_back(AR("u2", 10));
  Response other = AR("h1", 10);
  other.group_key = "other";
  in.push_back(other);
  std::vector<Response> plan = PlanFusion(in, threshold, SetSize);
  if (threshold >= 80) {
    CHECK(Batches(plan) == Plan{{"u1", "u2"}, {"g1", "g2", "g3"}, {"h1"}});
  } else {
    CHECK(Batches(plan) == Plan{{"u1"}, {"g1", "g2", "g3"}, {"u2"}, {"h1"}});
  }
  for (const Response& r : plan) {
    if (r.names[0] == "g1") CHECK(r.group_key == "grp");
  }
}

TEST_CASE("Allgather bytes are the gathered size; first_dims concatenate tensor-major",
          "[fusion_planner]") {
  auto ag = [](const std::string& name, std::vector<int64_t> first_dims) {
    Response r;
    r.type = OpType::kAllgather;
    r.names = {name};
    r.shapes = {{first_dims[0], 4}};
    r.first_dims = std::move(first_dims);
    return r;
  };
  // Set 0 has 2 ranks: each gathers 4 rows * 4 floats = 64 bytes.
  std::vector<Response> in = {ag("x", {1, 3}), ag("y", {2, 2})};
  CHECK(ResponseBytes(in[0], 2) == 64);
  const int64_t threshold = GENERATE(127, 128);
  std::vector<Response> plan = PlanFusion(in, threshold, SetSize);
  if (threshold == 127) {
    CHECK(Batches(plan) == Plan{{"x"}, {"y"}});
  } else {
    REQUIRE(Batches(plan) == Plan{{"x", "y"}});
    CHECK(plan[0].first_dims == std::vector<int64_t>{1, 3, 2, 2});
    CHECK(plan[0].shapes == std::vector<std::vector<int64_t>>{{1, 4}, {2, 4}});
  }
}

TEST_CASE("Already fused responses fuse further, keeping order", "[fusion_planner]") {
  Response ab = AR("a", 4);
  ab.names = {"a", "b"};
  ab.shapes = {{4}, {5}};
  std::vector<Response> in = {ab, AR("c", 6)};
  std::vector<Response> plan = PlanFusion(in, 1 << 20, SetSize);
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].names == std::vector<std::string>{"a", "b", "c"});
  CHECK(plan[0].shapes == std::vector<std::vector<int64_t>>{{4}, {5}, {6}});
}

TEST_CASE("Many small responses fuse into threshold-sized batches in order", "[fusion_planner]") {
  const int count = GENERATE(0, 1, 7, 1000);
  std::vector<Response> in;
  std::vector<std::string> all;
  for (int i = 0; i < count; ++i) {
    all.push_back("t" + std::to_string(i));
    in.push_back(AR(all.back(), 256));  // 1 KiB
  }
  // 100 KiB batches hold 100 tensors each.
  std::vector<Response> plan = PlanFusion(in, 100 << 10, SetSize);
  CHECK(plan.size() == static_cast<size_t>((count + 99) / 100));
  std::vector<std::string> flat;
  for (const Response& r : plan) {
    CHECK(r.names.size() <= 100);
    CHECK(ResponseBytes(r, 2) <= (100 << 10));
    for (const std::string& n : r.names) flat.push_back(n);
  }
  CHECK(flat == all);
}

TEST_CASE("PlanFusionInto reuses its vector and plans exactly as PlanFusion", "[fusion_planner]") {
  // Successive plans of different shapes into one vector: big then small batches, other ops
  // over fused slots, allgathers over allreduces, nothing at all. Each must equal a fresh
  // plan, field for field; what lies past the returned length is only spare.
  auto ars = [](const std::string& prefix, int count, int64_t floats) {
    std::vector<Response> in;
    for (int i = 0; i < count; ++i) in.push_back(AR(prefix + std::to_string(i), floats + i));
    return in;
  };
  Response bcast = AR("bc", 4);
  bcast.type = OpType::kBroadcast;
  bcast.root_rank = 1;
  Response err = AR("err", 4);
  err.error_code = absl::StatusCode::kInvalidArgument;
  err.error_message = "bad";
  Response ag;
  ag.type = OpType::kAllgather;
  ag.names = {"ag"};
  ag.shapes = {{2, 3}};
  ag.first_dims = {2, 5};
  Response scaled = AR("scaled", 4);
  scaled.prescale_factor = 0.5;
  scaled.wire_dtype = 5;
  Response grouped = AR("g", 4);
  grouped.group_key = "grp";
  std::vector<std::vector<Response>> inputs = {
      ars("long.tensor.name.", 300, 1),
      ars("x", 3, 1),
      {bcast, err},
      {ag, AR("y", 2), ag, scaled, grouped},
      {},
      ars("long.tensor.name.", 120, 7),
  };
  inputs[3][2].names = {"ag2"};
  std::vector<Response> reused;
  for (const std::vector<Response>& in : inputs) {
    const std::vector<Response> fresh = PlanFusion(in, 1 << 20, SetSize);
    std::vector<const Response*> view;
    for (const Response& r : in) view.push_back(&r);
    const size_t k = PlanFusionInto(view, 1 << 20, SetSize, &reused);
    REQUIRE(k == fresh.size());
    REQUIRE(reused.size() >= k);
    for (size_t i = 0; i < k; ++i) {
      CHECK(reused[i] == fresh[i]);
      // Every field but the tensors is the batch's first response's.
      for (const Response& base : in) {
        if (base.names[0] != reused[i].names[0]) continue;
        Response header = reused[i];
        header.names = base.names;
        header.shapes = base.shapes;
        header.first_dims = base.first_dims;
        CHECK(header == base);
      }
    }
  }
}

}  // namespace
}  // namespace chorus::runtime
