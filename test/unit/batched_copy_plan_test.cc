// Tests of ops/cuda/batched_copy_plan (the host-side planning of the batched fusion copy) and
// of its reference executor (ops/cuda/batched_copy_reference), which is the GPU test's oracle.
//
// Planning is checked on fake pointers (nothing is dereferenced), so huge entries cost nothing.
// The reference executor is checked against a per-element oracle written from the semantics in
// batched_copy_plan.h, on random layouts in a host arena, including that it writes nothing
// outside the planned destination ranges.
#include "ops/cuda/batched_copy_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>

#include "chorus/types.h"
#include "ops/cpu/reduce_kernels.h"
#include "ops/cuda/batched_copy_reference.h"
#include "test/support/random_copy_batch.h"

namespace chorus::ops::gpu {
namespace {

using testing::ArenaBatch;
using testing::CountMismatches;
using testing::DtypePair;
using testing::kAllDataTypes;
using testing::NanRanges;
using testing::RandomArenaBatch;
using testing::SupportedCopyPairs;

const void* FakeSrc(uintptr_t addr) { return reinterpret_cast<const void*>(addr); }
void* FakeDst(uintptr_t addr) { return reinterpret_cast<void*>(addr); }

CopyEntry Entry(uintptr_t src, uintptr_t dst, int64_t n, DataType s = DataType::kFloat32,
                DataType d = DataType::kFloat32) {
  return CopyEntry{FakeSrc(src), FakeDst(dst), n, s, d};
}

// ---------------------------------------------------------------------------------------------
// Kinds.

TEST_CASE("CopyKindFor maps every dtype pair", "[batched_copy]") {
  const double scale = GENERATE(1.0, 0.5);
  for (DataType s : kAllDataTypes) {
    for (DataType d : kAllDataTypes) {
      INFO(DataTypeName(s) << " -> " << DataTypeName(d) << " scale " << scale);
      absl::StatusOr<CopyKind> kind = CopyKindFor(s, d, scale);
      const bool cast_pair =
          (s == DataType::kFloat32 && (d == DataType::kFloat16 || d == DataType::kBfloat16)) ||
          (d == DataType::kFloat32 && (s == DataType::kFloat16 || s == DataType::kBfloat16));
      if (s == d && scale == 1.0) {
        REQUIRE(kind.ok());
        CHECK(*kind == CopyKind::kBytes);
      } else if (s == d && s == DataType::kBool) {
        REQUIRE(absl::IsInvalidArgument(kind.status()));
        CHECK_THAT(std::string(kind.status().message()), Catch::Contains("bool"));
      } else if (s == d) {
        REQUIRE(kind.ok());
        CHECK(CopyKindSrcSize(*kind) == static_cast<int>(DataTypeSize(s)));
        CHECK(CopyKindDstSize(*kind) == static_cast<int>(DataTypeSize(s)));
        CHECK_THAT(CopyKindName(*kind), Catch::Contains(DataTypeName(s)));
        CHECK_THAT(CopyKindName(*kind), Catch::StartsWith("scale_"));
      } else if (cast_pair) {
        REQUIRE(kind.ok());
        CHECK(CopyKindSrcSize(*kind) == static_cast<int>(DataTypeSize(s)));
        CHECK(CopyKindDstSize(*kind) == static_cast<int>(DataTypeSize(d)));
        CHECK(std::string(CopyKindName(*kind)) ==
              std::string(DataTypeName(s)) + "_to_" + DataTypeName(d));
      } else {
        REQUIRE(absl::IsInvalidArgument(kind.status()));
        CHECK_THAT(
            std::string(kind.status().message()),
            Catch::Contains(std::string("from ") + DataTypeName(s) + " to " + DataTypeName(d)));
      }
    }
  }
}

TEST_CASE("CopyKindFor rejects undefined dtypes", "[batched_copy]") {
  CHECK(absl::IsInvalidArgument(
      CopyKindFor(static_cast<DataType>(42), DataType::kFloat32, 1.0).status()));
  CHECK(absl::IsInvalidArgument(
      CopyKindFor(DataType::kFloat32, static_cast<DataType>(-1), 1.0).status()));
  CHECK(std::string(CopyKindName(static_cast<CopyKind>(200))) == "unknown");
  CHECK(CopyKindSrcSize(static_cast<CopyKind>(200)) == 0);
}

// ---------------------------------------------------------------------------------------------
// Chunking.

TEST_CASE("An empty batch and zero-element entries plan to no chunks", "[batched_copy]") {
  absl::StatusOr<BatchedCopyPlan> empty = PlanBatchedCopy({}, 1.0);
  REQUIRE(empty.ok());
  CHECK(empty->chunks.empty());
  CHECK(empty->num_entries == 0);

  // Null pointers are fine without elements, even for typed kinds.
  const std::vector<CopyEntry> zeros = {
      CopyEntry{nullptr, nullptr, 0, DataType::kFloat32, DataType::kFloat16},
      CopyEntry{nullptr, nullptr, 0, DataType::kInt8, DataType::kInt8}};
  absl::StatusOr<BatchedCopyPlan> plan = PlanBatchedCopy(zeros, 2.0);
  REQUIRE(plan.ok());
  CHECK(plan->chunks.empty());
  CHECK(plan->origins.empty());
  CHECK(plan->num_entries == 2);
  CHECK(plan->bytes_read == 0);
  CHECK(plan->bytes_written == 0);
  CHECK(plan->scale == 2.0);
}

TEST_CASE("A one-element entry is one chunk", "[batched_copy]") {
  const std::vector<CopyEntry> entries = {
      Entry(0x1000, 0x2000, 0), Entry(0x3000, 0x4000, 1, DataType::kFloat32, DataType::kBfloat16)};
  absl::StatusOr<BatchedCopyPlan> plan = PlanBatchedCopy(entries, 1.0);
  REQUIRE(plan.ok());
  REQUIRE(plan->chunks.size() == 1);
  const CopyChunk& c = plan->chunks[0];
  CHECK(c.src == FakeSrc(0x3000));
  CHECK(c.dst == FakeDst(0x4000));
  CHECK(c.count == 1);
  CHECK(c.kind == CopyKind::kFloat32ToBfloat16);
  CHECK(plan->origins[0].entry == 1);
  CHECK(plan->origins[0].element_offset == 0);
  CHECK(plan->bytes_read == 4);
  CHECK(plan->bytes_written == 2);
}

TEST_CASE("A huge entry is cut into chunk_bytes pieces on both sides", "[batched_copy]") {
  const int64_t chunk_bytes = GENERATE(int64_t{256}, int64_t{4096}, int64_t{65536},
                                       int64_t{1} << 20, (int64_t{1} << 31) - 16);
  // Past 2^32 bytes and 2^31 elements for the large chunk sizes; at most ~600k chunks.
  const int64_t elements =
      chunk_bytes >= (int64_t{1} << 20) ? int64_t{3'000'000'007} : int64_t{37'000'003};
  struct Case {
    DataType src, dst;
    double scale;
    int64_t count_per_chunk_divisor;  // bytes per counted unit of the widest side
    int64_t src_step, dst_step;       // bytes per counted unit
  };
  const Case c = GENERATE(Case{DataType::kFloat32, DataType::kFloat32, 1.0, 1, 1, 1},  // bytes
                          Case{DataType::kFloat32, DataType::kFloat32, 0.5, 4, 4, 4},
                          Case{DataType::kFloat16, DataType::kFloat32, 1.0, 4, 2, 4},
                          Case{DataType::kFloat32, DataType::kBfloat16, 1.0, 4, 4, 2},
                          Case{DataType::kInt64, DataType::kInt64, 3.0, 8, 8, 8});
  const uintptr_t src = uintptr_t{1} << 44;
  const uintptr_t dst = uintptr_t{1} << 46;
  const std::vector<CopyEntry> entries = {Entry(src, dst, elements, c.src, c.dst)};
  absl::StatusOr<BatchedCopyPlan> plan = PlanBatchedCopy(entries, c.scale, {chunk_bytes, true});
  REQUIRE(plan.ok());
  const bool bytes = plan->chunks[0].kind == CopyKind::kBytes;
  const int64_t units = bytes ? elements * static_cast<int64_t>(DataTypeSize(c.src)) : elements;
  const int64_t per_chunk = chunk_bytes / c.count_per_chunk_divisor;
  REQUIRE(static_cast<int64_t>(plan->chunks.size()) == (units + per_chunk - 1) / per_chunk);
  // One REQUIRE per property, not per chunk.
  int64_t covered = 0;
  size_t bad_count = 0, bad_src = 0, bad_dst = 0, bad_origin = 0;
  for (size_t i = 0; i < plan->chunks.size(); ++i) {
    const CopyChunk& k = plan->chunks[i];
    const bool last = i + 1 == plan->chunks.size();
    bad_count += (!last && k.count != per_chunk) || k.count == 0;
    bad_src +=
        reinterpret_cast<uintptr_t>(k.src) != src + static_cast<uintptr_t>(covered * c.src_step);
    bad_dst +=
        reinterpret_cast<uintptr_t>(k.dst) != dst + static_cast<uintptr_t>(covered * c.dst_step);
    const int64_t element = bytes ? covered / static_cast<int64_t>(DataTypeSize(c.src)) : covered;
    bad_origin += plan->origins[i].entry != 0 || plan->origins[i].element_offset != element;
    covered += k.count;
  }
  CHECK(bad_count == 0);
  CHECK(bad_src == 0);
  CHECK(bad_dst == 0);
  CHECK(bad_origin == 0);
  CHECK(covered == units);
  CHECK(plan->bytes_read == elements * static_cast<int64_t>(DataTypeSize(c.src)));
  CHECK(plan->bytes_written == elements * static_cast<int64_t>(DataTypeSize(c.dst)));
}

// Element counts of random batches: mostly the edge counts around chunk and vector widths, one
// in eight anything below 20'000.
int64_t RandomCount(std::mt19937_64& rng) {
  static constexpr int64_t kCounts[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 255, 1000, 4099};
  if (rng() % 8 == 0) return static_cast<int64_t>(rng() % 20'000);
  return kCounts[rng() % (sizeof(kCounts) / sizeof(kCounts[0]))];
}

TEST_CASE("Chunks of random batches tile every entry exactly, in order", "[batched_copy]") {
  const uint64_t seed = GENERATE(range(1, 21));
  std::mt19937_64 rng(seed);
  const int64_t chunk_bytes = int64_t{256} << (rng() % 6);
  const double scale = rng() % 2 == 0 ? 1.0 : 0.25;
  const std::vector<DtypePair> pairs = SupportedCopyPairs();
  std::vector<CopyEntry> entries;
  uintptr_t src = 0x10000, dst = uintptr_t{1} << 40;
  const int n = 1 + static_cast<int>(rng() % 60);
  for (int i = 0; i < n; ++i) {
    DtypePair p = pairs[rng() % pairs.size()];
    if (scale != 1.0 && p.src == DataType::kBool) p = {DataType::kInt8, DataType::kInt8};
    const int64_t count = RandomCount(rng);
    entries.push_back(Entry(src, dst, count, p.src, p.dst));
    // Next entry at an 8-byte boundary (any element size), after a random gap.
    src = (src + static_cast<uintptr_t>(count) * DataTypeSize(p.src) + 7) / 8 * 8 + 8 * (rng() % 3);
    dst = (dst + static_cast<uintptr_t>(count) * DataTypeSize(p.dst) + 7) / 8 * 8 + 8 * (rng() % 3);
  }
  absl::StatusOr<BatchedCopyPlan> plan = PlanBatchedCopy(entries, scale, {chunk_bytes, true});
  REQUIRE(plan.ok());
  REQUIRE(plan->chunks.size() == plan->origins.size());
  CHECK(plan->num_entries == entries.size());

  size_t k = 0;
  int64_t read = 0, written = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const CopyEntry& e = entries[i];
    const CopyKind kind = *CopyKindFor(e.src_dtype, e.dst_dtype, scale);
    const int ss = static_cast<int>(DataTypeSize(e.src_dtype));
    const int ds = static_cast<int>(DataTypeSize(e.dst_dtype));
    // kBytes counts bytes; every other kind counts elements.
    const int64_t unit_s = kind == CopyKind::kBytes ? 1 : ss;
    const int64_t unit_d = kind == CopyKind::kBytes ? 1 : ds;
    const int64_t units = e.num_elements * ss / unit_s;
    int64_t off = 0;
    while (off < units) {
      INFO("entry " << i << " chunk " << k);
      REQUIRE(k < plan->chunks.size());
      const CopyChunk& c = plan->chunks[k];
      CHECK(plan->origins[k].entry == i);
      CHECK(plan->origins[k].element_offset == (kind == CopyKind::kBytes ? off / ss : off));
      CHECK(c.kind == kind);
      CHECK(c.src == static_cast<const uint8_t*>(e.src) + off * unit_s);
      CHECK(c.dst == static_cast<uint8_t*>(e.dst) + off * unit_d);
      CHECK(c.count >= 1);
      CHECK(c.count * unit_s <= chunk_bytes);
      CHECK(c.count * unit_d <= chunk_bytes);
      // Only an entry's last chunk may be short.
      if (off + c.count < units) CHECK(c.count == chunk_bytes / std::max(unit_s, unit_d));
      off += c.count;
      ++k;
    }
    CHECK(off == units);
    read += e.num_elements * ss;
    written += e.num_elements * ds;
  }
  CHECK(k == plan->chunks.size());
  CHECK(plan->bytes_read == read);
  CHECK(plan->bytes_written == written);
}

// ---------------------------------------------------------------------------------------------
// Errors.

absl::Status PlanStatus(const std::vector<CopyEntry>& entries, double scale = 1.0,
                        PlanOptions options = {}) {
  BatchedCopyPlan plan;
  // A plan that held chunks before must come back empty on error.
  const std::vector<CopyEntry> good = {Entry(0x100, 0x200, 4)};
  REQUIRE(PlanBatchedCopy(good, 1.0, {}, &plan).ok());
  REQUIRE(plan.chunks.size() == 1);
  absl::Status status = PlanBatchedCopy(entries, scale, options, &plan);
  if (!status.ok()) {
    CHECK(plan.chunks.empty());
    CHECK(plan.origins.empty());
    CHECK(plan.bytes_read == 0);
  }
  return status;
}

void CheckInvalid(const absl::Status& status, const std::string& fragment) {
  INFO(status.ToString());
  CHECK(absl::IsInvalidArgument(status));
  CHECK_THAT(std::string(status.message()), Catch::Contains(fragment));
}

TEST_CASE("Malformed entries are rejected naming the entry", "[batched_copy]") {
  CheckInvalid(PlanStatus({Entry(0x100, 0x200, 1), Entry(0x300, 0x400, -1)}), "entry 1");
  CheckInvalid(PlanStatus({Entry(0x100, 0x200, -1)}), "negative");
  CheckInvalid(PlanStatus({Entry(0, 0x200, 3)}), "null source");
  CheckInvalid(PlanStatus({Entry(0x100, 0, 3)}), "null destination");
  CheckInvalid(PlanStatus({Entry(0x100, 0x200, 3, DataType::kInt32, DataType::kFloat32)}),
               "unsupported cast from int32 to float32");
  CheckInvalid(PlanStatus({Entry(0x100, 0x200, 3, DataType::kFloat16, DataType::kBfloat16)}),
               "unsupported cast from float16 to bfloat16");
  CheckInvalid(PlanStatus({Entry(0x100, 0x200, 3, DataType::kBool, DataType::kBool)}, 2.0), "bool");
  CheckInvalid(PlanStatus({Entry(0x100, 0x200, 3, static_cast<DataType>(77), DataType::kFloat32)}),
               "undefined data type");
}

TEST_CASE("Typed kinds need element-aligned pointers; byte copies do not", "[batched_copy]") {
  // Byte copies (same dtype, scale 1) accept any address.
  CHECK(PlanStatus({Entry(0x101, 0x203, 5)}).ok());
  CHECK(PlanStatus({Entry(0x101, 0x203, 5, DataType::kFloat64, DataType::kFloat64)}).ok());
  CheckInvalid(PlanStatus({Entry(0x102, 0x200, 5)}, 0.5), "aligned to 4 bytes");
  CheckInvalid(PlanStatus({Entry(0x100, 0x202, 5, DataType::kFloat64, DataType::kFloat64)}, 2.0),
               "destination to 8 bytes");
  CheckInvalid(PlanStatus({Entry(0x100, 0x201, 5, DataType::kFloat32, DataType::kFloat16)}),
               "destination to 2 bytes");
  CHECK(PlanStatus({Entry(0x104, 0x202, 5, DataType::kFloat32, DataType::kFloat16)}).ok());
  CHECK(PlanStatus({Entry(0x101, 0x203, 5, DataType::kInt8, DataType::kInt8)}, 3.0).ok());
}

TEST_CASE("Bad options are rejected", "[batched_copy]") {
  const int64_t bad = GENERATE(int64_t{0}, int64_t{-16}, int64_t{128}, int64_t{240}, int64_t{257},
                               int64_t{4100}, int64_t{1} << 31);
  CheckInvalid(PlanStatus({Entry(0x100, 0x200, 4)}, 1.0, {bad, true}), "chunk_bytes");
}

TEST_CASE("Overlapping ranges are rejected, in-place scaling is not", "[batched_copy]") {
  // Two destinations overlapping by one byte.
  CheckInvalid(PlanStatus({Entry(0x100, 0x1000, 4), Entry(0x200, 0x100f, 4)}),
               "destination of entry 0 overlaps the destination of entry 1");
  // Touching destinations are fine.
  CHECK(PlanStatus({Entry(0x100, 0x1000, 4), Entry(0x200, 0x1010, 4)}).ok());
  // A destination overlapping another entry's source.
  CheckInvalid(PlanStatus({Entry(0x100, 0x1000, 4), Entry(0x1008, 0x2000, 4)}),
               "source of entry 1 overlaps the destination of entry 0");
  // Sources may overlap each other (the same tensor read twice).
  CHECK(PlanStatus({Entry(0x100, 0x1000, 4), Entry(0x104, 0x2000, 4)}).ok());
  // An entry whose own ranges partly overlap.
  CheckInvalid(PlanStatus({Entry(0x100, 0x104, 4)}, 0.5),
               "source of entry 0 overlaps the destination of entry 0");
  // In place: exact same range and element size.
  CHECK(PlanStatus({Entry(0x100, 0x100, 4)}, 0.5).ok());
  CHECK(PlanStatus({Entry(0x100, 0x100, 4), Entry(0x110, 0x110, 4)}, 0.5).ok());
  // In place with a cast changes the element size: the threads would race.
  CheckInvalid(PlanStatus({Entry(0x100, 0x100, 4, DataType::kFloat32, DataType::kFloat16)}),
               "overlaps");
  // Another entry reading an in-place entry's range.
  CheckInvalid(PlanStatus({Entry(0x100, 0x100, 4), Entry(0x108, 0x2000, 1)}, 0.5), "overlaps");
  // Zero-element entries overlap nothing.
  CHECK(PlanStatus({Entry(0x100, 0x1000, 4), Entry(0x1000, 0x1000, 0)}).ok());
  // The check can be turned off for layouts that are correct by construction.
  CHECK(PlanStatus({Entry(0x100, 0x1000, 4), Entry(0x200, 0x1008, 4)}, 1.0, {65536, false}).ok());
}

TEST_CASE("Replanning into a used plan starts from scratch", "[batched_copy]") {
  BatchedCopyPlan plan;
  REQUIRE(PlanBatchedCopy({Entry(0x100, 0x1000000, 100000)}, 0.5, {}, &plan).ok());
  CHECK(plan.chunks.size() == 7);
  REQUIRE(PlanBatchedCopy({Entry(0x100, 0x200, 3, DataType::kFloat16, DataType::kFloat32)}, 1.0, {},
                          &plan)
              .ok());
  REQUIRE(plan.chunks.size() == 1);
  CHECK(plan.scale == 1.0);
  CHECK(plan.num_entries == 1);
  CHECK(plan.bytes_read == 6);
  CHECK(plan.bytes_written == 12);
}

bool SamePlan(const BatchedCopyPlan& a, const BatchedCopyPlan& b) {
  if (a.scale != b.scale || a.num_entries != b.num_entries || a.bytes_read != b.bytes_read ||
      a.bytes_written != b.bytes_written || a.chunks.size() != b.chunks.size() ||
      a.origins.size() != b.origins.size()) {
    return false;
  }
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    const CopyChunk& x = a.chunks[i];
    const CopyChunk& y = b.chunks[i];
    if (x.src != y.src || x.dst != y.dst || x.count != y.count || x.kind != y.kind) return false;
    if (a.origins[i].entry != b.origins[i].entry ||
        a.origins[i].element_offset != b.origins[i].element_offset) {
      return false;
    }
  }
  return true;
}

TEST_CASE("CopyPlanCache returns the plan of its inputs, planning only what it does not keep",
          "[batched_copy]") {
  const uint32_t seed = GENERATE(1u, 2u, 3u, 4u);
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  // A pool of batches, more than the cache keeps; some differ from another only in one
  // pointer, one count or the scale.
  struct Input {
    std::vector<CopyEntry> entries;
    double scale;
  };
  std::vector<Input> pool;
  for (int b = 0; b < 12; ++b) {
    Input in;
    const int n = 1 + static_cast<int>(rng() % 5);
    uintptr_t dst = 0x10000000;
    for (int i = 0; i < n; ++i) {
      const int64_t count = 1 + static_cast<int64_t>(rng() % 40000);
      in.entries.push_back(Entry(0x100000 * (i + 1) + 0x40 * b, dst, count));
      dst += static_cast<uintptr_t>(count) * 4 + 16;
    }
    in.scale = b % 3 == 0 ? 0.5 : 1.0;
    pool.push_back(in);
  }
  pool.push_back(pool[1]);
  pool.back().entries[0].num_elements += 1;
  pool.push_back(pool[1]);
  pool.back().scale = 0.25;
  const PlanOptions options{4096, false};
  CopyPlanCache cache(options, 4);
  int64_t calls = 0;
  std::vector<size_t> recent;  // the last distinct inputs used, most recent last
  for (int step = 0; step < 300; ++step) {
    // Mostly the last few inputs again (a training step's batches), sometimes another.
    const size_t pick =
        rng() % 4 != 0 && !recent.empty() ? recent[rng() % recent.size()] : rng() % pool.size();
    const Input& in = pool[pick];
    const int64_t hits_before = cache.hits();
    const bool kept = std::find(recent.begin(), recent.end(), pick) != recent.end();
    absl::StatusOr<const BatchedCopyPlan*> got = cache.Get(in.entries, in.scale);
    ++calls;
    REQUIRE(got.ok());
    absl::StatusOr<BatchedCopyPlan> fresh = PlanBatchedCopy(in.entries, in.scale, options);
    REQUIRE(fresh.ok());
    INFO("step " << step << " input " << pick);
    CHECK(SamePlan(**got, *fresh));
    // The cache keeps exactly the 4 most recently used distinct inputs.
    CHECK((cache.hits() == hits_before + 1) == kept);
    std::erase(recent, pick);
    recent.push_back(pick);
    if (recent.size() > 4) recent.erase(recent.begin());
  }
  CHECK(cache.hits() + cache.misses() == calls);
  CHECK(cache.hits() > 0);
}

TEST_CASE("CopyPlanCache keeps nothing for a bad input", "[batched_copy]") {
  CopyPlanCache cache({65536, false}, 2);
  const std::vector<CopyEntry> good = {Entry(0x100, 0x1000, 10)};
  REQUIRE(cache.Get(good, 1.0).ok());
  const std::vector<CopyEntry> bad = {CopyEntry{nullptr, FakeDst(0x1000), 4}};
  CHECK(cache.Get(bad, 1.0).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(cache.Get(bad, 1.0).status().code() == absl::StatusCode::kInvalidArgument);
  absl::StatusOr<const BatchedCopyPlan*> again = cache.Get(good, 1.0);
  REQUIRE(again.ok());
  CHECK((*again)->chunks.size() == 1);
  CHECK(cache.hits() == 1);
}

TEST_CASE("PackFusionLayout packs and aligns offsets", "[batched_copy]") {
  const std::vector<int64_t> counts = {3, 0, 5, 1};
  FusionLayout dense = PackFusionLayout(counts, DataType::kFloat32, 1);
  CHECK(dense.offsets == std::vector<int64_t>{0, 12, 12, 32});
  CHECK(dense.total_bytes == 36);
  FusionLayout aligned = PackFusionLayout(counts, DataType::kFloat32, 16);
  CHECK(aligned.offsets == std::vector<int64_t>{0, 16, 16, 48});
  CHECK(aligned.total_bytes == 52);
  FusionLayout half = PackFusionLayout(counts, DataType::kFloat16, 16);
  CHECK(half.offsets == std::vector<int64_t>{0, 16, 16, 32});
  CHECK(half.total_bytes == 34);
  CHECK(PackFusionLayout({}, DataType::kFloat32, 16).total_bytes == 0);
}

// ---------------------------------------------------------------------------------------------
// The reference executor against a per-element oracle.

// round-toward-zero of v into T, saturating, NaN -> 0 (batched_copy_plan.h's integer rule),
// formulated independently of ops/cpu: in long double, whose 64-bit mantissa holds every int64.
template <typename T>
T OracleInt(T x, double scale) {
  const double v = static_cast<double>(x) * scale;
  if (std::isnan(v)) return T{0};
  const long double t = std::trunc(static_cast<long double>(v));
  if (t >= static_cast<long double>(std::numeric_limits<T>::max())) {
    return std::numeric_limits<T>::max();
  }
  if (t <= static_cast<long double>(std::numeric_limits<T>::min())) {
    return std::numeric_limits<T>::min();
  }
  return static_cast<T>(t);
}

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void Store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Writes element i of entry e (read from `src_snapshot`, the arena before the copy) into `out`.
void OracleElement(const CopyEntry& e, double scale, const uint8_t* src, uint8_t* dst) {
  const float f = static_cast<float>(scale);
  const DataType s = e.src_dtype;
  const DataType d = e.dst_dtype;
  if (s == d && scale == 1.0) {
    std::memcpy(dst, src, DataTypeSize(s));
    return;
  }
  if (s == DataType::kFloat32 && d == DataType::kFloat16) {
    return Store(dst, FloatToHalf(Load<float>(src) * f));
  }
  if (s == DataType::kFloat32 && d == DataType::kBfloat16) {
    return Store(dst, FloatToBfloat16(Load<float>(src) * f));
  }
  if (s == DataType::kFloat16 && d == DataType::kFloat32) {
    return Store(dst, HalfToFloat(Load<uint16_t>(src)) * f);
  }
  if (s == DataType::kBfloat16 && d == DataType::kFloat32) {
    return Store(dst, Bfloat16ToFloat(Load<uint16_t>(src)) * f);
  }
  switch (s) {
    case DataType::kUint8:
      return Store(dst, OracleInt(Load<uint8_t>(src), scale));
    case DataType::kInt8:
      return Store(dst, OracleInt(Load<int8_t>(src), scale));
    case DataType::kInt16:
      return Store(dst, OracleInt(Load<int16_t>(src), scale));
    case DataType::kInt32:
      return Store(dst, OracleInt(Load<int32_t>(src), scale));
    case DataType::kInt64:
      return Store(dst, OracleInt(Load<int64_t>(src), scale));
    case DataType::kFloat16:
      return Store(dst, FloatToHalf(HalfToFloat(Load<uint16_t>(src)) * f));
    case DataType::kBfloat16:
      return Store(dst, FloatToBfloat16(Bfloat16ToFloat(Load<uint16_t>(src)) * f));
    case DataType::kFloat32:
      return Store(dst, Load<float>(src) * f);
    case DataType::kFloat64:
      return Store(dst, Load<double>(src) * scale);
    case DataType::kBool:
      FAIL("bool cannot be scaled");
  }
}

// One draw per byte (the arena fill of this test's random batches).
void FillEachByte(std::mt19937_64& rng, std::vector<uint8_t>& arena) {
  for (uint8_t& byte : arena) byte = static_cast<uint8_t>(rng());
}

TEST_CASE("The reference executor matches the per-element oracle on random layouts",
          "[batched_copy]") {
  const uint64_t seed = GENERATE(range(1, 41));
  ArenaBatch b = RandomArenaBatch(seed, {40, RandomCount, FillEachByte});
  const std::vector<uint8_t> before = b.arena;
  // Oracle, from the snapshot: addresses in the arena translate to the same offsets.
  std::vector<uint8_t> expected = before;
  const uint8_t* base = b.arena.data();
  for (const CopyEntry& e : b.entries) {
    const auto ss = static_cast<int64_t>(DataTypeSize(e.src_dtype));
    const auto ds = static_cast<int64_t>(DataTypeSize(e.dst_dtype));
    const int64_t so = static_cast<const uint8_t*>(e.src) - base;
    const int64_t dof = static_cast<uint8_t*>(e.dst) - base;
    for (int64_t i = 0; i < e.num_elements; ++i) {
      OracleElement(e, b.scale, before.data() + so + i * ss, expected.data() + dof + i * ds);
    }
  }
  const int64_t chunk_bytes = GENERATE(int64_t{256}, int64_t{65536});
  absl::StatusOr<BatchedCopyPlan> plan = PlanBatchedCopy(b.entries, b.scale, {chunk_bytes, true});
  REQUIRE(plan.ok());
  RunBatchedCopyOnHost(*plan);

  // Byte for byte over the whole arena (nothing outside the destinations may change); a NaN
  // may differ in payload only where a scaling or casting kind produced it.
  const size_t mismatches = CountMismatches(b.arena, expected, NanRanges(b.entries, b.scale, base));
  INFO("seed " << seed << ", " << b.entries.size() << " entries, scale " << b.scale);
  CHECK(mismatches == 0);
}

}  // namespace
}  // namespace chorus::ops::gpu
