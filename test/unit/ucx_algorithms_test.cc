// Unit tier: the UCX collective algorithms (ops/ucx/algorithms/) and UcxBackend over the
// in-memory transport, 1-5 ranks as threads. Each rank's inputs are prepared before the threads
// start and every check runs on the main thread after they join (Catch2 is not thread-safe).
// Expected values are computed independently of the code under test; reductions must also be
// bitwise identical on every rank.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "ops/cpu/reduce_kernels.h"
#include "ops/ucx/algorithms/binomial_broadcast.h"
#include "ops/ucx/algorithms/chain_broadcast.h"
#include "ops/ucx/algorithms/common.h"
#include "ops/ucx/algorithms/dissemination_barrier.h"
#include "ops/ucx/algorithms/pairwise_alltoallv.h"
#include "ops/ucx/algorithms/recursive_doubling_allreduce.h"
#include "ops/ucx/algorithms/ring_allgatherv.h"
#include "ops/ucx/algorithms/ring_allreduce.h"
#include "ops/ucx/algorithms/ring_reduce_scatter.h"
#include "ops/ucx/tag_transport_view.h"
#include "ops/ucx/testing/in_memory_transport.h"
#include "ops/ucx/ucx_backend.h"
#include "test/support/rank_failures.h"
#include "test/support/sanitized.h"
#include "test/support/typed_values.h"

namespace chorus {
namespace {

using ops::TagTransport;
using Bytes = std::vector<char>;

// Runs fn(rank, transport) on one thread per rank over a fresh in-memory fabric and returns
// every rank's status. A rank's transport is destroyed when its fn returns (so the fabric's
// deadlock detection sees ranks that left).
std::vector<absl::Status> RunRanks(int n, const std::function<absl::Status(int, TagTransport&)>& fn,
                                   ops::testing::InMemoryFabric* fabric_out = nullptr) {
  ops::testing::InMemoryFabric fabric(n);
  std::vector<std::unique_ptr<TagTransport>> transports;
  for (int r = 0; r < n; ++r) transports.push_back(fabric.CreateTransport(r));
  std::vector<absl::Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      status[static_cast<size_t>(r)] = fn(r, *transports[static_cast<size_t>(r)]);
      transports[static_cast<size_t>(r)].reset();
    });
  }
  for (std::thread& t : threads) t.join();
  return status;
}

using testing::CheckAllOk;

// ---------------------------------------------------------------------------------------------
// Typed element access through doubles.

using testing::Load;
using testing::Put;
using testing::Store;
using testing::Take;

int64_t ElemSize(DataType d) { return static_cast<int64_t>(DataTypeSize(d)); }
bool IsHalf(DataType d) { return d == DataType::kFloat16 || d == DataType::kBfloat16; }

// Rank r's element i: small integers (sums and products over <= 5 ranks stay exact in every
// type but uint8/int8, whose products wrap identically in the reference), quarter-integers for
// float32/64 (exact), non-dyadic values for the 16-bit floats (so that rounding happens).
double InputValue(DataType d, int rank, int64_t i) {
  const int64_t k = (i * 7 + rank * 13 + 3) % 17;
  switch (d) {
    case DataType::kUint8:
      return static_cast<double>(k % 4);
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return static_cast<double>(k - 8) / 8.0 + 0.1 * (rank + 1);
    case DataType::kFloat32:
    case DataType::kFloat64:
      return static_cast<double>(k - 8) * 0.25;
    default:
      return static_cast<double>(k % 7 - 3);
  }
}

Bytes MakeInput(DataType d, int rank, int64_t first, int64_t count) {
  Bytes b(static_cast<size_t>(count * ElemSize(d)));
  for (int64_t i = 0; i < count; ++i) Store(d, b.data(), i, InputValue(d, rank, first + i));
  return b;
}

// The reduction of element i over `size` ranks: exact types fold the stored values in rank
// order with the dtype's own wrap-around arithmetic (any order gives the same result); the
// 16-bit floats get a double reference and a rounding tolerance.
struct Expected {
  double value;
  double tolerance;
};

// Rank r's element i as stored in the dtype (rounded for the 16-bit floats).
double Stored(DataType d, int rank, int64_t i) {
  char one[8];
  Store(d, one, 0, InputValue(d, rank, i));
  return Load(d, one, 0);
}

Expected Reference(DataType d, ReduceOp op, int size, int64_t i) {
  if (!IsHalf(d)) {
    double acc = Stored(d, 0, i);
    for (int r = 1; r < size; ++r) {
      // Integer wrap-around done by hand, independent of ReduceInto.
      const double b = Stored(d, r, i);
      double v = 0;
      switch (op) {
        case ReduceOp::kSum:
          v = acc + b;
          break;
        case ReduceOp::kProduct:
          v = acc * b;
          break;
        case ReduceOp::kMin:
          v = std::min(acc, b);
          break;
        default:
          v = std::max(acc, b);
          break;
      }
      if (d == DataType::kUint8) v = static_cast<uint8_t>(static_cast<int64_t>(v));
      if (d == DataType::kInt8) v = static_cast<int8_t>(static_cast<int64_t>(v));
      acc = v;
    }
    return {acc, 0.0};
  }
  const double eps = d == DataType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  double acc = Stored(d, 0, i), abs_sum = std::fabs(acc);
  for (int r = 1; r < size; ++r) {
    const double x = Stored(d, r, i);
    abs_sum += std::fabs(x);
    if (op == ReduceOp::kSum) acc += x;
    if (op == ReduceOp::kProduct) acc *= x;
    if (op == ReduceOp::kMin) acc = std::min(acc, x);
    if (op == ReduceOp::kMax) acc = std::max(acc, x);
  }
  double tol = 0;
  if (op == ReduceOp::kSum) tol = 1.01 * (size - 1) * eps * abs_sum;
  if (op == ReduceOp::kProduct) tol = 1.01 * (size - 1) * eps * std::fabs(acc) + size * 0x1p-24;
  return {acc, tol};
}

// Mismatches of buf (elements [first, first + count) of the full vector) against Reference.
int CountWrong(DataType d, ReduceOp op, int size, const Bytes& buf, int64_t first, int64_t count) {
  int bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    const Expected want = Reference(d, op, size, first + i);
    const double got = Load(d, buf.data(), i);
    if (std::fabs(got - want.value) > want.tolerance && bad++ < 3) {
      UNSCOPED_INFO("element " << first + i << ": got " << got << ", want " << want.value << " +- "
                               << want.tolerance);
    }
  }
  return bad;
}

const DataType kReducible[] = {DataType::kUint8,    DataType::kInt8,    DataType::kInt16,
                               DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                               DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64};

enum class Algo { kRing, kRecursiveDoubling };

// Runs one allreduce on every rank and checks values and cross-rank bit equality.
void CheckAllreduce(int n, Algo algo, DataType dtype, ReduceOp op, int64_t count, bool in_place,
                    ops::ucx::RingOptions ring) {
  CAPTURE(n, static_cast<int>(algo), DataTypeName(dtype), ReduceOpName(op), count, in_place,
          ring.piece_bytes, ring.depth);
  const auto reduction = ops::ucx::Reduction::Of("test", dtype, op);
  REQUIRE(reduction.ok());
  const size_t bytes = static_cast<size_t>(count * ElemSize(dtype));
  std::vector<Bytes> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    send[static_cast<size_t>(r)] = MakeInput(dtype, r, 0, count);
    send[static_cast<size_t>(r)].resize(bytes + 8, '\x3c');  // a tail nobody may touch
    recv[static_cast<size_t>(r)] = in_place ? send[static_cast<size_t>(r)] : Bytes(bytes + 8, 'z');
  }
  const auto status = RunRanks(n, [&](int r, TagTransport& t) {
    Bytes& out = recv[static_cast<size_t>(r)];
    const void* in = in_place ? out.data() : send[static_cast<size_t>(r)].data();
    if (algo == Algo::kRing) {
      return ops::ucx::RingAllreduce(&t, ring).Run(in, out.data(), count, *reduction, 5);
    }
    return ops::ucx::RecursiveDoublingAllreduce(&t).Run(in, out.data(), count, *reduction, 5);
  });
  CheckAllOk(status);
  CHECK(CountWrong(dtype, op, n, recv[0], 0, count) == 0);
  for (int r = 0; r < n; ++r) {
    const Bytes& got = recv[static_cast<size_t>(r)];
    CHECK(std::memcmp(got.data(), recv[0].data(), bytes) == 0);  // bitwise identical
    for (size_t j = bytes; j < got.size(); ++j) CHECK(got[j] == (in_place ? '\x3c' : 'z'));
  }
  // Out of place, the input is only read.
  if (!in_place) {
    for (int r = 0; r < n; ++r) {
      const Bytes& in = send[static_cast<size_t>(r)];
      CHECK(Bytes(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(bytes)) ==
            MakeInput(dtype, r, 0, count));
    }
  }
}

TEST_CASE("UCX allreduce algorithms: every dtype, op, rank count and odd sizes",
          "[ucx][algorithms]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  const Algo algo = GENERATE(Algo::kRing, Algo::kRecursiveDoubling);
  const DataType dtype = GENERATE(from_range(std::begin(kReducible), std::end(kReducible)));
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct);
  const int64_t count = GENERATE(0, 1, 7, 133);
  const bool in_place = GENERATE(false, true);
  // Pieces of 3 elements' worth of bytes plus one: never divides a block evenly.
  CheckAllreduce(n, algo, dtype, op, count, in_place, {3 * ElemSize(dtype) + 1, 2});
}

TEST_CASE("UCX ring allreduce of a million elements, pipelined", "[ucx][algorithms][large]") {
  const int n = GENERATE(from_range(chorus::testing::FullOrSanitized<int>({2, 3, 5}, {3})));
  const DataType dtype = GENERATE(DataType::kFloat32, DataType::kFloat16, DataType::kInt32);
  const ReduceOp op = dtype == DataType::kInt32 ? ReduceOp::kMax : ReduceOp::kSum;
  const bool in_place =
      GENERATE(from_range(chorus::testing::FullOrSanitized<int>({0, 1}, {1}))) != 0;
  // 1 MiB pieces with 3 in flight, or pieces of 64 KiB + 6 bytes (never whole elements of
  // float32, never dividing a block) one at a time.
  const bool small_pieces = GENERATE(false, true);
  const ops::ucx::RingOptions ring = small_pieces ? ops::ucx::RingOptions{65536 + 6, 1}
                                                  : ops::ucx::RingOptions{int64_t{1} << 20, 3};
  CheckAllreduce(n, Algo::kRing, dtype, op, 1000003, in_place, ring);
}

TEST_CASE("UCX recursive doubling: identical bits when op(a, b) != op(b, a)", "[ucx][algorithms]") {
  // min(+0, -0) keeps the first operand and a NaN in the first operand stays while one in the
  // second is dropped (ops/cpu/reduce_kernels.cc): partners that combined in different operand
  // orders would end with different bits.
  const int n = GENERATE(2, 3, 5, 6, 7);
  const bool ring = GENERATE(false, true);
  CAPTURE(n, ring);
  const auto reduction = ops::ucx::Reduction::Of("test", DataType::kFloat32, ReduceOp::kMin);
  REQUIRE(reduction.ok());
  const int64_t count = 12;
  std::vector<std::vector<float>> buf(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) {
      float v = (r + i) % 2 == 0 ? 0.0f : -0.0f;
      if (i % 3 == 2 && r % 2 == 1) v = std::nanf("");
      buf[static_cast<size_t>(r)].push_back(v);
    }
  }
  CheckAllOk(RunRanks(n, [&](int r, TagTransport& t) {
    float* b = buf[static_cast<size_t>(r)].data();
    if (ring) return ops::ucx::RingAllreduce(&t, {4, 2}).Run(b, b, count, *reduction, 1);
    return ops::ucx::RecursiveDoublingAllreduce(&t).Run(b, b, count, *reduction, 1);
  }));
  for (int r = 1; r < n; ++r) {
    CHECK(std::memcmp(buf[static_cast<size_t>(r)].data(), buf[0].data(), count * sizeof(float)) ==
          0);
  }
}

char GatherByte(int r, int64_t j) { return static_cast<char>((r * 31 + j * 7 + 3) % 256); }

TEST_CASE("UCX ring allgatherv: uneven blocks with zeros, any piece size", "[ucx][algorithms]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  // Blocks of up to ~300 elements in pieces of 1 and 5 keep hundreds of messages in flight per
  // step; larger blocks would only add time (the TSan run is bound by these messages).
  const int64_t base = GENERATE(0, 1, 7, 301);
  const int64_t piece = GENERATE(int64_t{1}, int64_t{5}, int64_t{1} << 20);
  const bool in_place = GENERATE(false, true);
  CAPTURE(n, base, piece, in_place);
  std::vector<int64_t> block(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) block[static_cast<size_t>(r)] = r == 1 ? 0 : base * (r + 1) + 3 * r;
  const std::vector<int64_t> offset = ops::ucx::BlockOffsets(block);
  const int64_t total = offset.back() + block.back();
  std::vector<Bytes> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (int64_t j = 0; j < block[static_cast<size_t>(r)]; ++j) {
      send[static_cast<size_t>(r)].push_back(GatherByte(r, j));
    }
    recv[static_cast<size_t>(r)].assign(static_cast<size_t>(total) + 4, '\x77');
    if (in_place) {
      std::copy(send[static_cast<size_t>(r)].begin(), send[static_cast<size_t>(r)].end(),
                recv[static_cast<size_t>(r)].begin() + offset[static_cast<size_t>(r)]);
    }
  }
  CheckAllOk(RunRanks(n, [&](int r, TagTransport& t) {
    Bytes& out = recv[static_cast<size_t>(r)];
    const void* in = in_place
                         ? static_cast<const void*>(out.data() + offset[static_cast<size_t>(r)])
                         : send[static_cast<size_t>(r)].data();
    return ops::ucx::RingAllgatherv(&t, piece).Run(in, out.data(), block, 9);
  }));
  for (int r = 0; r < n; ++r) {
    const Bytes& out = recv[static_cast<size_t>(r)];
    int bad = 0;
    for (int q = 0; q < n; ++q) {
      for (int64_t j = 0; j < block[static_cast<size_t>(q)]; ++j) {
        bad += out[static_cast<size_t>(offset[static_cast<size_t>(q)] + j)] != GatherByte(q, j);
      }
    }
    CHECK(bad == 0);
    for (size_t j = static_cast<size_t>(total); j < out.size(); ++j) CHECK(out[j] == '\x77');
  }
}

TEST_CASE("UCX ring reduce-scatter: uneven counts with zeros", "[ucx][algorithms]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  const DataType dtype =
      GENERATE(DataType::kInt32, DataType::kFloat16, DataType::kBfloat16, DataType::kFloat64);
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct);
  const int64_t base = GENERATE(0, 1, 7, 301);  // as in the allgatherv test
  const bool in_place = GENERATE(false, true);
  const int64_t piece_elems = GENERATE(1, 4, 1 << 20);
  CAPTURE(n, DataTypeName(dtype), ReduceOpName(op), base, in_place, piece_elems);
  const auto reduction = ops::ucx::Reduction::Of("test", dtype, op);
  REQUIRE(reduction.ok());
  std::vector<int64_t> counts(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) counts[static_cast<size_t>(r)] = r == 1 ? 0 : base + 2 * r;
  const std::vector<int64_t> first = ops::ucx::BlockOffsets(counts);
  const int64_t total = first.back() + counts.back();
  const int64_t elem = ElemSize(dtype);
  std::vector<Bytes> local(static_cast<size_t>(n)), work(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    local[static_cast<size_t>(r)] = MakeInput(dtype, r, 0, total);
    work[static_cast<size_t>(r)] =
        in_place ? local[static_cast<size_t>(r)] : Bytes(static_cast<size_t>(total * elem), 'w');
  }
  CheckAllOk(RunRanks(n, [&](int r, TagTransport& t) {
    Bytes& w = work[static_cast<size_t>(r)];
    const void* in = in_place ? w.data() : local[static_cast<size_t>(r)].data();
    return ops::ucx::RingReduceScatter(&t, {piece_elems * elem, 2})
        .Run(in, w.data(), counts, *reduction, 3);
  }));
  for (int r = 0; r < n; ++r) {
    const size_t mine = static_cast<size_t>(counts[static_cast<size_t>(r)] * elem);
    const size_t at = static_cast<size_t>(first[static_cast<size_t>(r)] * elem);
    const Bytes block(work[static_cast<size_t>(r)].begin() + at,
                      work[static_cast<size_t>(r)].begin() + at + mine);
    CHECK(CountWrong(dtype, op, n, block, first[static_cast<size_t>(r)],
                     counts[static_cast<size_t>(r)]) == 0);
  }
}

TEST_CASE("UCX broadcasts: binomial tree and pipelined chain from any root", "[ucx][algorithms]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  const bool chain = GENERATE(false, true);
  const int64_t bytes = GENERATE(0, 1, 7, 1001, 100003);
  const int root = GENERATE(0, 1) == 0 ? 0 : n - 1;  // the first and the last rank
  // 61-byte pieces: 1640 pieces of 100003 bytes in flight along the chain, uneven last pieces.
  const int64_t piece = GENERATE(int64_t{61}, int64_t{1} << 20);
  CAPTURE(n, chain, bytes, root, piece);
  auto pattern = [root](int64_t j) { return static_cast<char>((j * 29 + root * 3 + 1) % 256); };
  std::vector<Bytes> buf(static_cast<size_t>(n), Bytes(static_cast<size_t>(bytes) + 4, '\x11'));
  for (int64_t j = 0; j < bytes; ++j)
    buf[static_cast<size_t>(root)][static_cast<size_t>(j)] = pattern(j);
  CheckAllOk(RunRanks(n, [&](int r, TagTransport& t) {
    void* b = bytes == 0 ? nullptr : buf[static_cast<size_t>(r)].data();
    if (chain) return ops::ucx::ChainBroadcast(&t, piece).Run(b, bytes, root, 2);
    return ops::ucx::BinomialBroadcast(&t).Run(b, bytes, root, 2);
  }));
  for (int r = 0; r < n; ++r) {
    const Bytes& b = buf[static_cast<size_t>(r)];
    int bad = 0;
    for (int64_t j = 0; j < bytes; ++j) bad += b[static_cast<size_t>(j)] != pattern(j);
    CHECK(bad == 0);
    for (size_t j = static_cast<size_t>(bytes); j < b.size(); ++j) CHECK(b[j] == '\x11');
  }
}

char AlltoallByte(int src, int dst, int64_t j) {
  return static_cast<char>((src * 67 + dst * 13 + j) % 256);
}
int64_t AlltoallBytes(int64_t base, int src, int dst) {
  return (src + dst) % 3 == 0 ? 0 : base + (src * 3 + dst) % 4;
}

TEST_CASE("UCX pairwise alltoallv: uneven blocks, zeros, scattered offsets", "[ucx][algorithms]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  const int64_t base = GENERATE(0, 1, 7, 1001);
  CAPTURE(n, base);
  const size_t un = static_cast<size_t>(n);
  // Send blocks in rank order with a 1-byte gap; receive blocks in reverse order with 2 bytes.
  std::vector<std::vector<int64_t>> sb(un, std::vector<int64_t>(un)), so = sb, rb = sb, ro = sb;
  std::vector<Bytes> send(un), recv(un);
  for (int me = 0; me < n; ++me) {
    const size_t m = static_cast<size_t>(me);
    int64_t send_total = 0, recv_total = 0;
    for (int r = 0; r < n; ++r) {
      sb[m][static_cast<size_t>(r)] = AlltoallBytes(base, me, r);
      so[m][static_cast<size_t>(r)] = send_total;
      send_total += sb[m][static_cast<size_t>(r)] + 1;
    }
    for (int r = n - 1; r >= 0; --r) {
      rb[m][static_cast<size_t>(r)] = AlltoallBytes(base, r, me);
      ro[m][static_cast<size_t>(r)] = recv_total;
      recv_total += rb[m][static_cast<size_t>(r)] + 2;
    }
    send[m].assign(static_cast<size_t>(send_total), '\x01');
    recv[m].assign(static_cast<size_t>(recv_total), '\x33');
    for (int r = 0; r < n; ++r) {
      for (int64_t j = 0; j < sb[m][static_cast<size_t>(r)]; ++j) {
        send[m][static_cast<size_t>(so[m][static_cast<size_t>(r)] + j)] = AlltoallByte(me, r, j);
      }
    }
  }
  CheckAllOk(RunRanks(n, [&](int me, TagTransport& t) {
    const size_t m = static_cast<size_t>(me);
    return ops::ucx::PairwiseAlltoallv(&t).Run(send[m].data(), sb[m], so[m], recv[m].data(), rb[m],
                                               ro[m], 4);
  }));
  for (int me = 0; me < n; ++me) {
    const size_t m = static_cast<size_t>(me);
    int bad = 0, gaps_touched = 0;
    for (int r = 0; r < n; ++r) {
      const int64_t off = ro[m][static_cast<size_t>(r)], len = rb[m][static_cast<size_t>(r)];
      for (int64_t j = 0; j < len; ++j) {
        bad += recv[m][static_cast<size_t>(off + j)] != AlltoallByte(r, me, j);
      }
      gaps_touched += recv[m][static_cast<size_t>(off + len)] != '\x33';
      gaps_touched += recv[m][static_cast<size_t>(off + len + 1)] != '\x33';
    }
    CHECK(bad == 0);
    CHECK(gaps_touched == 0);
  }
}

TEST_CASE("UCX pairwise alltoallv: ranks disagreeing on a block size fail, not hang",
          "[ucx][algorithms]") {
  // Rank 0 sends rank 1 three bytes; rank 1 expects two.
  const auto status = RunRanks(2, [&](int me, TagTransport& t) {
    char send[8] = {}, recv[8] = {};
    std::vector<int64_t> sb = {1, me == 0 ? 3 : 1}, rb = {me == 1 ? 2 : 1, 1}, off = {0, 4};
    return ops::ucx::PairwiseAlltoallv(&t).Run(send, sb, off, recv, rb, off, 4);
  });
  CHECK(status[1].code() == absl::StatusCode::kInternal);
  CHECK(status[1].message().find("3 bytes from rank 0, expected 2") != std::string::npos);
}

TEST_CASE("UCX dissemination barrier holds every rank until all arrived", "[ucx][algorithms]") {
  const int n = GENERATE(1, 2, 3, 4, 5);
  const int rounds = 3;
  std::atomic<int> arrived{0};
  std::vector<std::vector<int>> seen(static_cast<size_t>(n));
  CheckAllOk(RunRanks(n, [&](int r, TagTransport& t) {
    ops::ucx::DisseminationBarrier barrier(&t);
    for (int k = 0; k < rounds; ++k) {
      arrived.fetch_add(1);
      if (absl::Status st = barrier.Run(static_cast<uint64_t>(k)); !st.ok()) return st;
      seen[static_cast<size_t>(r)].push_back(arrived.load());
      // A second barrier keeps the next round's arrivals out of this round's count.
      if (absl::Status st = barrier.Run(static_cast<uint64_t>(100 + k)); !st.ok()) return st;
    }
    return absl::OkStatus();
  }));
  for (int r = 0; r < n; ++r) {
    REQUIRE(seen[static_cast<size_t>(r)].size() == static_cast<size_t>(rounds));
    for (int k = 0; k < rounds; ++k)
      CHECK(seen[static_cast<size_t>(r)][static_cast<size_t>(k)] == n * (k + 1));
  }
}

TEST_CASE("UCX algorithms: a lost rank makes the others fail with Unavailable naming it",
          "[ucx][algorithms]") {
  const int n = GENERATE(2, 3);
  const bool ring = GENERATE(false, true);
  CAPTURE(n, ring);
  ops::testing::InMemoryFabric fabric(n);
  std::vector<std::unique_ptr<TagTransport>> transports;
  for (int r = 0; r < n; ++r) transports.push_back(fabric.CreateTransport(r));
  const auto reduction = ops::ucx::Reduction::Of("test", DataType::kFloat32, ReduceOp::kSum);
  REQUIRE(reduction.ok());
  // The last rank never takes part: it is killed before the others start.
  fabric.Kill(n - 1);
  std::vector<absl::Status> status(static_cast<size_t>(n - 1));
  std::vector<std::thread> threads;
  for (int r = 0; r < n - 1; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> v(64, 1.0f);
      TagTransport* t = transports[static_cast<size_t>(r)].get();
      status[static_cast<size_t>(r)] =
          ring ? ops::ucx::RingAllreduce(t, {16, 2}).Run(v.data(), v.data(), 64, *reduction, 0)
               : ops::ucx::RecursiveDoublingAllreduce(t).Run(v.data(), v.data(), 64, *reduction, 0);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& st : status) {
    INFO(st.ToString());
    CHECK(st.code() == absl::StatusCode::kUnavailable);
    CHECK(st.message().find("rank " + std::to_string(n - 1)) != std::string::npos);
  }
}

TEST_CASE("In-memory transport reports a deadlock instead of hanging", "[ucx][algorithms]") {
  // Rank 1 leaves without sending what rank 0 waits for.
  const auto status = RunRanks(2, [](int r, TagTransport& t) -> absl::Status {
    if (r == 1) return absl::OkStatus();
    char c;
    ops::ucx::Outstanding pending(&t);
    if (absl::Status st = pending.Add(t.Irecv(1, 0, &c, 1)).status(); !st.ok()) return st;
    return pending.WaitAll();
  });
  CHECK(status[0].code() == absl::StatusCode::kInternal);
  CHECK(status[0].message().find("deadlock") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// UcxBackend over views of the in-memory world.

// One backend per rank over a view of `ranks` (world ranks) in tag space 1.
std::unique_ptr<ops::UcxBackend> MakeBackend(TagTransport& world, std::vector<int> ranks,
                                             ops::UcxBackendOptions options) {
  // The view shares ownership; the world transport here is owned by RunRanks.
  std::shared_ptr<TagTransport> borrowed(&world, [](TagTransport*) {});
  auto view = ops::TagTransportView::Create(borrowed, std::move(ranks), 1);
  if (!view.ok()) return nullptr;
  return std::make_unique<ops::UcxBackend>(std::move(*view), options);
}

TEST_CASE("UcxBackend picks recursive doubling or the ring by size; both are correct",
          "[ucx][backend]") {
  const int n = GENERATE(2, 3, 5);
  const int64_t count = GENERATE(1, 15, 16, 17, 1000);  // threshold at 16 float64 = 128 bytes
  const bool in_place = GENERATE(false, true);
  CAPTURE(n, count, in_place);
  ops::UcxBackendOptions options;
  options.recursive_doubling_max_bytes = 128;
  options.piece_bytes = 40;
  std::vector<std::vector<double>> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) send[static_cast<size_t>(r)].push_back(0.5 * r + i);
    recv[static_cast<size_t>(r)] =
        in_place ? send[static_cast<size_t>(r)] : std::vector<double>(static_cast<size_t>(count));
  }
  CheckAllOk(RunRanks(n, [&](int r, TagTransport& t) {
    std::vector<int> all(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) all[static_cast<size_t>(q)] = q;
    auto be = MakeBackend(t, all, options);
    if (be == nullptr) return absl::InternalError("no backend");
    double* out = recv[static_cast<size_t>(r)].data();
    const double* in = in_place ? out : send[static_cast<size_t>(r)].data();
    return be->Allreduce(in, out, count, DataType::kFloat64, ReduceOp::kSum);
  }));
  for (int r = 0; r < n; ++r) {
    int bad = 0;
    for (int64_t i = 0; i < count; ++i) {
      const double want = 0.5 * n * (n - 1) / 2 + static_cast<double>(n * i);
      bad += recv[static_cast<size_t>(r)][static_cast<size_t>(i)] != want;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("UcxBackend on a subset of the world, every op", "[ucx][backend]") {
  // World of 5; the set is world ranks {1, 2, 4}; ranks 0 and 3 do nothing.
  const std::vector<int> set = {1, 2, 4};
  const int m = static_cast<int>(set.size());
  struct Result {
    int rank = -1, size = -1;
    std::string name;
    int64_t sum[2] = {0, 0};
    std::vector<int32_t> gathered;
    std::vector<char> bcast;
    std::vector<int32_t> a2a;
    std::vector<int32_t> rs;
  };
  std::vector<Result> results(5);
  CheckAllOk(RunRanks(5, [&](int w, TagTransport& t) -> absl::Status {
    auto it = std::find(set.begin(), set.end(), w);
    if (it == set.end()) return absl::OkStatus();
    auto be = MakeBackend(t, set, {});
    if (be == nullptr) return absl::InternalError("no backend");
    Result& res = results[static_cast<size_t>(w)];
    res.rank = be->rank();
    res.size = be->size();
    res.name = be->name();
    const int me = be->rank();
    res.sum[0] = w;
    res.sum[1] = 1;
    if (auto st = be->Allreduce(res.sum, res.sum, 2, DataType::kInt64, ReduceOp::kSum); !st.ok()) {
      return st;
    }
    // Allgatherv: set rank s contributes s + 1 copies of its world rank.
    std::vector<int64_t> gb(static_cast<size_t>(m));
    int64_t total = 0;
    for (int s = 0; s < m; ++s) total += gb[static_cast<size_t>(s)] = 4 * (s + 1);
    std::vector<int32_t> mine(static_cast<size_t>(me + 1), w);
    res.gathered.assign(static_cast<size_t>(total / 4), -1);
    if (auto st = be->Allgatherv(mine.data(), res.gathered.data(), gb); !st.ok()) return st;
    res.bcast.assign(5, me == 2 ? 'b' : '.');
    if (auto st = be->Broadcast(res.bcast.data(), 5, 2); !st.ok()) return st;
    // Alltoallv: one int32 per peer: 100 * sender + receiver.
    std::vector<int32_t> out(static_cast<size_t>(m));
    for (int s = 0; s < m; ++s) out[static_cast<size_t>(s)] = 100 * me + s;
    res.a2a.assign(static_cast<size_t>(m), -1);
    std::vector<int64_t> four(static_cast<size_t>(m), 4), offs(static_cast<size_t>(m));
    for (int s = 0; s < m; ++s) offs[static_cast<size_t>(s)] = 4 * s;
    if (auto st = be->Alltoallv(out.data(), four, offs, res.a2a.data(), four, offs); !st.ok()) {
      return st;
    }
    // ReduceScatter: counts {2, 0, 1}; element i of set rank s is s * 10 + i.
    const std::vector<int64_t> counts = {2, 0, 1};
    std::vector<int32_t> in = {me * 10, me * 10 + 1, me * 10 + 2};
    res.rs.assign(static_cast<size_t>(counts[static_cast<size_t>(me)]), -1);
    if (auto st =
            be->ReduceScatter(in.data(), res.rs.data(), counts, DataType::kInt32, ReduceOp::kSum);
        !st.ok()) {
      return st;
    }
    return be->Barrier();
  }));
  for (int s = 0; s < m; ++s) {
    const Result& res = results[static_cast<size_t>(set[static_cast<size_t>(s)])];
    CHECK(res.rank == s);
    CHECK(res.size == m);
    CHECK(res.name == "UCX");
    CHECK(res.sum[0] == 1 + 2 + 4);
    CHECK(res.sum[1] == m);
    CHECK(res.gathered == std::vector<int32_t>{1, 2, 2, 4, 4, 4});
    CHECK(std::string(res.bcast.begin(), res.bcast.end()) == "bbbbb");
    for (int q = 0; q < m; ++q) CHECK(res.a2a[static_cast<size_t>(q)] == 100 * q + s);
    if (s == 0) CHECK(res.rs == std::vector<int32_t>{0 + 10 + 20, 1 + 11 + 21});
    if (s == 1) CHECK(res.rs.empty());
    if (s == 2) CHECK(res.rs == std::vector<int32_t>{2 + 12 + 22});
  }
}

TEST_CASE("UcxBackend ReduceScatter in place moves this rank's block to the front",
          "[ucx][backend]") {
  const int n = GENERATE(2, 3);
  CAPTURE(n);
  std::vector<std::vector<float>> buf(static_cast<size_t>(n));
  std::vector<int64_t> counts(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) counts[static_cast<size_t>(r)] = 1000 + r;
  const int64_t total = ops::ucx::BlockOffsets(counts).back() + counts.back();
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < total; ++i)
      buf[static_cast<size_t>(r)].push_back(static_cast<float>(i + r));
  }
  ops::UcxBackendOptions options;
  options.piece_bytes = 999;
  CheckAllOk(RunRanks(n, [&](int r, TagTransport& t) {
    std::vector<int> all(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) all[static_cast<size_t>(q)] = q;
    auto be = MakeBackend(t, all, options);
    float* b = buf[static_cast<size_t>(r)].data();
    return be->ReduceScatter(b, b, counts, DataType::kFloat32, ReduceOp::kSum);
  }));
  const std::vector<int64_t> first = ops::ucx::BlockOffsets(counts);
  for (int r = 0; r < n; ++r) {
    int bad = 0;
    for (int64_t i = 0; i < counts[static_cast<size_t>(r)]; ++i) {
      const float want =
          static_cast<float>(n * (first[static_cast<size_t>(r)] + i) + n * (n - 1) / 2);
      bad += buf[static_cast<size_t>(r)][static_cast<size_t>(i)] != want;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("UcxBackend rejects bad arguments before sending anything", "[ucx][backend]") {
  // A single rank: any message it sent would have nobody to match it, and each rejection must
  // leave the backend usable.
  CheckAllOk(RunRanks(1, [](int, TagTransport& t) -> absl::Status {
    auto be = MakeBackend(t, {0}, {});
    float x[2] = {1, 2};
    std::vector<int64_t> none, one = {1}, neg = {-1};
    const struct {
      absl::Status st;
      const char* what;
    } cases[] = {
        {be->Allreduce(x, x, 2, DataType::kFloat32, ReduceOp::kAverage), "average"},
        {be->Allreduce(x, x, 2, DataType::kFloat32, ReduceOp::kAdasum), "adasum"},
        {be->Allreduce(x, x, 2, DataType::kBool, ReduceOp::kSum), "bool"},
        {be->Allreduce(x, x, 2, static_cast<DataType>(77), ReduceOp::kSum), "dtype"},
        {be->Allreduce(x, x, -1, DataType::kFloat32, ReduceOp::kSum), "count"},
        {be->Allgatherv(x, x, none), "allgather span"},
        {be->Allgatherv(x, x, neg), "allgather negative"},
        {be->Broadcast(x, 4, 1), "root"},
        {be->Broadcast(x, -1, 0), "bytes"},
        {be->Alltoallv(x, one, one, x, one, none), "alltoall span"},
        {be->Alltoallv(x, one, neg, x, one, one), "alltoall negative"},
        {be->ReduceScatter(x, x, none, DataType::kFloat32, ReduceOp::kSum), "rs span"},
        {be->ReduceScatter(x, x, neg, DataType::kFloat32, ReduceOp::kSum), "rs negative"},
        {be->ReduceScatter(x, x, one, DataType::kBool, ReduceOp::kSum), "rs bool"},
    };
    for (const auto& c : cases) {
      if (c.st.code() != absl::StatusCode::kInvalidArgument) {
        return absl::InternalError(std::string(c.what) + ": " + c.st.ToString());
      }
    }
    if (auto st = be->Allreduce(x, x, 2, DataType::kFloat32, ReduceOp::kProduct); !st.ok()) {
      return st;
    }
    if (x[0] != 1 || x[1] != 2) return absl::InternalError("single-rank allreduce changed data");
    return be->Barrier();
  }));
}

}  // namespace
}  // namespace chorus
