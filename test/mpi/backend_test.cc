// MPI tier: MpiBackend and MpiController across the real ranks of the mpirun.
//
// Every rank runs every test case and GENERATE branch in the same order, because the calls are
// collective. Inputs differ per rank and every rank computes all ranks' inputs itself to build
// the expected result, so nothing is exchanged except through the code under test. Failures use
// CHECK (not REQUIRE) wherever the other ranks would otherwise be left in a collective.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <mpi.h>

#include "ops/cpu/reduce_kernels.h"
#include "ops/mpi/mpi_backend.h"
#include "ops/mpi/mpi_datatypes.h"
#include "runtime/mpi/mpi_controller.h"
#include "test/mpi/world.h"
#include "test/support/typed_values.h"

namespace chorus {
namespace {

#define CHECK_OK(expr)               \
  do {                               \
    const absl::Status st_ = (expr); \
    INFO(st_.ToString());            \
    CHECK(st_.ok());                 \
  } while (0)

// The world controller and a data plane over all ranks, created once (collectively) on first
// use. Destroyed after MPI_Finalize, which their destructors detect.
struct World {
  std::unique_ptr<runtime::MpiController> controller;
  std::unique_ptr<ops::CollectiveBackend> backend;
};

World& GetWorld() {
  static World world = [] {
    World w;
    absl::StatusOr<std::unique_ptr<runtime::MpiController>> c =
        runtime::MpiController::Create(nullptr);
    if (!c.ok()) return w;
    w.controller = std::move(*c);
    std::vector<int32_t> all(static_cast<size_t>(w.controller->size()));
    for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int32_t>(r);
    absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> b = w.controller->CreateBackend(all);
    if (b.ok()) w.backend = std::move(*b);
    return w;
  }();
  return world;
}

using testing::WorldRank;
using testing::WorldSize;

// ---------------------------------------------------------------------------------------------
// Typed element access through doubles.

int64_t ElemSize(DataType d) {
  switch (d) {
    case DataType::kUint8:
    case DataType::kInt8:
    case DataType::kBool:
      return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    default:
      return 8;
  }
}

using testing::Load;
using testing::Put;
using testing::Store;
using testing::Take;

bool IsHalf(DataType d) { return d == DataType::kFloat16 || d == DataType::kBfloat16; }

// Unit roundoff of the 16-bit formats.
double Epsilon(DataType d) {
  return d == DataType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
}

// Rank r's input element i: small integers (exact sums and products over <= 4 ranks in every
// integer type), quarter-integers for float32/64 (exact), non-dyadic values for the 16-bit
// floats (so that rounding happens), all as stored in the dtype.
double InputValue(DataType d, int rank, int64_t i) {
  const int64_t k = (i * 7 + rank * 13 + 3) % 17;
  double v;
  switch (d) {
    case DataType::kUint8:
      v = static_cast<double>(k % 5);
      break;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      v = static_cast<double>(k - 8) / 8.0 + 0.1 * (rank + 1);
      break;
    case DataType::kFloat32:
    case DataType::kFloat64:
      v = static_cast<double>(k - 8) * 0.25;
      break;
    default:
      v = static_cast<double>(k % 9 - 4);
      break;
  }
  std::vector<char> one(8);
  Store(d, one.data(), 0, v);
  return Load(d, one.data(), 0);
}

struct Expected {
  double value;
  double tolerance;  // 0: exact
};

Expected Reference(DataType d, ReduceOp op, int size, int64_t i) {
  double acc = InputValue(d, 0, i), abs_sum = std::fabs(acc);
  for (int r = 1; r < size; ++r) {
    const double x = InputValue(d, r, i);
    abs_sum += std::fabs(x);
    switch (op) {
      case ReduceOp::kSum:
        acc += x;
        break;
      case ReduceOp::kProduct:
        acc *= x;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, x);
        break;
      default:
        acc = std::max(acc, x);
        break;
    }
  }
  double tol = 0;
  if (IsHalf(d)) {
    // One rounding per combining step: |error| <= (size-1) * eps * (sum of |x|) for sums,
    // (size-1) * eps * |product| (to first order) for products; min/max are exact.
    if (op == ReduceOp::kSum) tol = 1.01 * (size - 1) * Epsilon(d) * abs_sum;
    if (op == ReduceOp::kProduct) tol = 1.01 * (size - 1) * Epsilon(d) * std::fabs(acc);
    // Products can fall into float16's subnormal range, where the error is absolute.
    if (op == ReduceOp::kProduct && d == DataType::kFloat16) tol += (size - 1) * 0x1p-25;
  }
  return {acc, tol};
}

// Checks buf[0..count) against the reference for elements [first, first+count) of the full
// vector; returns the number of mismatches (reporting the first few).
int CheckReduced(DataType d, ReduceOp op, const void* buf, int64_t first, int64_t count) {
  const int size = WorldSize();
  int bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    const Expected want = Reference(d, op, size, first + i);
    const double got = Load(d, buf, i);
    if (std::fabs(got - want.value) > want.tolerance && bad++ < 3) {
      FAIL_CHECK("element " << first + i << ": got " << got << ", want " << want.value << " +- "
                            << want.tolerance);
    }
  }
  return bad;
}

const DataType kReducible[] = {DataType::kUint8,    DataType::kInt8,    DataType::kInt16,
                               DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                               DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64};

// ---------------------------------------------------------------------------------------------

TEST_CASE("MpiController topology matches MPI", "[mpi][controller]") {
  World& w = GetWorld();
  REQUIRE(w.controller != nullptr);
  const Topology& t = w.controller->topology();
  CHECK(t.rank == WorldRank());
  CHECK(t.size == WorldSize());
  CHECK(w.controller->rank() == WorldRank());
  CHECK(w.controller->name() == "MPI");
  CHECK(w.controller->threads_multiple());  // test main asked for MPI_THREAD_MULTIPLE

  // Independent view of the hosts: ranks sharing this rank's hostname.
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::vector<char> hosts(static_cast<size_t>(t.size) * sizeof(host));
  MPI_Allgather(host, sizeof(host), MPI_CHAR, hosts.data(), sizeof(host), MPI_CHAR, MPI_COMM_WORLD);
  std::map<std::string, int> per_host;
  int lower_on_my_host = 0;
  for (int r = 0; r < t.size; ++r) {
    const std::string h(&hosts[static_cast<size_t>(r) * sizeof(host)]);
    ++per_host[h];
    if (h == host && r < t.rank) ++lower_on_my_host;
  }
  CHECK(t.local_size == per_host[host]);
  CHECK(t.local_rank == lower_on_my_host);
  CHECK(t.local_rank < t.local_size);
  CHECK(t.cross_rank < t.cross_size);
  bool same = true;
  for (const auto& [h, n] : per_host) same = same && n == per_host.begin()->second;
  CHECK(t.is_homogeneous == same);
  if (per_host.size() == 1) {
    CHECK(t.local_size * t.cross_size == t.size);
    CHECK(t.local_rank == t.rank);
    CHECK(t.cross_size == 1);
    CHECK(t.cross_rank == 0);
    CHECK(t.is_homogeneous);
  }
}

TEST_CASE("A second MpiController coexists with the first", "[mpi][controller]") {
  // MPI is already initialised (by main): Create must reuse it, and destroying the controller
  // must not finalize it.
  for (int round = 0; round < 2; ++round) {
    auto c = runtime::MpiController::Create(nullptr);
    REQUIRE(c.ok());
    CHECK((*c)->size() == WorldSize());
    CHECK_OK((*c)->Barrier());
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  CHECK(finalized == 0);
  // Also on an explicit communicator.
  MPI_Comm dup = MPI_COMM_NULL;
  REQUIRE(MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS);
  {
    auto c = runtime::MpiController::Create(&dup);
    REQUIRE(c.ok());
    CHECK((*c)->rank() == WorldRank());
    std::vector<uint64_t> bits = {~uint64_t{0}};
    CHECK_OK((*c)->AllreduceBitAnd(absl::MakeSpan(bits)));
    CHECK(bits[0] == ~uint64_t{0});
  }
  MPI_Comm_free(&dup);
}

TEST_CASE("GatherToRoot collects every rank's bytes in rank order", "[mpi][controller]") {
  World& w = GetWorld();
  REQUIRE(w.controller != nullptr);
  const int64_t base = GENERATE(0, 1, 7, 1001);
  const int rank = w.controller->rank(), size = w.controller->size();
  auto message = [base](int r) {
    // Rank 1 sends nothing when base is 0; bytes include NULs.
    std::string m(static_cast<size_t>(base * (r + 1) + (r == 1 ? 0 : r)), '\0');
    for (size_t j = 0; j < m.size(); ++j) m[j] = static_cast<char>((r * 31 + j * 7) % 256);
    return m;
  };
  std::vector<std::string> all = {"stale"};
  CHECK_OK(w.controller->GatherToRoot(message(rank), &all));
  if (rank == 0) {
    REQUIRE(all.size() == static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) CHECK(all[static_cast<size_t>(r)] == message(r));
  } else {
    CHECK(all.empty());
  }
}

TEST_CASE("BroadcastFromRoot replaces every rank's data with rank 0's", "[mpi][controller]") {
  World& w = GetWorld();
  REQUIRE(w.controller != nullptr);
  const size_t len = GENERATE(0u, 1u, 7u, 1001u, 300000u);
  std::string root_data(len, '\0');
  for (size_t j = 0; j < len; ++j) root_data[j] = static_cast<char>((j * 13 + 5) % 256);
  // Non-roots start with something longer or shorter, never equal.
  std::string data = w.controller->rank() == 0 ? root_data : std::string(len % 3 + 5, 'x');
  CHECK_OK(w.controller->BroadcastFromRoot(&data));
  CHECK(data.size() == len);
  CHECK(data == root_data);
}

TEST_CASE("AllreduceBitAnd ands bit vectors", "[mpi][controller]") {
  World& w = GetWorld();
  REQUIRE(w.controller != nullptr);
  const size_t words = GENERATE(0u, 1u, 3u, 129u);
  const int rank = w.controller->rank(), size = w.controller->size();
  auto bits_of = [](int r, size_t k) {
    // Rank r clears bit b of word k when (b + k) % (r + 2) == 0.
    uint64_t v = ~uint64_t{0};
    for (int b = 0; b < 64; ++b) {
      if ((static_cast<size_t>(b) + k) % static_cast<size_t>(r + 2) == 0) {
        v &= ~(uint64_t{1} << b);
      }
    }
    return v;
  };
  std::vector<uint64_t> bits(words);
  for (size_t k = 0; k < words; ++k) bits[k] = bits_of(rank, k);
  CHECK_OK(w.controller->AllreduceBitAnd(absl::MakeSpan(bits)));
  for (size_t k = 0; k < words; ++k) {
    uint64_t want = ~uint64_t{0};
    for (int r = 0; r < size; ++r) want &= bits_of(r, k);
    CHECK(bits[k] == want);
  }
  CHECK_OK(w.controller->Barrier());
}

TEST_CASE("MpiBackend Allreduce: every dtype, op, count, in and out of place", "[mpi][backend]") {
  World& w = GetWorld();
  REQUIRE(w.backend != nullptr);
  ops::CollectiveBackend& be = *w.backend;
  const DataType dtype = GENERATE(from_range(std::begin(kReducible), std::end(kReducible)));
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct);
  const int64_t count = GENERATE(0, 1, 7, 1001);
  const bool in_place = GENERATE(false, true);
  CAPTURE(static_cast<int>(dtype), static_cast<int>(op), count, in_place);
  CHECK(be.size() == WorldSize());
  CHECK(be.rank() == WorldRank());
  CHECK(be.name() == "MPI");

  const size_t bytes = static_cast<size_t>(count * ElemSize(dtype));
  std::vector<char> send(bytes + 8), recv(bytes + 8, '\x5a');
  for (int64_t i = 0; i < count; ++i) Store(dtype, send.data(), i, InputValue(dtype, be.rank(), i));
  if (in_place) recv = send;
  void* dst = recv.data();
  const void* src = in_place ? dst : send.data();
  if (count == 0 && in_place) src = dst = nullptr;  // empty tensors may have no storage
  CHECK_OK(be.Allreduce(src, dst, count, dtype, op));
  CHECK(CheckReduced(dtype, op, recv.data(), 0, count) == 0);
  // Bytes past the end untouched.
  for (size_t j = bytes; j < recv.size(); ++j) CHECK(recv[j] == (in_place ? send[j] : '\x5a'));
}

TEST_CASE("MpiBackend Allreduce rejects what it cannot reduce", "[mpi][backend]") {
  World& w = GetWorld();
  REQUIRE(w.backend != nullptr);
  float x[2] = {1, 2};
  CHECK(w.backend->Allreduce(x, x, 2, DataType::kFloat32, ReduceOp::kAverage).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(w.backend->Allreduce(x, x, 2, DataType::kFloat32, ReduceOp::kAdasum).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(w.backend->Allreduce(x, x, 2, DataType::kBool, ReduceOp::kSum).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(w.backend->Allreduce(x, x, 2, static_cast<DataType>(77), ReduceOp::kSum).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(w.backend->Allreduce(x, x, -1, DataType::kFloat32, ReduceOp::kSum).code() ==
        absl::StatusCode::kInvalidArgument);
  // Still usable afterwards.
  CHECK_OK(w.backend->Allreduce(x, x, 2, DataType::kFloat32, ReduceOp::kSum));
  CHECK(x[0] == static_cast<float>(WorldSize()));
  CHECK(x[1] == static_cast<float>(2 * WorldSize()));
}

TEST_CASE("MpiBackend Broadcast from the first and last rank", "[mpi][backend]") {
  World& w = GetWorld();
  REQUIRE(w.backend != nullptr);
  ops::CollectiveBackend& be = *w.backend;
  const int64_t bytes = GENERATE(0, 1, 7, 1001);
  const int root = GENERATE(0, -1) == 0 ? 0 : be.size() - 1;
  CAPTURE(bytes, root);
  std::vector<char> buf(static_cast<size_t>(bytes) + 4, '\x11');
  auto pattern = [root](int64_t j) { return static_cast<char>((j * 29 + root * 3 + 1) % 256); };
  if (be.rank() == root) {
    for (int64_t j = 0; j < bytes; ++j) buf[static_cast<size_t>(j)] = pattern(j);
  }
  CHECK_OK(be.Broadcast(bytes == 0 ? nullptr : buf.data(), bytes, root));
  int bad = 0;
  for (int64_t j = 0; j < bytes; ++j) bad += buf[static_cast<size_t>(j)] != pattern(j);
  CHECK(bad == 0);
  for (size_t j = static_cast<size_t>(bytes); j < buf.size(); ++j) CHECK(buf[j] == '\x11');
  CHECK(be.Broadcast(buf.data(), 1, be.size()).code() == absl::StatusCode::kInvalidArgument);
  CHECK(be.Broadcast(buf.data(), 1, -1).code() == absl::StatusCode::kInvalidArgument);
}

char GatherByte(int r, int64_t j) { return static_cast<char>((r * 31 + j * 7 + 3) % 256); }

TEST_CASE("MpiBackend Allgatherv with a different size on every rank", "[mpi][backend]") {
  World& w = GetWorld();
  REQUIRE(w.backend != nullptr);
  ops::CollectiveBackend& be = *w.backend;
  const int64_t base = GENERATE(0, 1, 7, 1001);
  const bool in_place = GENERATE(false, true);
  CAPTURE(base, in_place);
  const int size = be.size(), rank = be.rank();
  std::vector<int64_t> recv_bytes(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    // base 0 gives rank 0 nothing to send; the others send 3r bytes.
    recv_bytes[static_cast<size_t>(r)] = base * (r + 1) + 3 * r;
    offsets[static_cast<size_t>(r)] = total;
    total += recv_bytes[static_cast<size_t>(r)];
  }
  std::vector<char> recv(static_cast<size_t>(total) + 4, '\x77');
  std::vector<char> send(static_cast<size_t>(recv_bytes[static_cast<size_t>(rank)]));
  for (size_t j = 0; j < send.size(); ++j) send[j] = GatherByte(rank, static_cast<int64_t>(j));
  const void* src = send.data();
  if (in_place) {
    std::copy(send.begin(), send.end(), recv.begin() + offsets[static_cast<size_t>(rank)]);
    src = recv.data() + offsets[static_cast<size_t>(rank)];
  }
  CHECK_OK(be.Allgatherv(src, recv.data(), recv_bytes));
  int bad = 0;
  for (int r = 0; r < size; ++r) {
    for (int64_t j = 0; j < recv_bytes[static_cast<size_t>(r)]; ++j) {
      bad += recv[static_cast<size_t>(offsets[static_cast<size_t>(r)] + j)] != GatherByte(r, j);
    }
  }
  CHECK(bad == 0);
  for (size_t j = static_cast<size_t>(total); j < recv.size(); ++j) CHECK(recv[j] == '\x77');
}

TEST_CASE("MpiBackend v-collectives reject bad spans and counts beyond INT_MAX", "[mpi][backend]") {
  World& w = GetWorld();
  REQUIRE(w.backend != nullptr);
  ops::CollectiveBackend& be = *w.backend;
  const size_t n = static_cast<size_t>(be.size());
  char byte = 0;
  std::vector<int64_t> short_span(n - 1, 0), zeros(n, 0), huge(n, 0);
  huge[n - 1] = int64_t{1} << 31;  // one byte more than INT_MAX
  CHECK(be.Allgatherv(&byte, &byte, short_span).code() == absl::StatusCode::kInvalidArgument);
  const absl::Status st = be.Allgatherv(&byte, &byte, huge);
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(st.message().find("INT_MAX") != std::string::npos);
  CHECK(be.Alltoallv(&byte, zeros, zeros, &byte, zeros, short_span).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(be.Alltoallv(&byte, zeros, huge, &byte, zeros, zeros).code() ==
        absl::StatusCode::kInvalidArgument);
  // More than INT_MAX elements in total, for any number of ranks.
  std::vector<int64_t> big_counts(n, (int64_t{1} << 31) / static_cast<int64_t>(n) + 1);
  CHECK(be.ReduceScatter(&byte, &byte, big_counts, DataType::kUint8, ReduceOp::kSum).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(be.ReduceScatter(&byte, &byte, short_span, DataType::kUint8, ReduceOp::kSum).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK_OK(be.Barrier());
}

char AlltoallByte(int src, int dst, int64_t j) {
  return static_cast<char>((src * 67 + dst * 13 + j) % 256);
}
int64_t AlltoallBytes(int64_t base, int src, int dst) { return base + (src * 3 + dst) % 4; }

TEST_CASE("MpiBackend Alltoallv with uneven blocks and scattered offsets", "[mpi][backend]") {
  World& w = GetWorld();
  REQUIRE(w.backend != nullptr);
  ops::CollectiveBackend& be = *w.backend;
  const int64_t base = GENERATE(0, 1, 7, 1001);
  CAPTURE(base);
  const int size = be.size(), rank = be.rank();
  const size_t n = static_cast<size_t>(size);
  // Send blocks in rank order with a 1-byte gap after each; receive blocks in reverse rank
  // order with a 2-byte gap, so offsets are neither packed nor in rank order.
  std::vector<int64_t> sb(n), so(n), rb(n), ro(n);
  int64_t send_total = 0, recv_total = 0;
  for (int r = 0; r < size; ++r) {
    sb[static_cast<size_t>(r)] = AlltoallBytes(base, rank, r);
    so[static_cast<size_t>(r)] = send_total;
    send_total += sb[static_cast<size_t>(r)] + 1;
  }
  for (int r = size - 1; r >= 0; --r) {
    rb[static_cast<size_t>(r)] = AlltoallBytes(base, r, rank);
    ro[static_cast<size_t>(r)] = recv_total;
    recv_total += rb[static_cast<size_t>(r)] + 2;
  }
  std::vector<char> send(static_cast<size_t>(send_total), '\x01');
  std::vector<char> recv(static_cast<size_t>(recv_total), '\x33');
  for (int r = 0; r < size; ++r) {
    for (int64_t j = 0; j < sb[static_cast<size_t>(r)]; ++j) {
      send[static_cast<size_t>(so[static_cast<size_t>(r)] + j)] = AlltoallByte(rank, r, j);
    }
  }
  CHECK_OK(be.Alltoallv(send.data(), sb, so, recv.data(), rb, ro));
  int bad = 0, gaps_touched = 0;
  for (int r = 0; r < size; ++r) {
    const int64_t off = ro[static_cast<size_t>(r)], len = rb[static_cast<size_t>(r)];
    for (int64_t j = 0; j < len; ++j) {
      bad += recv[static_cast<size_t>(off + j)] != AlltoallByte(r, rank, j);
    }
    gaps_touched += recv[static_cast<size_t>(off + len)] != '\x33';
    gaps_touched += recv[static_cast<size_t>(off + len + 1)] != '\x33';
  }
  CHECK(bad == 0);
  CHECK(gaps_touched == 0);
}

TEST_CASE("MpiBackend ReduceScatter with uneven recv_counts", "[mpi][backend]") {
  World& w = GetWorld();
  REQUIRE(w.backend != nullptr);
  ops::CollectiveBackend& be = *w.backend;
  const DataType dtype = GENERATE(DataType::kInt32, DataType::kInt64, DataType::kFloat16,
                                  DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64);
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct);
  const int64_t base = GENERATE(0, 1, 7, 1001);
  const bool in_place = GENERATE(false, true);
  CAPTURE(static_cast<int>(dtype), static_cast<int>(op), base, in_place);
  const int size = be.size(), rank = be.rank();
  std::vector<int64_t> counts(static_cast<size_t>(size));
  int64_t total = 0, first = 0;
  for (int r = 0; r < size; ++r) {
    // Rank 1 receives nothing; the others uneven amounts.
    counts[static_cast<size_t>(r)] = r == 1 ? 0 : base + 2 * r;
    if (r < rank) first += counts[static_cast<size_t>(r)];
    total += counts[static_cast<size_t>(r)];
  }
  const int64_t elem = ElemSize(dtype);
  std::vector<char> send(static_cast<size_t>(total * elem) + 8);
  for (int64_t i = 0; i < total; ++i) Store(dtype, send.data(), i, InputValue(dtype, rank, i));
  const int64_t mine = counts[static_cast<size_t>(rank)];
  std::vector<char> recv = in_place ? send : std::vector<char>(static_cast<size_t>(mine * elem));
  CHECK_OK(be.ReduceScatter(in_place ? recv.data() : send.data(), recv.data(), counts, dtype, op));
  CHECK(CheckReduced(dtype, op, recv.data(), first, mine) == 0);
}

TEST_CASE("CreateBackend builds sub-communicators; non-members get null", "[mpi][controller]") {
  World& w = GetWorld();
  REQUIRE(w.controller != nullptr);
  const int rank = w.controller->rank(), size = w.controller->size();
  const std::vector<int32_t> ends =
      size == 1 ? std::vector<int32_t>{0} : std::vector<int32_t>{0, size - 1};
  auto sub = w.controller->CreateBackend(ends);
  REQUIRE(sub.ok());
  const bool member = rank == 0 || rank == size - 1;
  CHECK((*sub != nullptr) == member);
  if (*sub != nullptr) {
    ops::CollectiveBackend& be = **sub;
    CHECK(be.size() == static_cast<int>(ends.size()));
    CHECK(be.rank() == (rank == 0 ? 0 : 1));
    // Sum of world ranks over the set, and the set's rank order in an allgather.
    int64_t v[3] = {rank, 1, rank * 10};
    CHECK_OK(be.Allreduce(v, v, 3, DataType::kInt64, ReduceOp::kSum));
    CHECK(v[0] == size - 1);
    CHECK(v[1] == static_cast<int64_t>(ends.size()));
    CHECK(v[2] == (size - 1) * 10);
    int32_t mine = rank, both[2] = {-1, -1};
    const std::vector<int64_t> sizes(ends.size(), 4);
    CHECK_OK(be.Allgatherv(&mine, both, sizes));
    CHECK(both[0] == 0);
    CHECK(both[ends.size() - 1] == size - 1);
    CHECK_OK(be.Barrier());
  }
  // A singleton set on the last rank and the world again: still consistent afterwards.
  auto last = w.controller->CreateBackend(std::vector<int32_t>{size - 1});
  REQUIRE(last.ok());
  CHECK((*last != nullptr) == (rank == size - 1));
  if (*last != nullptr) {
    CHECK((*last)->size() == 1);
    double d = 2.5;
    CHECK_OK((*last)->Allreduce(&d, &d, 1, DataType::kFloat64, ReduceOp::kProduct));
    CHECK(d == 2.5);
  }
  // Invalid sets are rejected identically on every rank, without communicating.
  CHECK(w.controller->CreateBackend(std::vector<int32_t>{}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(w.controller->CreateBackend(std::vector<int32_t>{1, 0}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(w.controller->CreateBackend(std::vector<int32_t>{size}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // The world data plane is unaffected.
  REQUIRE(w.backend != nullptr);
  int32_t one = 1;
  CHECK_OK(w.backend->Allreduce(&one, &one, 1, DataType::kInt32, ReduceOp::kSum));
  CHECK(one == size);
}

TEST_CASE("MpiBackend on a caller's communicator returns MPI errors as Status", "[mpi][backend]") {
  MPI_Comm dup = MPI_COMM_NULL;
  REQUIRE(MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS);
  {
    ops::MpiBackend be(dup, /*owned=*/false);
    CHECK(be.comm() == dup);
    CHECK(be.size() == WorldSize());
    // The backend installed MPI_ERRORS_RETURN: a bad argument is a return code, not an abort.
    // (Argument checks are local, so no rank is left waiting.)
    const int rc = MPI_Bcast(nullptr, -1, MPI_BYTE, 0, be.comm());
    CHECK(rc != MPI_SUCCESS);
    const absl::Status st = ops::MpiErrorToStatus(rc, "MPI_Bcast(...)", "file.cc", 42);
    CHECK(st.code() == absl::StatusCode::kInternal);
    CHECK(st.message().find("MPI_Bcast(...)") != std::string::npos);
    CHECK(st.message().find("file.cc:42") != std::string::npos);
    uint16_t h[2] = {ops::FloatToHalf(1.5f), ops::FloatToHalf(-0.25f)};
    CHECK_OK(be.Allreduce(h, h, 2, DataType::kFloat16, ReduceOp::kSum));
    CHECK(ops::HalfToFloat(h[0]) == 1.5f * static_cast<float>(WorldSize()));
    CHECK(ops::HalfToFloat(h[1]) == -0.25f * static_cast<float>(WorldSize()));
  }
  // Not owned: the communicator is still ours to use and free.
  CHECK(MPI_Barrier(dup) == MPI_SUCCESS);
  MPI_Comm_free(&dup);
}

TEST_CASE("ToMpiDatatype and ToMpiOp map every type", "[mpi][datatypes]") {
  CHECK(ops::ToMpiDatatype(DataType::kFloat32) == MPI_FLOAT);
  CHECK(ops::ToMpiDatatype(DataType::kFloat64) == MPI_DOUBLE);
  CHECK(ops::ToMpiDatatype(DataType::kInt64) == MPI_INT64_T);
  CHECK(ops::ToMpiDatatype(DataType::kFloat16) == MPI_UINT16_T);
  CHECK(ops::ToMpiDatatype(DataType::kBfloat16) == MPI_UINT16_T);
  CHECK(ops::ToMpiDatatype(DataType::kBool) != MPI_DATATYPE_NULL);
  CHECK(ops::ToMpiDatatype(static_cast<DataType>(99)) == MPI_DATATYPE_NULL);
  for (DataType d : kReducible) {
    int type_size = 0;
    MPI_Type_size(ops::ToMpiDatatype(d), &type_size);
    CHECK(type_size == ElemSize(d));
  }
  auto sum = ops::ToMpiOp(DataType::kInt32, ReduceOp::kSum);
  REQUIRE(sum.ok());
  CHECK(*sum == MPI_SUM);
  auto h1 = ops::ToMpiOp(DataType::kFloat16, ReduceOp::kMax);
  auto h2 = ops::ToMpiOp(DataType::kFloat16, ReduceOp::kMax);
  auto b1 = ops::ToMpiOp(DataType::kBfloat16, ReduceOp::kMax);
  REQUIRE(h1.ok());
  REQUIRE(h2.ok());
  REQUIRE(b1.ok());
  CHECK(*h1 == *h2);  // created once
  CHECK(*h1 != *b1);
  CHECK(*h1 != MPI_MAX);
  int commute = 0;
  MPI_Op_commutative(*h1, &commute);
  CHECK(commute == 1);
  CHECK(ops::ToMpiOp(DataType::kBool, ReduceOp::kSum).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(ops::ToMpiOp(DataType::kFloat32, ReduceOp::kAverage).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chorus
