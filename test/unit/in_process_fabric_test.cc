#include "test/support/in_process_fabric.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/types/span.h"
#include <catch2/catch.hpp>

#include "chorus/chorus.h"
#include "chorus/types.h"
#include "ops/collective_backend.h"
#include "ops/cpu/reduce_kernels.h"
#include "runtime/controller.h"

namespace chorus::testing {
namespace {

using ops::CollectiveBackend;
using runtime::Controller;

// Runs body(rank, controller) on one thread per rank and joins them. Catch2 assertions are not
// thread-safe, so bodies only record results (each into its own rank's slot) and the test
// checks them after RunRanks returns.
void RunRanks(InProcessFabric& fabric, const std::function<void(int, Controller&)>& body) {
  const int n = fabric.world_size();
  std::vector<std::unique_ptr<Controller>> controllers;
  for (int r = 0; r < n; ++r) controllers.push_back(fabric.CreateController(r));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { body(r, *controllers[r]); });
  }
  for (std::thread& t : threads) t.join();
}

std::vector<int32_t> AllRanks(int n) {
  std::vector<int32_t> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

TEST_CASE("Topology follows host_of_rank", "[fabric]") {
  struct Expected {
    int local_rank, local_size, cross_rank, cross_size;
  };
  SECTION("all ranks on one host by default") {
    InProcessFabric fabric(3);
    for (int r = 0; r < 3; ++r) {
      auto controller = fabric.CreateController(r);
      const Topology& t = controller->topology();
      CHECK(controller->rank() == r);
      CHECK(controller->size() == 3);
      CHECK(t.local_rank == r);
      CHECK(t.local_size == 3);
      CHECK(t.cross_rank == 0);
      CHECK(t.cross_size == 1);
      CHECK(t.is_homogeneous);
      CHECK(controller->name() == "in-process");
    }
  }
  SECTION("two hosts of two ranks, interleaved") {
    InProcessFabric fabric(4, {0, 1, 0, 1});
    const Expected expected[] = {{0, 2, 0, 2}, {0, 2, 1, 2}, {1, 2, 0, 2}, {1, 2, 1, 2}};
    for (int r = 0; r < 4; ++r) {
      auto controller = fabric.CreateController(r);
      const Topology& t = controller->topology();
      INFO("rank " << r);
      CHECK(t.rank == r);
      CHECK(t.size == 4);
      CHECK(t.local_rank == expected[r].local_rank);
      CHECK(t.local_size == expected[r].local_size);
      CHECK(t.cross_rank == expected[r].cross_rank);
      CHECK(t.cross_size == expected[r].cross_size);
      CHECK(t.is_homogeneous);
    }
  }
  SECTION("uneven hosts") {
    InProcessFabric fabric(5, {7, 7, 7, 3, 3});
    const Expected expected[] = {
        {0, 3, 0, 2}, {1, 3, 0, 2}, {2, 3, 0, 1}, {0, 2, 1, 2}, {1, 2, 1, 2}};
    for (int r = 0; r < 5; ++r) {
      auto controller = fabric.CreateController(r);
      const Topology& t = controller->topology();
      INFO("rank " << r);
      CHECK(t.local_rank == expected[r].local_rank);
      CHECK(t.local_size == expected[r].local_size);
      CHECK(t.cross_rank == expected[r].cross_rank);
      CHECK(t.cross_size == expected[r].cross_size);
      CHECK_FALSE(t.is_homogeneous);
    }
  }
}

TEST_CASE("Controller primitives", "[fabric]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  InProcessFabric fabric(n);
  std::vector<absl::Status> status(n);
  std::vector<std::vector<std::string>> gathered(n);
  std::vector<std::string> broadcast(n);
  std::vector<std::vector<uint64_t>> bits(n);
  RunRanks(fabric, [&](int r, Controller& c) {
    // Rank r sends r copies of 'a' + r (rank 0 sends the empty string).
    gathered[r] = {"stale"};
    absl::Status s = c.GatherToRoot(std::string(r, static_cast<char>('a' + r)), &gathered[r]);
    if (s.ok()) s = c.Barrier();
    broadcast[r] = r == 0 ? std::string("from root\0with nul", 18) : "rank " + std::to_string(r);
    if (s.ok()) s = c.BroadcastFromRoot(&broadcast[r]);
    // Word 0: all ones except bit r. Word 1: only bit 63 and bit r. Word 2: all ones.
    bits[r] = {~(uint64_t{1} << r), (uint64_t{1} << 63) | (uint64_t{1} << r), ~uint64_t{0}};
    if (s.ok()) s = c.AllreduceBitAnd(absl::MakeSpan(bits[r]));
    status[r] = s;
  });
  uint64_t low_bits = 0;
  for (int r = 0; r < n; ++r) low_bits |= uint64_t{1} << r;
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << " of " << n);
    REQUIRE(status[r].ok());
    if (r == 0) {
      REQUIRE(gathered[0].size() == static_cast<size_t>(n));
      for (int from = 0; from < n; ++from) {
        CHECK(gathered[0][from] == std::string(from, static_cast<char>('a' + from)));
      }
    } else {
      CHECK(gathered[r].empty());
    }
    CHECK(broadcast[r] == std::string("from root\0with nul", 18));
    CHECK(bits[r][0] == ~low_bits);
    CHECK(bits[r][1] == (n == 1 ? ((uint64_t{1} << 63) | 1) : (uint64_t{1} << 63)));
    CHECK(bits[r][2] == ~uint64_t{0});
  }
}

TEST_CASE("AgreeNoProblem fails every rank, the ranks without a problem naming those with one",
          "[fabric]") {
  // 66 ranks: the bits of ranks 64 and 65 are in a second word.
  const int n = GENERATE(1, 3, 66);
  const std::vector<int> bad = n == 1   ? std::vector<int>{}
                               : n == 3 ? std::vector<int>{1}
                                        : std::vector<int>{1, 65};
  InProcessFabric fabric(n);
  std::vector<std::vector<int>> found(n);
  std::vector<absl::Status> agreed(n), again(n);
  RunRanks(fabric, [&](int r, Controller& c) {
    const bool mine = std::find(bad.begin(), bad.end(), r) != bad.end();
    absl::StatusOr<std::vector<int>> ranks = runtime::RanksWithProblem(c, mine);
    if (ranks.ok()) found[r] = *ranks;
    agreed[r] = runtime::AgreeNoProblem(c, mine ? "rank " + std::to_string(r) + ": bad" : "",
                                        "its variable is bad");
    again[r] = runtime::AgreeNoProblem(c, "", "unused");
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << " of " << n);
    CHECK(found[r] == bad);
    CHECK(again[r].ok());
    if (bad.empty()) {
      CHECK(agreed[r].ok());
    } else if (std::find(bad.begin(), bad.end(), r) != bad.end()) {
      CHECK(agreed[r].message() == "rank " + std::to_string(r) + ": bad");
    } else if (n == 3) {
      CHECK(agreed[r].message() == "chorus init failed on rank 1 (rank " + std::to_string(r) +
                                       " is fine): its variable is bad; see its error");
    } else {
      CHECK(agreed[r].message() == "chorus init failed on ranks 1, 65 (rank " + std::to_string(r) +
                                       " is fine): its variable is bad; see their errors");
    }
  }
}

TEST_CASE("Many collectives in a row stay matched", "[fabric]") {
  const int n = GENERATE(2, 3);
  InProcessFabric fabric(n);
  std::vector<absl::Status> status(n);
  std::vector<std::vector<std::string>> seen(n);
  RunRanks(fabric, [&](int r, Controller& c) {
    for (int i = 0; i < 40 && status[r].ok(); ++i) {
      std::string data = r == 0 ? "round " + std::to_string(i) : "";
      status[r] = c.BroadcastFromRoot(&data);
      seen[r].push_back(data);
      if (status[r].ok() && i % 3 == 0) status[r] = c.Barrier();
    }
  });
  for (int r = 0; r < n; ++r) {
    REQUIRE(status[r].ok());
    REQUIRE(seen[r].size() == 40);
    for (int i = 0; i < 40; ++i) CHECK(seen[r][i] == "round " + std::to_string(i));
  }
}

TEST_CASE("A rank list disagreement fails CreateBackend on every rank", "[fabric]") {
  InProcessFabric fabric(3);
  std::vector<absl::Status> status(3);
  RunRanks(fabric, [&](int r, Controller& c) {
    std::vector<int32_t> ranks = r == 2 ? std::vector<int32_t>{0, 2} : std::vector<int32_t>{0, 1};
    status[r] = c.CreateBackend(ranks).status();
  });
  for (const absl::Status& s : status) CHECK(s.code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Malformed rank lists are rejected", "[fabric]") {
  const std::vector<int32_t> ranks =
      GENERATE(std::vector<int32_t>{}, std::vector<int32_t>{1, 0}, std::vector<int32_t>{0, 0},
               std::vector<int32_t>{0, 2}, std::vector<int32_t>{-1});
  InProcessFabric fabric(2);
  std::vector<absl::Status> status(2);
  RunRanks(fabric, [&](int r, Controller& c) { status[r] = c.CreateBackend(ranks).status(); });
  for (const absl::Status& s : status) CHECK(s.code() == absl::StatusCode::kInvalidArgument);
}

template <typename T>
T ReduceExpected(ReduceOp op, const std::vector<T>& values) {
  T acc = values[0];
  for (size_t i = 1; i < values.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
        acc = static_cast<T>(acc + values[i]);
        break;
      case ReduceOp::kProduct:
        acc = static_cast<T>(acc * values[i]);
        break;
      case ReduceOp::kMin:
        acc = values[i] < acc ? values[i] : acc;
        break;
      case ReduceOp::kMax:
        acc = values[i] > acc ? values[i] : acc;
        break;
      default:
        break;
    }
  }
  return acc;
}

// Small integers (exact in every type): products stay within int8 for 5 ranks.
template <typename T>
T Value(ReduceOp op, int rank, int64_t i) {
  if (op == ReduceOp::kProduct) return static_cast<T>((rank + i) % 2 == 0 ? 1 : 2);
  if (op == ReduceOp::kSum) return static_cast<T>((rank * 5 + i * 3) % 9 - 3);
  return static_cast<T>((rank * 7 + i * 3) % 11 - 5);
}

template <typename T>
void CheckAllreduce(DataType dtype) {
  const int n = GENERATE(1, 2, 3, 4, 5);
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct);
  const bool in_place = GENERATE(false, true);
  const int64_t count = GENERATE(0, 1, 37);
  CAPTURE(n, ReduceOpName(op), in_place, count);
  InProcessFabric fabric(n);
  std::vector<absl::Status> status(n);
  std::vector<std::vector<T>> out(n);
  RunRanks(fabric, [&](int r, Controller& c) {
    auto backend = c.CreateBackend(AllRanks(n));
    if (!backend.ok()) {
      status[r] = backend.status();
      return;
    }
    std::vector<T> in(count);
    for (int64_t i = 0; i < count; ++i) in[i] = Value<T>(op, r, i);
    out[r].assign(count, T{99});
    if (in_place) {
      out[r] = in;
      status[r] = (*backend)->Allreduce(out[r].data(), out[r].data(), count, dtype, op);
    } else {
      status[r] = (*backend)->Allreduce(in.data(), out[r].data(), count, dtype, op);
    }
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    REQUIRE(status[r].ok());
    REQUIRE(out[r].size() == static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      std::vector<T> contributions;
      for (int from = 0; from < n; ++from) contributions.push_back(Value<T>(op, from, i));
      CHECK(out[r][i] == ReduceExpected(op, contributions));
    }
  }
}

TEST_CASE("Allreduce float32", "[fabric]") { CheckAllreduce<float>(DataType::kFloat32); }
TEST_CASE("Allreduce float64", "[fabric]") { CheckAllreduce<double>(DataType::kFloat64); }
TEST_CASE("Allreduce int32", "[fabric]") { CheckAllreduce<int32_t>(DataType::kInt32); }
TEST_CASE("Allreduce int8", "[fabric]") { CheckAllreduce<int8_t>(DataType::kInt8); }
TEST_CASE("Allreduce int64", "[fabric]") { CheckAllreduce<int64_t>(DataType::kInt64); }

TEST_CASE("Allreduce bfloat16 sums", "[fabric]") {
  const int n = 4;
  InProcessFabric fabric(n);
  std::vector<absl::Status> status(n);
  std::vector<std::vector<uint16_t>> out(n);
  RunRanks(fabric, [&](int r, Controller& c) {
    auto backend = c.CreateBackend(AllRanks(n));
    if (!backend.ok()) {
      status[r] = backend.status();
      return;
    }
    std::vector<uint16_t> in(8);
    for (int i = 0; i < 8; ++i) in[i] = ops::FloatToBfloat16(static_cast<float>(r + i));
    out[r].resize(8);
    status[r] =
        (*backend)->Allreduce(in.data(), out[r].data(), 8, DataType::kBfloat16, ReduceOp::kSum);
  });
  for (int r = 0; r < n; ++r) {
    REQUIRE(status[r].ok());
    for (int i = 0; i < 8; ++i) CHECK(ops::Bfloat16ToFloat(out[r][i]) == 6.0f + 4.0f * i);
  }
}

TEST_CASE("Allreduce rejects what it cannot reduce on every rank", "[fabric]") {
  struct Case {
    DataType dtype;
    ReduceOp op;
    int64_t count_on_rank1;
  };
  const Case bad = GENERATE(
      Case{DataType::kBool, ReduceOp::kSum, 4}, Case{DataType::kFloat32, ReduceOp::kAverage, 4},
      Case{DataType::kFloat32, ReduceOp::kAdasum, 4}, Case{DataType::kFloat32, ReduceOp::kSum, 3});
  InProcessFabric fabric(2);
  std::vector<absl::Status> status(2);
  std::vector<std::vector<float>> out(2, std::vector<float>(4, -1.0f));
  RunRanks(fabric, [&](int r, Controller& c) {
    auto backend = c.CreateBackend(AllRanks(2));
    if (!backend.ok()) {
      status[r] = backend.status();
      return;
    }
    const std::vector<float> in(4, 1.0f);
    status[r] = (*backend)->Allreduce(in.data(), out[r].data(), r == 1 ? bad.count_on_rank1 : 4,
                                      bad.dtype, bad.op);
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(status[r].code() == absl::StatusCode::kInvalidArgument);
    CHECK(out[r] == std::vector<float>(4, -1.0f));  // outputs untouched on error
  }
}

TEST_CASE("Allgatherv concatenates in rank order", "[fabric]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  InProcessFabric fabric(n);
  std::vector<int64_t> recv_bytes(n);
  for (int r = 0; r < n; ++r) recv_bytes[r] = (r * 3) % 4;  // 0, 3, 2, 1, 0
  const int64_t total = std::accumulate(recv_bytes.begin(), recv_bytes.end(), int64_t{0});
  std::vector<absl::Status> status(n);
  std::vector<std::vector<uint8_t>> out(n);
  RunRanks(fabric, [&](int r, Controller& c) {
    auto backend = c.CreateBackend(AllRanks(n));
    if (!backend.ok()) {
      status[r] = backend.status();
      return;
    }
    std::vector<uint8_t> in(recv_bytes[r]);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(16 * r + i);
    out[r].assign(total, 0xee);
    status[r] = (*backend)->Allgatherv(in.data(), out[r].data(), recv_bytes);
  });
  std::vector<uint8_t> expected;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < recv_bytes[r]; ++i)
      expected.push_back(static_cast<uint8_t>(16 * r + i));
  }
  for (int r = 0; r < n; ++r) {
    REQUIRE(status[r].ok());
    CHECK(out[r] == expected);
  }
}

TEST_CASE("Broadcast copies the root's bytes", "[fabric]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  const int root = GENERATE_COPY(range(0, n));
  InProcessFabric fabric(n);
  std::vector<absl::Status> status(n);
  std::vector<std::vector<int32_t>> buffer(n);
  RunRanks(fabric, [&](int r, Controller& c) {
    auto backend = c.CreateBackend(AllRanks(n));
    if (!backend.ok()) {
      status[r] = backend.status();
      return;
    }
    buffer[r].resize(6);
    for (int i = 0; i < 6; ++i) buffer[r][i] = 100 * r + i;
    status[r] = (*backend)->Broadcast(buffer[r].data(), 6 * sizeof(int32_t), root);
  });
  for (int r = 0; r < n; ++r) {
    REQUIRE(status[r].ok());
    for (int i = 0; i < 6; ++i) CHECK(buffer[r][i] == 100 * root + i);
  }
}

TEST_CASE("Alltoallv exchanges blocks at their offsets", "[fabric]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  InProcessFabric fabric(n);
  // Rank s sends Bytes(s, d) bytes to rank d, each byte 16 * s + d.
  auto bytes_of = [](int s, int d) { return int64_t{(s + 2 * d) % 3}; };
  std::vector<absl::Status> status(n);
  std::vector<std::vector<uint8_t>> out(n);
  std::vector<std::vector<int64_t>> out_offsets(n);
  RunRanks(fabric, [&](int r, Controller& c) {
    auto backend = c.CreateBackend(AllRanks(n));
    if (!backend.ok()) {
      status[r] = backend.status();
      return;
    }
    // Send blocks in reverse rank order with one pad byte before each, to exercise offsets.
    std::vector<int64_t> send_bytes(n), send_offsets(n), recv_bytes(n), recv_offsets(n);
    std::vector<uint8_t> send;
    for (int d = n - 1; d >= 0; --d) {
      send.push_back(0xaa);
      send_offsets[d] = static_cast<int64_t>(send.size());
      send_bytes[d] = bytes_of(r, d);
      send.insert(send.end(), send_bytes[d], static_cast<uint8_t>(16 * r + d));
    }
    int64_t recv_total = 0;
    for (int s = 0; s < n; ++s) {
      recv_bytes[s] = bytes_of(s, r);
      recv_offsets[s] = recv_total;
      recv_total += recv_bytes[s];
    }
    out[r].assign(recv_total, 0xee);
    out_offsets[r] = recv_offsets;
    status[r] = (*backend)->Alltoallv(send.data(), send_bytes, send_offsets, out[r].data(),
                                      recv_bytes, recv_offsets);
  });
  for (int r = 0; r < n; ++r) {
    REQUIRE(status[r].ok());
    std::vector<uint8_t> expected;
    for (int s = 0; s < n; ++s) expected.insert(expected.end(), bytes_of(s, r), 16 * s + r);
    CHECK(out[r] == expected);
  }
}

TEST_CASE("Alltoallv with mismatched sizes fails on every rank", "[fabric]") {
  InProcessFabric fabric(2);
  std::vector<absl::Status> status(2);
  RunRanks(fabric, [&](int r, Controller& c) {
    auto backend = c.CreateBackend(AllRanks(2));
    if (!backend.ok()) {
      status[r] = backend.status();
      return;
    }
    std::vector<uint8_t> send(8, 1), recv(8, 0);
    const std::vector<int64_t> send_bytes = {2, 2}, offsets = {0, 4};
    // Rank 1 expects 3 bytes from rank 0, which sends 2.
    const std::vector<int64_t> recv_bytes = r == 1 ? std::vector<int64_t>{3, 2} : send_bytes;
    status[r] =
        (*backend)->Alltoallv(send.data(), send_bytes, offsets, recv.data(), recv_bytes, offsets);
  });
  CHECK(status[0].code() == absl::StatusCode::kInvalidArgument);
  CHECK(status[1].code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("ReduceScatter leaves block r on rank r", "[fabric]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  const bool in_place = GENERATE(false, true);
  InProcessFabric fabric(n);
  std::vector<int64_t> counts(n);
  for (int r = 0; r < n; ++r) counts[r] = (r + 1) % 3;  // 1, 2, 0, 1, 2
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  std::vector<int64_t> offset(n, 0);
  for (int r = 1; r < n; ++r) offset[r] = offset[r - 1] + counts[r - 1];
  auto value = [](int rank, int64_t i) { return static_cast<double>(rank * 10 + i); };
  std::vector<absl::Status> status(n);
  std::vector<std::vector<double>> out(n);
  RunRanks(fabric, [&](int r, Controller& c) {
    auto backend = c.CreateBackend(AllRanks(n));
    if (!backend.ok()) {
      status[r] = backend.status();
      return;
    }
    std::vector<double> in(total);
    for (int64_t i = 0; i < total; ++i) in[i] = value(r, i);
    if (in_place) {
      // Result written over the start of the input buffer.
      status[r] = (*backend)->ReduceScatter(in.data(), in.data(), counts, DataType::kFloat64,
                                            ReduceOp::kSum);
      out[r].assign(in.begin(), in.begin() + counts[r]);
    } else {
      out[r].assign(counts[r], -1.0);
      status[r] = (*backend)->ReduceScatter(in.data(), out[r].data(), counts, DataType::kFloat64,
                                            ReduceOp::kSum);
    }
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    REQUIRE(status[r].ok());
    REQUIRE(out[r].size() == static_cast<size_t>(counts[r]));
    for (int64_t j = 0; j < counts[r]; ++j) {
      double expected = 0;
      for (int from = 0; from < n; ++from) expected += value(from, offset[r] + j);
      CHECK(out[r][j] == expected);
    }
  }
}

TEST_CASE("Sub-communicators: members get backends, others null", "[fabric]") {
  const int n = 5;
  InProcessFabric fabric(n);
  const std::vector<int32_t> evens = {0, 2, 4};
  const std::vector<int32_t> odds = {1, 3};
  std::vector<absl::Status> status(n);
  std::vector<int> set_rank(n, -1), set_size(n, -1), other_null(n, 0);
  std::vector<std::string> backend_name(n);
  std::vector<int64_t> sum(n, 0), world_sum(n, 0);
  RunRanks(fabric, [&](int r, Controller& c) {
    auto even = c.CreateBackend(evens);
    auto odd = c.CreateBackend(odds);
    auto world = c.CreateBackend(AllRanks(n));
    if (!even.ok() || !odd.ok() || !world.ok()) {
      status[r] = absl::InternalError("CreateBackend failed");
      return;
    }
    std::unique_ptr<CollectiveBackend>& mine = r % 2 == 0 ? *even : *odd;
    other_null[r] = (r % 2 == 0 ? *odd : *even) == nullptr;
    if (mine == nullptr || *world == nullptr) {
      status[r] = absl::InternalError("member got no backend");
      return;
    }
    set_rank[r] = mine->rank();
    set_size[r] = mine->size();
    backend_name[r] = mine->name();
    // Interleave set, world and controller collectives; each communicator keeps its own order.
    const int64_t value = r + 1;
    absl::Status s = mine->Allreduce(&value, &sum[r], 1, DataType::kInt64, ReduceOp::kSum);
    if (s.ok()) s = c.Barrier();
    if (s.ok()) s = mine->Barrier();
    if (s.ok()) {
      s = (*world)->Allreduce(&value, &world_sum[r], 1, DataType::kInt64, ReduceOp::kSum);
    }
    status[r] = s;
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    REQUIRE(status[r].ok());
    CHECK(other_null[r]);
    CHECK(set_rank[r] == r / 2);
    CHECK(set_size[r] == (r % 2 == 0 ? 3 : 2));
    CHECK(backend_name[r] == "in-process");
    CHECK(sum[r] == (r % 2 == 0 ? 1 + 3 + 5 : 2 + 4));
    CHECK(world_sum[r] == 15);
  }
}

TEST_CASE("Kill fails later collectives with Unavailable naming the rank", "[fabric]") {
  const int n = 3;
  InProcessFabric fabric(n);
  std::vector<std::unique_ptr<Controller>> controllers;
  for (int r = 0; r < n; ++r) controllers.push_back(fabric.CreateController(r));
  // Backends are made before the kill: a set {0, 1} that loses rank 1 and a set {0, 2} that
  // keeps working.
  std::vector<std::unique_ptr<CollectiveBackend>> with_dead(n), without_dead(n);
  std::vector<absl::Status> status(n);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        auto a = controllers[r]->CreateBackend(std::vector<int32_t>{0, 1});
        auto b = controllers[r]->CreateBackend(std::vector<int32_t>{0, 2});
        status[r] = a.ok() && b.ok() ? absl::OkStatus() : absl::InternalError("create");
        if (a.ok()) with_dead[r] = std::move(*a);
        if (b.ok()) without_dead[r] = std::move(*b);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  for (const absl::Status& s : status) REQUIRE(s.ok());

  fabric.Kill(1);

  // Survivors, on the world and on a set holding rank 1.
  const absl::Status world0 = controllers[0]->Barrier();
  const absl::Status world2 = controllers[2]->Barrier();
  const int64_t one = 1;
  int64_t result = 0;
  const absl::Status set0 =
      with_dead[0]->Allreduce(&one, &result, 1, DataType::kInt64, ReduceOp::kSum);
  // The killed rank itself.
  std::string data;
  const absl::Status own = controllers[1]->BroadcastFromRoot(&data);
  for (const absl::Status& s : {world0, world2, set0, own}) {
    CHECK(s.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(s.message()), Catch::Contains("rank 1 lost"));
  }

  // A set without rank 1 still works.
  std::vector<int64_t> sums(n, 0);
  std::vector<std::thread> threads;
  for (int r : {0, 2}) {
    threads.emplace_back([&, r] {
      const int64_t value = 10 * (r + 1);
      status[r] = without_dead[r]->Allreduce(&value, &sums[r], 1, DataType::kInt64, ReduceOp::kSum);
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(status[0].ok());
  CHECK(status[2].ok());
  CHECK(sums[0] == 40);
  CHECK(sums[2] == 40);
}

TEST_CASE("Kill unblocks ranks waiting in a collective", "[fabric]") {
  const int n = GENERATE(2, 3, 4);
  const int victim = GENERATE_COPY(range(0, n));
  InProcessFabric fabric(n);
  std::vector<std::unique_ptr<Controller>> controllers;
  for (int r = 0; r < n; ++r) controllers.push_back(fabric.CreateController(r));
  // Every rank but the victim enters a barrier the victim never joins, so none can return
  // before the kill. Whether a thread is already waiting or arrives after Kill, the result must
  // be the same: Unavailable naming the victim.
  std::vector<absl::Status> status(n);
  std::vector<absl::Notification> started(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    threads.emplace_back([&, r] {
      started[r].Notify();
      status[r] = controllers[r]->Barrier();
    });
  }
  for (int r = 0; r < n; ++r) {
    if (r != victim) started[r].WaitForNotification();
  }
  fabric.Kill(victim);
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    INFO("rank " << r);
    CHECK(status[r].code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(status[r].message()),
               Catch::Contains("rank " + std::to_string(victim) + " lost"));
  }
}

TEST_CASE("Controllers and backends outlive the fabric object", "[fabric]") {
  std::unique_ptr<Controller> controller;
  std::unique_ptr<CollectiveBackend> backend;
  {
    InProcessFabric fabric(1);
    controller = fabric.CreateController(0);
    auto created = controller->CreateBackend(std::vector<int32_t>{0});
    REQUIRE(created.ok());
    backend = std::move(*created);
  }
  REQUIRE(backend != nullptr);
  const float in[2] = {1.5f, -2.0f};
  float out[2] = {0, 0};
  CHECK(backend->Allreduce(in, out, 2, DataType::kFloat32, ReduceOp::kMax).ok());
  CHECK(out[0] == 1.5f);
  CHECK(out[1] == -2.0f);
  CHECK(controller->Barrier().ok());
}

}  // namespace
}  // namespace chorus::testing
