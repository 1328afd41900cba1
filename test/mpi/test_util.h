// File: test/mpi/test_util.h
//
// Helpers shared by the MPI-tier runtime tests (test/mpi/runtime_*_test.cc), written against
// the public API (chorus/chorus.h) only: typed host tensors, float16/bfloat16 reference
// conversions (independent of the runtime's kernels), per-dtype tolerances, rank-seeded
// submission orders, and enqueue/release wrappers that never leave an op un-waited.
//
// Rules the MPI tests follow, because every rank runs every TEST_CASE in the same order and the
// collectives of one rank must line up with the others':
// - No rank-dependent REQUIRE after the first collective of a test case: a rank that aborts a
//   test case early would leave its peers waiting. Values are checked with CHECK.
// - Catch2 is not thread-safe: DoneCallbacks only record what they see; the test thread checks.
#ifndef CHORUS_TEST_MPI_TEST_UTIL_H_
#define CHORUS_TEST_MPI_TEST_UTIL_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <catch2/catch.hpp>

#include "chorus/chorus.h"
#include "chorus/types.h"

namespace chorus::mpitest {

// CHECKs that an absl::Status is OK, printing it otherwise.
#define CHORUS_CHECK_OK(expr)                 \
  do {                                        \
    const ::absl::Status chorus_st_ = (expr); \
    INFO(chorus_st_.ToString());              \
    CHECK(chorus_st_.ok());                   \
  } while (0)

// What a DoneCallback saw; written on the background thread, read by the
// test thread once `calls` is non-zero.
struct Seen {
  std::atomic<int> calls{0};
  absl::Status status;
};

inline constexpr DataType kAllDataTypes[] = {
    DataType::kUint8,   DataType::kInt8,    DataType::kInt16,    DataType::kInt32,
    DataType::kInt64,   DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32,
    DataType::kFloat64, DataType::kBool,
};

// Calls Init() (a no-op when already initialised) and returns the topology. Safe to REQUIRE:
// it runs before the test case's first collective.
inline Topology InitAndTopology() {
  const absl::Status st = Init();
  INFO(st.ToString());
  REQUIRE(st.ok());
  absl::StatusOr<Topology> topo = GetTopology();
  INFO(topo.status().ToString());
  REQUIRE(topo.ok());
  return *topo;
}

// ---- float16 / bfloat16 reference conversions (round to nearest even) ----

inline float HalfBitsToFloat(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int man = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    v = man != 0 ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400), exp - 25);
  }
  return sign != 0 ? -v : v;
}

inline uint16_t FloatToHalfBits(float f) {
  if (std::isnan(f)) return 0x7e00;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;  // rounds to infinity
  if (a < std::ldexp(1.0, -14)) {          // subnormal (1024 rounds up to the smallest normal)
    return sign | static_cast<uint16_t>(std::nearbyint(a * std::ldexp(1.0, 24)));
  }
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  double q = std::nearbyint(m * 2048.0);
  if (q == 2048.0) {
    q = 1024.0;
    ++e;
  }
  return sign | static_cast<uint16_t>(((e + 14) << 10) | (static_cast<int>(q) - 1024));
}

inline float Bfloat16BitsToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline uint16_t FloatToBfloat16Bits(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

// ---- element access ----

// True for the types whose test values may be negative (everything but uint8 and bool).
inline bool HasSign(DataType dtype) {
  return dtype != DataType::kUint8 && dtype != DataType::kBool;
}

// Stores `v` (an exactly representable value for integer types) as element i of `data`.
inline void WriteElement(void* data, DataType dtype, int64_t i, double v) {
  switch (dtype) {
    case DataType::kUint8:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v);
      return;
    case DataType::kInt8:
      static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v);
      return;
    case DataType::kInt16:
      static_cast<int16_t*>(data)[i] = static_cast<int16_t>(v);
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v);
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(data)[i] = static_cast<int64_t>(v);
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(data)[i] = FloatToHalfBits(static_cast<float>(v));
      return;
    case DataType::kBfloat16:
      static_cast<uint16_t*>(data)[i] = FloatToBfloat16Bits(static_cast<float>(v));
      return;
    case DataType::kFloat32:
      static_cast<float*>(data)[i] = static_cast<float>(v);
      return;
    case DataType::kFloat64:
      static_cast<double*>(data)[i] = v;
      return;
    case DataType::kBool:
      static_cast<uint8_t*>(data)[i] = v != 0 ? 1 : 0;
      return;
  }
}

// Element i of `data` as a double (bool: the raw byte, so a non-0/1 byte shows up).
inline double ReadElement(const void* data, DataType dtype, int64_t i) {
  switch (dtype) {
    case DataType::kUint8:
    case DataType::kBool:
      return static_cast<const uint8_t*>(data)[i];
    case DataType::kInt8:
      return static_cast<const int8_t*>(data)[i];
    case DataType::kInt16:
      return static_cast<const int16_t*>(data)[i];
    case DataType::kInt32:
      return static_cast<const int32_t*>(data)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DataType::kFloat16:
      return HalfBitsToFloat(static_cast<const uint16_t*>(data)[i]);
    case DataType::kBfloat16:
      return Bfloat16BitsToFloat(static_cast<const uint16_t*>(data)[i]);
    case DataType::kFloat32:
      return static_cast<const float*>(data)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(data)[i];
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// Relative tolerance of a result of `dtype` computed from exact inputs with a few roundings;
// 0 (exact) for integers and bool.
inline double Tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return 5e-3;
    case DataType::kBfloat16:
      return 2e-2;
    case DataType::kFloat32:
      return 1e-5;
    case DataType::kFloat64:
      return 1e-12;
    default:
      return 0.0;
  }
}

inline bool Near(DataType dtype, double got, double want) {
  if (dtype == DataType::kBool) return (got != 0) == (want != 0) && (got == 0 || got == 1);
  const double tol = Tolerance(dtype);
  if (tol == 0.0) return got == want;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

// Empty when element i of `got` is Near want(i) for every i < n; otherwise the first mismatch
// and the number of mismatches. Meant for CHECK(Mismatch(...) == "").
inline std::string Mismatch(const void* got, DataType dtype, int64_t n,
                            const std::function<double(int64_t)>& want) {
  if (n > 0 && got == nullptr) return "no data for " + std::to_string(n) + " elements";
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < n; ++i) {
    const double g = ReadElement(got, dtype, i);
    const double w = want(i);
    if (!Near(dtype, g, w)) {
      if (bad == 0) {
        first = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
                std::to_string(w);
      }
      ++bad;
    }
  }
  if (bad == 0) return "";
  return std::string(DataTypeName(dtype)) + ": " + std::to_string(bad) + " of " +
         std::to_string(n) + " elements differ; first " + first;
}

// A host tensor owned by the test. Its data pointer is never null (even with 0 elements), so
// that "out of place" and "in place" stay distinct for empty tensors.
class Tensor {
 public:
  Tensor(DataType dtype, std::vector<int64_t> shape)
      : dtype_(dtype),
        shape_(std::move(shape)),
        bytes_(
            std::max<size_t>(1, static_cast<size_t>(NumElements(shape_)) * DataTypeSize(dtype))) {}

  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t size() const { return NumElements(shape_); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }

  TensorView view() {
    TensorView v;
    v.data = bytes_.data();
    v.dtype = dtype_;
    v.shape = shape_;
    return v;
  }

  void Fill(const std::function<double(int64_t)>& value) {
    for (int64_t i = 0; i < size(); ++i) WriteElement(data(), dtype_, i, value(i));
  }
  double Get(int64_t i) const { return ReadElement(data(), dtype_, i); }
  std::string Mismatch(const std::function<double(int64_t)>& want) const {
    return mpitest::Mismatch(data(), dtype_, size(), want);
  }

 private:
  DataType dtype_;
  std::vector<int64_t> shape_;
  std::vector<std::byte> bytes_;
};

// The data of an op's runtime-allocated output, or null when there is none.
inline const void* OutputData(const OpResult& result) {
  if (result.output == nullptr || result.output->empty()) return nullptr;
  return result.output->data();
}

// ---- test values ----

// Small integers, exactly representable in every reducible type, whose sum over up to 4 ranks
// fits int8: (rank + 1) * (i % 7 + 1), negated at odd i for signed types.
inline double SumValue(DataType dtype, int rank, int64_t i) {
  const double v = static_cast<double>((rank + 1) * (i % 7 + 1));
  return HasSign(dtype) && i % 2 == 1 ? -v : v;
}

// Small integers whose sums over ranks are mostly not multiples of the rank count (so that
// Average must round): (2 * rank + i) % 5 + 1, negated at odd i for signed types.
inline double AverageValue(DataType dtype, int rank, int64_t i) {
  const double v = static_cast<double>((2 * rank + i) % 5 + 1);
  return HasSign(dtype) && i % 2 == 1 ? -v : v;
}

// A value in [0, 100] (bool: 0 or 1) that differs between ranks and positions; for data that
// is only moved (allgather, broadcast, alltoall).
inline double MoveValue(DataType dtype, int rank, int64_t i) {
  const int64_t v = (rank * 37 + i * 11 + 5) % 101;
  return dtype == DataType::kBool ? static_cast<double>(v % 2) : static_cast<double>(v);
}

// Integer Average as the runtime defines it: Sum, then a multiplication by 1/size in double
// truncated toward zero (ops/cpu/reduce_kernels.h).
inline double IntegerAverage(double sum, int size) { return std::trunc(sum * (1.0 / size)); }

// ---- requests ----

inline OpRequest MakeRequest(OpType type, std::string name, TensorView input) {
  OpRequest req;
  req.type = type;
  req.name = std::move(name);
  req.input = std::move(input);
  return req;
}

inline OpRequest AllreduceRequest(std::string name, Tensor& input, ReduceOp op = ReduceOp::kSum) {
  OpRequest req = MakeRequest(OpType::kAllreduce, std::move(name), input.view());
  req.reduce_op = op;
  return req;
}

// A permutation of 0..n-1 that differs between ranks (seeded by rank and `salt`) but is the
// same on every run.
inline std::vector<size_t> RankShuffledOrder(size_t n, int rank, uint64_t salt) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(rank + 1) ^ salt);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

inline constexpr Handle kNoHandle = -1;

// Enqueues `requests` in RankShuffledOrder(rank, salt); returns the handles in request order
// (kNoHandle, with a failed CHECK, for a request Enqueue rejected).
inline std::vector<Handle> EnqueueShuffled(std::vector<OpRequest> requests, int rank,
                                           uint64_t salt) {
  std::vector<Handle> handles(requests.size(), kNoHandle);
  for (size_t k : RankShuffledOrder(requests.size(), rank, salt)) {
    const std::string name = requests[k].name;
    absl::StatusOr<Handle> h = Enqueue(std::move(requests[k]));
    INFO("Enqueue " << name << ": " << h.status().ToString());
    CHECK(h.ok());
    if (h.ok()) handles[k] = *h;
  }
  return handles;
}

// Releases every handle (waiting for it); kNoHandle gives a result with an Internal status.
inline std::vector<OpResult> ReleaseAll(const std::vector<Handle>& handles) {
  std::vector<OpResult> results(handles.size());
  for (size_t k = 0; k < handles.size(); ++k) {
    if (handles[k] == kNoHandle) {
      results[k].status = absl::InternalError("not enqueued");
      continue;
    }
    absl::StatusOr<OpResult> r = Release(handles[k]);
    if (r.ok()) {
      results[k] = *std::move(r);
    } else {
      results[k].status = r.status();
    }
  }
  return results;
}

// Enqueue + Release of one op. A request Enqueue rejects yields its error.
inline OpResult RunOp(OpRequest request) {
  absl::StatusOr<Handle> h = Enqueue(std::move(request));
  if (!h.ok()) {
    OpResult r;
    r.status = h.status();
    return r;
  }
  return std::move(ReleaseAll({*h})[0]);
}

// CHECKs that Enqueue rejects `request` locally with `code` (any error when `code` is kOk).
// The request must be identical on every rank of its set: if Enqueue wrongly accepts it, the
// op is still released so that no rank is left waiting.
inline void ExpectRejected(OpRequest request, absl::StatusCode code) {
  const std::string name = request.name;
  absl::StatusOr<Handle> h = Enqueue(std::move(request));
  INFO("Enqueue '" << name << "': " << h.status().ToString());
  CHECK_FALSE(h.ok());
  if (h.ok()) {
    (void)Release(*h);
    return;
  }
  if (code != absl::StatusCode::kOk) CHECK(h.status().code() == code);
}

// Runs one int32 Sum allreduce named `name` on the global set and checks its values: shows
// that the runtime still works (e.g. after an error).
inline void CheckRuntimeStillWorks(const std::string& name, const Topology& topo) {
  Tensor t(DataType::kInt32, {5});
  t.Fill([&](int64_t i) { return SumValue(DataType::kInt32, topo.rank, i); });
  const OpResult r = RunOp(AllreduceRequest(name, t));
  INFO("allreduce " << name << ": " << r.status.ToString());
  CHECK(r.status.ok());
  CHECK(t.Mismatch([&](int64_t i) {
    double s = 0;
    for (int q = 0; q < topo.size; ++q) s += SumValue(DataType::kInt32, q, i);
    return s;
  }) == "");
}

}  // namespace chorus::mpitest

#endif  // CHORUS_TEST_MPI_TEST_UTIL_H_
