#include "runtime/negotiate/coordinator.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

#include "chorus/types.h"
#include "runtime/message.h"

namespace chorus::runtime {
namespace {

absl::Time At(int seconds) { return absl::FromUnixSeconds(1'000'000 + seconds); }

Request Req(const std::string& name, OpType type = OpType::kAllreduce,
            std::vector<int64_t> shape = {2, 3}) {
  Request r;
  r.type = type;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

// Every rank of 0..n-1 submits `request` (request_rank set), in rank order.
void AllSubmit(Coordinator& c, int n, const Request& request, absl::Time now = At(0)) {
  for (int32_t rank = 0; rank < n; ++rank) {
    Request r = request;
    r.request_rank = rank;
    c.AddRequests(rank, {r}, now);
  }
}

std::vector<std::string> Names(const ResponseList& list) {
  std::vector<std::string> names;
  for (const Response& r : list.responses) {
    for (const std::string& n : r.names) names.push_back(n);
  }
  return names;
}

Coordinator::Options NoStalls() { return Coordinator::Options{}; }

TEST_CASE("Ready ops come out in one order whatever the arrival order", "[coordinator]") {
  const int n = GENERATE(3, 4);
  const uint32_t seed = GENERATE(1u, 2u, 3u, 4u, 5u);
  std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
  std::mt19937 rng(seed);
  std::vector<std::vector<std::string>> orders(n, names);
  for (auto& order : orders) std::shuffle(order.begin(), order.end(), rng);

  // Two coordinators fed the same calls produce identical lists.
  Coordinator c1(n, NoStalls()), c2(n, NoStalls());
  for (Coordinator* c : {&c1, &c2}) {
    for (int32_t rank = 0; rank < n; ++rank) {
      std::vector<Request> reqs;
      for (const std::string& name : orders[rank]) {
        Request r = Req(name, OpType::kAllreduce, {static_cast<int64_t>(name[0]), 2});
        r.request_rank = rank;
        reqs.push_back(r);
      }
      c->AddRequests(rank, reqs, At(0));
    }
  }
  const ResponseList l1 = c1.BuildResponses(At(1));
  const ResponseList l2 = c2.BuildResponses(At(1));
  CHECK(l1.responses == l2.responses);
  CHECK(l1.joined_ranks == l2.joined_ranks);
  // Each op became ready when the last rank submitted it.
  CHECK(Names(l1) == orders[n - 1]);
  for (const Response& r : l1.responses) {
    REQUIRE(r.names.size() == 1);
    CHECK_FALSE(r.is_error());
    CHECK(r.type == OpType::kAllreduce);
    CHECK(r.shapes == std::vector<std::vector<int64_t>>{{static_cast<int64_t>(r.names[0][0]), 2}});
  }
  CHECK_FALSE(c1.HasPending());
  CHECK(c1.BuildResponses(At(2)).responses.empty());
}

TEST_CASE("Readiness order spans rounds", "[coordinator]") {
  Coordinator c(3, NoStalls());
  // Round 1: "x" and "y" are complete only on ranks 0 and 1; "z" everywhere.
  c.AddRequests(0, {Req("x"), Req("y"), Req("z")}, At(0));
  c.AddRequests(1, {Req("y"), Req("x"), Req("z")}, At(0));
  c.AddRequests(2, {Req("z")}, At(0));
  CHECK(Names(c.BuildResponses(At(0))) == std::vector<std::string>{"z"});
  CHECK(c.HasPending());
  // Round 2: rank 2 sends y then x.
  c.AddRequests(0, {}, At(1));
  c.AddRequests(1, {}, At(1));
  c.AddRequests(2, {Req("y"), Req("x")}, At(1));
  CHECK(Names(c.BuildResponses(At(1))) == std::vector<std::string>{"y", "x"});
  CHECK_FALSE(c.HasPending());
}

TEST_CASE("Response content of a ready op", "[coordinator]") {
  Coordinator c(2, NoStalls());
  Request r = Req("w", OpType::kAllreduce, {5});
  r.dtype = DataType::kFloat16;
  r.reduce_op = ReduceOp::kAverage;
  r.prescale_factor = 0.5;
  r.postscale_factor = 2.0;
  r.device = 1;
  AllSubmit(c, 2, r);
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 1);
  const Response& resp = list.responses[0];
  CHECK_FALSE(resp.is_error());
  CHECK(resp.names == std::vector<std::string>{"w"});
  CHECK(resp.dtype == DataType::kFloat16);
  CHECK(resp.reduce_op == ReduceOp::kAverage);
  CHECK(resp.prescale_factor == 0.5);
  CHECK(resp.postscale_factor == 2.0);
  CHECK(resp.device == 1);
  CHECK(resp.process_set_id == 0);
  CHECK(resp.shapes == std::vector<std::vector<int64_t>>{{5}});
  CHECK(resp.first_dims.empty());
}

struct MismatchCase {
  const char* label;
  OpType type;
  std::function<void(Request&)> change;  // applied to rank 1's request
  std::string expected;
};

TEST_CASE("Every mismatched field is an error naming tensor, field and each rank's value",
          "[coordinator]") {
  const std::vector<MismatchCase> cases = {
      {"type", OpType::kAllreduce, [](Request& r) { r.type = OpType::kBroadcast; },
       "allreduce of tensor 't': mismatched op type: rank 0 allreduce, rank 1 broadcast, "
       "rank 2 allreduce"},
      {"dtype", OpType::kAllreduce, [](Request& r) { r.dtype = DataType::kFloat64; },
       "allreduce of tensor 't': mismatched dtype: rank 0 float32, rank 1 float64, "
       "rank 2 float32"},
      {"shape", OpType::kAllreduce,
       [](Request& r) {
         r.shape = {3, 2};
       },
       "allreduce of tensor 't': mismatched shape: rank 0 [2, 3], rank 1 [3, 2], "
       "rank 2 [2, 3]"},
      {"reduce op", OpType::kAllreduce, [](Request& r) { r.reduce_op = ReduceOp::kMax; },
       "allreduce of tensor 't': mismatched reduce op: rank 0 sum, rank 1 max, rank 2 sum"},
      {"reducescatter op", OpType::kReducescatter, [](Request& r) { r.reduce_op = ReduceOp::kMin; },
       "reducescatter of tensor 't': mismatched reduce op: rank 0 sum, rank 1 min, "
       "rank 2 sum"},
      {"reducescatter shape", OpType::kReducescatter,
       [](Request& r) {
         r.shape = {4, 3};
       },
       "reducescatter of tensor 't': mismatched shape: rank 0 [2, 3], rank 1 [4, 3], "
       "rank 2 [2, 3]"},
      {"prescale", OpType::kAllreduce, [](Request& r) { r.prescale_factor = 0.25; },
       "allreduce of tensor 't': mismatched prescale factor: rank 0 1, rank 1 0.25, "
       "rank 2 1"},
      {"postscale", OpType::kAllreduce, [](Request& r) { r.postscale_factor = 3.5; },
       "allreduce of tensor 't': mismatched postscale factor: rank 0 1, rank 1 3.5, "
       "rank 2 1"},
      {"root", OpType::kBroadcast, [](Request& r) { r.root_rank = 2; },
       "broadcast of tensor 't': mismatched root rank: rank 0 0, rank 1 2, rank 2 0"},
      {"broadcast shape", OpType::kBroadcast, [](Request& r) { r.shape = {2}; },
       "broadcast of tensor 't': mismatched shape: rank 0 [2, 3], rank 1 [2], rank 2 [2, 3]"},
      {"device", OpType::kAllreduce, [](Request& r) { r.device = 0; },
       "allreduce of tensor 't': mismatched device: rank 0 cpu, rank 1 gpu:0, rank 2 cpu"},
      {"group", OpType::kAllreduce,
       [](Request& r) {
         r.group_key = "g";
         r.group_size = 1;
       },
       "allreduce of tensor 't': mismatched group: rank 0 '' (size 0), rank 1 'g' (size 1), "
       "rank 2 '' (size 0)"},
      {"allgather trailing dims", OpType::kAllgather,
       [](Request& r) {
         r.shape = {2, 4};
       },
       "allgather of tensor 't': mismatched shape (all dimensions but the first must agree): "
       "rank 0 [2, 3], rank 1 [2, 4], rank 2 [2, 3]"},
      {"allgather rank", OpType::kAllgather, [](Request& r) { r.shape = {6}; },
       "allgather of tensor 't': mismatched shape (all dimensions but the first must agree): "
       "rank 0 [2, 3], rank 1 [6], rank 2 [2, 3]"},
      {"alltoall trailing dims", OpType::kAlltoall,
       [](Request& r) {
         r.shape = {3, 5};
       },
       "alltoall of tensor 't': mismatched shape (all dimensions but the first must agree): "
       "rank 0 [2, 3], rank 1 [3, 5], rank 2 [2, 3]"},
      {"process set", OpType::kAllreduce, [](Request& r) { r.process_set_id = 1; },
       "allreduce of tensor 't': mismatched process set: rank 0 0, rank 1 1, rank 2 0"},
  };
  const size_t index = GENERATE(range(size_t{0}, size_t{16}));
  REQUIRE(cases.size() == 16);
  const MismatchCase& mc = cases[index];
  INFO(mc.label);
  Coordinator c(3, NoStalls());
  c.RegisterProcessSet(1, {0, 1, 2});
  for (int32_t rank = 0; rank < 3; ++rank) {
    Request r = Req("t", mc.type, {2, 3});
    if (mc.type == OpType::kAlltoall) r.shape = {3, 3};
    r.request_rank = rank;
    if (rank == 1) mc.change(r);
    c.AddRequests(rank, {r}, At(0));
  }
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 1);
  const Response& resp = list.responses[0];
  CHECK(resp.error_code == absl::StatusCode::kInvalidArgument);
  CHECK(resp.names == std::vector<std::string>{"t"});
  if (mc.type == OpType::kAlltoall) {
    // Rank 0 and 2 have 3 rows: rendered as [3, 3].
    std::string expected = mc.expected;
    for (size_t p = expected.find("[2, 3]"); p != std::string::npos; p = expected.find("[2, 3]")) {
      expected.replace(p, 6, "[3, 3]");
    }
    CHECK(resp.error_message == expected);
  } else {
    CHECK(resp.error_message == mc.expected);
  }
  CHECK_FALSE(c.HasPending());
}

TEST_CASE("Allgather fills first_dims in set-rank order and allows differing first dims",
          "[coordinator]") {
  Coordinator c(4, NoStalls());
  c.RegisterProcessSet(1, {1, 2, 3});
  // Set ranks: world 1, 2, 3 with 5, 0, 7 rows; submitted in reverse order.
  const std::vector<std::pair<int32_t, int64_t>> rows = {{3, 7}, {1, 5}, {2, 0}};
  for (const auto& [rank, first] : rows) {
    Request r = Req("g", OpType::kAllgather, {first, 4});
    r.process_set_id = 1;
    c.AddRequests(rank, {r}, At(0));
  }
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 1);
  const Response& resp = list.responses[0];
  CHECK_FALSE(resp.is_error());
  CHECK(resp.type == OpType::kAllgather);
  CHECK(resp.process_set_id == 1);
  CHECK(resp.first_dims == std::vector<int64_t>{5, 0, 7});
  CHECK(resp.shapes == std::vector<std::vector<int64_t>>{{5, 4}});  // the set's first rank
}

TEST_CASE("Allgather of a scalar is an error", "[coordinator]") {
  Coordinator c(2, NoStalls());
  AllSubmit(c, 2, Req("s", OpType::kAllgather, {}));
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].error_code == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(list.responses[0].error_message,
             Catch::StartsWith("allgather of tensor 's': a scalar"));
}

TEST_CASE("Broadcast root must be a rank of the set", "[coordinator]") {
  Coordinator c(3, NoStalls());
  c.RegisterProcessSet(1, {0, 2});
  Request r = Req("b", OpType::kBroadcast);
  r.root_rank = 1;  // a world rank outside the set {0, 2}
  r.process_set_id = 1;
  c.AddRequests(0, {r}, At(0));
  c.AddRequests(2, {r}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].error_message ==
        "broadcast of tensor 'b': root rank 1 is not in process set 1 [0, 2]");
  // A root of the set passes; the response carries its rank within the set.
  r.root_rank = 2;
  c.AddRequests(0, {r}, At(1));
  c.AddRequests(2, {r}, At(1));
  list = c.BuildResponses(At(1));
  REQUIRE(list.responses.size() == 1);
  CHECK_FALSE(list.responses[0].is_error());
  CHECK(list.responses[0].root_rank == 1);
}

TEST_CASE("Alltoall splits must cover the first dimension", "[coordinator]") {
  Coordinator c(2, NoStalls());
  Request r0 = Req("a2a", OpType::kAlltoall, {5, 2});
  r0.splits = {2, 3};
  Request r1 = Req("a2a", OpType::kAlltoall, {4, 2});
  r1.splits =
      GENERATE(std::vector<int64_t>{}, std::vector<int64_t>{1, 3}, std::vector<int64_t>{3, 2},
               std::vector<int64_t>{-1, 5}, std::vector<int64_t>{4});
  c.AddRequests(0, {r0}, At(0));
  c.AddRequests(1, {r1}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 1);
  const bool valid = r1.splits.empty() || r1.splits == std::vector<int64_t>{1, 3};
  CHECK(list.responses[0].is_error() == !valid);
  if (!valid) {
    CHECK_THAT(list.responses[0].error_message, Catch::Contains("rank 1 splits ["));
    CHECK_THAT(list.responses[0].error_message, Catch::Contains("for first dimension 4"));
    CHECK_THAT(list.responses[0].error_message, !Catch::Contains("rank 0"));
  }
}

TEST_CASE("A name sent twice by one rank is an error", "[coordinator]") {
  Coordinator c(2, NoStalls());
  c.AddRequests(0, {Req("x")}, At(0));
  c.AddRequests(0, {Req("x")}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].names == std::vector<std::string>{"x"});
  CHECK(list.responses[0].error_code == absl::StatusCode::kInvalidArgument);
  CHECK(list.responses[0].error_message ==
        "allreduce of tensor 'x': duplicate name 'x' already pending on rank 0");
  // Every rank fails "x", so the coordinator forgot it too.
  CHECK_FALSE(c.HasPending());

  // Within one list as well.
  c.AddRequests(1, {Req("y"), Req("y")}, At(1));
  list = c.BuildResponses(At(1));
  REQUIRE(list.responses.size() == 1);
  CHECK_THAT(list.responses[0].error_message, Catch::Contains("already pending on rank 1"));
}

TEST_CASE("Unknown process set and non-members fail at once", "[coordinator]") {
  Coordinator c(3, NoStalls());
  c.RegisterProcessSet(1, {0, 1});
  REQUIRE(c.ProcessSetRanks(1) != nullptr);
  CHECK(*c.ProcessSetRanks(1) == std::vector<int32_t>{0, 1});
  CHECK(c.ProcessSetRanks(9) == nullptr);

  Request unknown = Req("u");
  unknown.process_set_id = 9;
  Request outsider = Req("o");
  outsider.process_set_id = 1;
  c.AddRequests(2, {unknown, outsider}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 2);
  CHECK(list.responses[0].names == std::vector<std::string>{"u"});
  CHECK(list.responses[0].error_code == absl::StatusCode::kInvalidArgument);
  CHECK(list.responses[0].error_message == "allreduce of tensor 'u': unknown process set 9");
  CHECK(list.responses[1].names == std::vector<std::string>{"o"});
  CHECK(list.responses[1].error_code == absl::StatusCode::kInvalidArgument);
  CHECK(list.responses[1].error_message ==
        "allreduce of tensor 'o': rank 2 is not a member of process set 1 [0, 1]");
  CHECK_FALSE(c.HasPending());
}

TEST_CASE("Ops of a subset need only its members", "[coordinator]") {
  Coordinator c(4, NoStalls());
  c.RegisterProcessSet(3, {1, 3});
  Request r = Req("sub");
  r.process_set_id = 3;
  c.AddRequests(1, {r}, At(0));
  CHECK(c.BuildResponses(At(0)).responses.empty());
  c.AddRequests(3, {r}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 1);
  CHECK_FALSE(list.responses[0].is_error());
  CHECK(list.responses[0].process_set_id == 3);
}

Request Grouped(const std::string& name, const std::string& key, int32_t size) {
  Request r = Req(name);
  r.group_key = key;
  r.group_size = size;
  return r;
}

TEST_CASE("A group is emitted only when complete, adjacent, in first-arrival order",
          "[coordinator]") {
  Coordinator c(3, NoStalls());
  // Group g = {g1, g2, g3}; first arrival order (rank 0's): g2, g1, g3.
  c.AddRequests(0,
                {Grouped("g2", "g", 3), Req("solo1"), Grouped("g1", "g", 3), Grouped("g3", "g", 3)},
                At(0));
  c.AddRequests(1,
                {Grouped("g1", "g", 3), Grouped("g2", "g", 3), Req("solo1"), Grouped("g3", "g", 3)},
                At(0));
  // Rank 2: g1, g2 ready; solo1 ready; g3 not yet.
  c.AddRequests(2, {Grouped("g1", "g", 3), Req("solo1"), Grouped("g2", "g", 3)}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  CHECK(Names(list) == std::vector<std::string>{"solo1"});
  CHECK(c.HasPending());

  c.AddRequests(0, {Req("solo2")}, At(1));
  c.AddRequests(1, {Req("solo2")}, At(1));
  c.AddRequests(2, {Req("solo2"), Grouped("g3", "g", 3)}, At(1));
  list = c.BuildResponses(At(1));
  CHECK(Names(list) == std::vector<std::string>{"solo2", "g2", "g1", "g3"});
  for (size_t i = 1; i < list.responses.size(); ++i) {
    CHECK_FALSE(list.responses[i].is_error());
    CHECK(list.responses[i].group_key == "g");
  }
  CHECK_FALSE(c.HasPending());
}

TEST_CASE("One mismatch in a group fails every member", "[coordinator]") {
  Coordinator c(2, NoStalls());
  c.AddRequests(0, {Grouped("a", "g", 2), Grouped("b", "g", 2)}, At(0));
  Request bad = Grouped("b", "g", 2);
  bad.dtype = DataType::kInt32;
  c.AddRequests(1, {Grouped("a", "g", 2), bad}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(Names(list) == std::vector<std::string>{"a", "b"});
  for (const Response& r : list.responses) {
    CHECK(r.error_code == absl::StatusCode::kInvalidArgument);
  }
  CHECK(list.responses[1].error_message ==
        "allreduce of tensor 'b': mismatched dtype: rank 0 float32, rank 1 int32");
  CHECK(list.responses[0].error_message ==
        "allreduce of tensor 'a': group 'g' failed: allreduce of tensor 'b': mismatched dtype: "
        "rank 0 float32, rank 1 int32");
  CHECK_FALSE(c.HasPending());

  // The first member fails and completes the group last.
  c.AddRequests(0, {Grouped("a", "g", 2), Grouped("b", "g", 2)}, At(1));
  Request bad_a = Grouped("a", "g", 2);
  bad_a.shape = {9};
  c.AddRequests(1, {Grouped("b", "g", 2), bad_a}, At(1));
  list = c.BuildResponses(At(1));
  REQUIRE(Names(list) == std::vector<std::string>{"a", "b"});
  CHECK(list.responses[0].error_message ==
        "allreduce of tensor 'a': mismatched shape: rank 0 [2, 3], rank 1 [9]");
  CHECK(list.responses[1].error_message ==
        "allreduce of tensor 'b': group 'g' failed: allreduce of tensor 'a': mismatched shape: "
        "rank 0 [2, 3], rank 1 [9]");
  CHECK_FALSE(c.HasPending());
}

TEST_CASE("A group with more tensors than its size fails as a unit", "[coordinator]") {
  Coordinator c(2, NoStalls());
  c.AddRequests(0, {Grouped("a", "g", 2), Grouped("b", "g", 2), Grouped("c", "g", 2)}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  CHECK(Names(list) == std::vector<std::string>{"a", "b", "c"});
  for (const Response& r : list.responses) CHECK(r.is_error());
  CHECK_THAT(list.responses[2].error_message, Catch::Contains("got more tensors than its size"));
  CHECK_FALSE(c.HasPending());
}

Request JoinReq() {
  Request r;
  r.type = OpType::kJoin;
  r.name = "__join";
  return r;
}

TEST_CASE("Allreduce proceeds with joined ranks, with full shapes", "[coordinator]") {
  Coordinator c(3, NoStalls());
  // "p" is pending on ranks 0 and 1 when rank 2 joins: the join makes it ready.
  c.AddRequests(0, {Req("p", OpType::kAllreduce, {7})}, At(0));
  c.AddRequests(1, {Req("p", OpType::kAllreduce, {7})}, At(0));
  c.AddRequests(2, {JoinReq()}, At(0));
  CHECK(c.joined_ranks() == std::vector<int32_t>{2});
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(Names(list) == std::vector<std::string>{"p"});
  CHECK_FALSE(list.responses[0].is_error());
  CHECK(list.responses[0].shapes == std::vector<std::vector<int64_t>>{{7}});
  CHECK(list.joined_ranks == std::vector<int32_t>{2});

  // Later allreduce ops need only the live ranks.
  c.AddRequests(0, {Req("q", OpType::kAllreduce, {3, 3})}, At(1));
  CHECK(c.BuildResponses(At(1)).responses.empty());
  c.AddRequests(1, {Req("q", OpType::kAllreduce, {3, 3})}, At(1));
  list = c.BuildResponses(At(1));
  REQUIRE(Names(list) == std::vector<std::string>{"q"});
  CHECK(list.responses[0].shapes == std::vector<std::vector<int64_t>>{{3, 3}});
}

TEST_CASE("Non-allreduce ops fail while a member has joined", "[coordinator]") {
  const OpType type = GENERATE(OpType::kBroadcast, OpType::kAllgather, OpType::kAlltoall,
                               OpType::kReducescatter, OpType::kBarrier);
  Coordinator c(3, NoStalls());
  c.AddRequests(1, {JoinReq()}, At(0));
  c.AddRequests(0, {Req("n", type, {3, 3})}, At(0));
  CHECK(c.BuildResponses(At(0)).responses.empty());  // rank 2 has not submitted
  c.AddRequests(2, {Req("n", type, {3, 3})}, At(1));
  ResponseList list = c.BuildResponses(At(1));
  REQUIRE(Names(list) == std::vector<std::string>{"n"});
  CHECK(list.responses[0].error_code == absl::StatusCode::kInvalidArgument);
  CHECK(list.responses[0].error_message ==
        std::string(OpTypeName(type)) +
            " of tensor 'n': not supported while ranks [1] have joined (only allreduce runs "
            "with joined ranks)");
  CHECK(c.joined_ranks() == std::vector<int32_t>{1});
}

TEST_CASE("A pending non-allreduce op fails when a member joins", "[coordinator]") {
  Coordinator c(2, NoStalls());
  c.AddRequests(0, {Req("b", OpType::kBroadcast)}, At(0));
  c.AddRequests(1, {JoinReq()}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(Names(list) == std::vector<std::string>{"b"});
  CHECK_THAT(list.responses[0].error_message, Catch::Contains("ranks [1] have joined"));
}

TEST_CASE("Join completes when every rank joined, naming the last one", "[coordinator]") {
  Coordinator c(3, NoStalls());
  c.AddRequests(0, {JoinReq()}, At(0));
  c.AddRequests(1, {}, At(0));
  c.AddRequests(2, {JoinReq()}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  CHECK(list.responses.empty());
  CHECK(list.joined_ranks == std::vector<int32_t>{0, 2});
  CHECK(c.HasPending());

  c.AddRequests(0, {JoinReq()}, At(1));  // repeated join: ignored
  c.AddRequests(1, {JoinReq()}, At(1));
  list = c.BuildResponses(At(1));
  REQUIRE(list.responses.size() == 1);
  const Response& join = list.responses[0];
  CHECK(join.type == OpType::kJoin);
  CHECK_FALSE(join.is_error());
  CHECK(join.names == std::vector<std::string>{"__join"});
  CHECK(join.last_joined_rank == 1);
  CHECK(list.joined_ranks.empty());
  CHECK(c.joined_ranks().empty());
  CHECK_FALSE(c.HasPending());

  // After the join every rank is required again.
  c.AddRequests(0, {Req("after")}, At(2));
  c.AddRequests(1, {Req("after")}, At(2));
  CHECK(c.BuildResponses(At(2)).responses.empty());
  c.AddRequests(2, {Req("after")}, At(2));
  CHECK(Names(c.BuildResponses(At(2))) == std::vector<std::string>{"after"});
}

TEST_CASE("An allreduce whose whole set joined waits; other ops fail", "[coordinator]") {
  Coordinator c(3, NoStalls());
  c.RegisterProcessSet(1, {0, 1});
  Request r = Req("w");
  r.process_set_id = 1;
  Request b = Req("b", OpType::kBroadcast);
  b.process_set_id = 1;
  c.AddRequests(0, {r, b, JoinReq()}, At(0));
  c.AddRequests(1, {JoinReq()}, At(0));
  // The broadcast cannot wait for the join to finish: it fails once no live member is left.
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(Names(list) == std::vector<std::string>{"b"});
  CHECK_THAT(list.responses[0].error_message, Catch::Contains("ranks [0, 1] have joined"));
  CHECK(c.HasPending());
  CHECK(c.BuildResponses(At(1)).responses.empty());
}

Request AddSet(std::vector<int32_t> ranks) {
  Request r;
  r.type = OpType::kAddProcessSet;
  r.name = "__add";
  r.process_set_ranks = std::move(ranks);
  return r;
}

Request RemoveSet(int32_t id) {
  Request r;
  r.type = OpType::kRemoveProcessSet;
  r.name = "__remove";
  r.process_set_id = id;
  return r;
}

TEST_CASE("Add and remove process sets", "[coordinator]") {
  Coordinator c(3, NoStalls());
  c.RegisterProcessSet(4, {0, 2});
  c.AddRequests(0, {AddSet({1, 2})}, At(0));
  c.AddRequests(1, {AddSet({1, 2})}, At(0));
  CHECK(c.BuildResponses(At(0)).responses.empty());  // add is global: rank 2 missing
  c.AddRequests(2, {AddSet({1, 2})}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 1);
  CHECK_FALSE(list.responses[0].is_error());
  CHECK(list.responses[0].type == OpType::kAddProcessSet);
  CHECK(list.responses[0].new_process_set_id == 5);  // max known (4) + 1
  CHECK(list.responses[0].process_set_ranks == std::vector<int32_t>{1, 2});
  REQUIRE(c.ProcessSetRanks(5) != nullptr);
  CHECK(*c.ProcessSetRanks(5) == std::vector<int32_t>{1, 2});

  // The new set works at once; then an op pending on it fails when it is removed.
  Request on5 = Req("on5");
  on5.process_set_id = 5;
  c.AddRequests(1, {on5}, At(1));
  AllSubmit(c, 3, RemoveSet(5), At(1));
  list = c.BuildResponses(At(1));
  REQUIRE(Names(list) == std::vector<std::string>{"__remove", "on5"});
  CHECK_FALSE(list.responses[0].is_error());
  CHECK(list.responses[0].new_process_set_id == 5);
  CHECK(list.responses[1].error_message == "allreduce of tensor 'on5': process set 5 was removed");
  CHECK(c.ProcessSetRanks(5) == nullptr);
  CHECK_FALSE(c.HasPending());

  // Ids are not reused after a removal.
  AllSubmit(c, 3, AddSet({0}), At(2));
  list = c.BuildResponses(At(2));
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].new_process_set_id == 6);
}

TEST_CASE("Invalid process set changes are errors", "[coordinator]") {
  Coordinator c(3, NoStalls());
  SECTION("ranks differ between ranks") {
    c.AddRequests(0, {AddSet({0, 1})}, At(0));
    c.AddRequests(1, {AddSet({0, 1})}, At(0));
    c.AddRequests(2, {AddSet({0, 2})}, At(0));
    ResponseList list = c.BuildResponses(At(0));
    REQUIRE(list.responses.size() == 1);
    CHECK(list.responses[0].error_message ==
          "add_process_set of tensor '__add': mismatched process set ranks: rank 0 [0, 1], "
          "rank 1 [0, 1], rank 2 [0, 2]");
  }
  SECTION("bad rank lists") {
    const std::vector<int32_t> ranks =
        GENERATE(std::vector<int32_t>{}, std::vector<int32_t>{1, 0}, std::vector<int32_t>{1, 1},
                 std::vector<int32_t>{0, 3}, std::vector<int32_t>{-1});
    AllSubmit(c, 3, AddSet(ranks));
    ResponseList list = c.BuildResponses(At(0));
    REQUIRE(list.responses.size() == 1);
    CHECK(list.responses[0].error_code == absl::StatusCode::kInvalidArgument);
    CHECK(list.responses[0].error_message ==
          absl::StrCat("add_process_set of tensor '__add': process set ranks [",
                       absl::StrJoin(ranks, ", "),
                       "] must be non-empty, ascending, unique world ranks below 3"));
    CHECK(c.ProcessSetRanks(1) == nullptr);
  }
  SECTION("removing the global or an unknown set") {
    const int32_t id = GENERATE(0, 7);
    AllSubmit(c, 3, RemoveSet(id));
    ResponseList list = c.BuildResponses(At(0));
    REQUIRE(list.responses.size() == 1);
    CHECK(list.responses[0].error_code == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(list.responses[0].error_message,
               Catch::Contains(id == 0 ? "cannot be removed" : "unknown process set 7"));
    CHECK(c.ProcessSetRanks(0) != nullptr);
  }
}

TEST_CASE("Stall warning names submitted and missing ranks, again every warning time",
          "[coordinator]") {
  Coordinator::Options options;
  options.stall_warning_time = absl::Seconds(10);
  Coordinator c(4, options);
  c.AddRequests(0, {Req("slow")}, At(0));
  c.AddRequests(2, {Req("slow")}, At(3));
  c.AddRequests(0, {Req("fast")}, At(5));
  CHECK(c.CheckStalls(At(10)).empty());  // exactly the warning time: not longer
  std::vector<StallReport> reports = c.CheckStalls(At(11));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].name == "slow");
  CHECK(reports[0].type == OpType::kAllreduce);
  CHECK(reports[0].process_set_id == 0);
  CHECK(reports[0].submitted_ranks == std::vector<int32_t>{0, 2});
  CHECK(reports[0].missing_ranks == std::vector<int32_t>{1, 3});
  CHECK(reports[0].waited == absl::Seconds(11));
  CHECK(reports[0].report_number == 1);
  CHECK(c.CheckStalls(At(12)).empty());  // not again within the warning time
  reports = c.CheckStalls(At(16));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].name == "fast");
  CHECK(c.CheckStalls(At(20)).empty());
  reports = c.CheckStalls(At(21));  // a warning time after its first report: again
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].name == "slow");
  CHECK(reports[0].waited == absl::Seconds(21));
  CHECK(reports[0].report_number == 2);
  reports = c.CheckStalls(At(40));
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].report_number == 3);
  CHECK(reports[1].name == "fast");
  CHECK(reports[1].report_number == 2);
  // The flight recorder's view: every waiting op in arrival order, reports counted, nothing
  // changed (the next CheckStalls reports as it would have).
  const std::vector<StallReport> waiting = c.WaitingOps(At(40));
  REQUIRE(waiting.size() == 2);
  CHECK(waiting[0].name == "slow");
  CHECK(waiting[0].submitted_ranks == std::vector<int32_t>{0, 2});
  CHECK(waiting[0].missing_ranks == std::vector<int32_t>{1, 3});
  CHECK(waiting[0].waited == absl::Seconds(40));
  CHECK(waiting[0].report_number == 3);
  CHECK(waiting[1].name == "fast");
  CHECK(waiting[1].waited == absl::Seconds(35));
  CHECK(c.CheckStalls(At(40)).empty());
  // Once it completes it is forgotten.
  c.AddRequests(1, {Req("slow")}, At(41));
  c.AddRequests(3, {Req("slow")}, At(41));
  CHECK(c.BuildResponses(At(41)).responses.size() == 1);
  reports = c.CheckStalls(At(100));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].name == "fast");
  // Without a shutdown time nothing is failed.
  CHECK(c.BuildResponses(At(1000)).responses.empty());
  CHECK(c.HasPending());
}

TEST_CASE("Stall check disabled reports nothing", "[coordinator]") {
  Coordinator::Options options;
  options.stall_warning_time = absl::Seconds(1);
  options.stall_shutdown_time = absl::Seconds(2);
  options.stall_check_disabled = true;
  Coordinator c(2, options);
  c.AddRequests(0, {Req("x")}, At(0));
  CHECK(c.CheckStalls(At(100)).empty());
  CHECK(c.BuildResponses(At(100)).responses.empty());
}

TEST_CASE("Stall shutdown fails stalled ops with DeadlineExceeded", "[coordinator]") {
  Coordinator::Options options;
  options.stall_warning_time = absl::Seconds(5);
  options.stall_shutdown_time = absl::Seconds(30);
  Coordinator c(3, options);
  c.AddRequests(0, {Req("stuck"), Grouped("ga", "g", 2), Grouped("gb", "g", 2)}, At(0));
  c.AddRequests(1, {Req("stuck"), Grouped("ga", "g", 2)}, At(0));
  c.AddRequests(2, {Grouped("ga", "g", 2), Grouped("gb", "g", 2)}, At(0));  // ga held
  c.AddRequests(0, {Req("young")}, At(20));
  CHECK(c.BuildResponses(At(30)).responses.empty());
  ResponseList list = c.BuildResponses(At(31));
  REQUIRE(Names(list) == std::vector<std::string>{"stuck", "ga", "gb"});
  for (const Response& r : list.responses) {
    CHECK(r.error_code == absl::StatusCode::kDeadlineExceeded);
  }
  CHECK_THAT(list.responses[0].error_message,
             Catch::StartsWith("allreduce of tensor 'stuck': stalled for 31s"));
  CHECK_THAT(list.responses[0].error_message, Catch::Contains("missing ranks [2]"));
  CHECK_THAT(list.responses[2].error_message, Catch::Contains("missing ranks [1]"));
  CHECK_THAT(list.responses[1].error_message, Catch::Contains("group 'g' failed"));
  // The young op survives; the stalled ones are forgotten.
  CHECK(c.HasPending());
  c.AddRequests(1, {Req("young")}, At(32));
  c.AddRequests(2, {Req("young")}, At(32));
  CHECK(Names(c.BuildResponses(At(32))) == std::vector<std::string>{"young"});
  CHECK_FALSE(c.HasPending());
}

TEST_CASE("Barrier needs every member and carries its set", "[coordinator]") {
  Coordinator c(3, NoStalls());
  c.RegisterProcessSet(1, {0, 2});
  Request b = Req("bar", OpType::kBarrier, {});
  b.process_set_id = 1;
  c.AddRequests(2, {b}, At(0));
  CHECK(c.BuildResponses(At(0)).responses.empty());
  c.AddRequests(0, {b}, At(0));
  ResponseList list = c.BuildResponses(At(0));
  REQUIRE(list.responses.size() == 1);
  CHECK_FALSE(list.responses[0].is_error());
  CHECK(list.responses[0].type == OpType::kBarrier);
  CHECK(list.responses[0].process_set_id == 1);
}

}  // namespace
}  // namespace chorus::runtime
