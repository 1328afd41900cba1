#include "test/support/random_copy_batch.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <catch2/catch.hpp>

#include "ops/cpu/reduce_kernels.h"

namespace chorus::testing {

using ops::gpu::CopyEntry;

std::vector<DtypePair> SupportedCopyPairs() {
  std::vector<DtypePair> pairs;
  for (DataType t : kAllDataTypes) pairs.push_back({t, t});
  pairs.push_back({DataType::kFloat32, DataType::kFloat16});
  pairs.push_back({DataType::kFloat16, DataType::kFloat32});
  pairs.push_back({DataType::kFloat32, DataType::kBfloat16});
  pairs.push_back({DataType::kBfloat16, DataType::kFloat32});
  return pairs;
}

void FillBytes(std::mt19937_64& rng, std::vector<uint8_t>& v) {
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    const uint64_t bits = rng();
    std::memcpy(v.data() + i, &bits, 8);
  }
  for (; i < v.size(); ++i) v[i] = static_cast<uint8_t>(rng());
}

void FillRandom(std::mt19937_64& rng, uint8_t* p, int64_t n, DataType dtype) {
  const size_t size = DataTypeSize(dtype);
  std::uniform_real_distribution<float> moderate(-70000.0f, 70000.0f);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t bits = rng();
    if (dtype == DataType::kFloat32 && rng() % 2 == 0) {
      float v = moderate(rng);
      if (rng() % 4 == 0) v = std::ldexp(v, -static_cast<int>(rng() % 40));
      std::memcpy(&bits, &v, sizeof(v));
    }
    std::memcpy(p + i * static_cast<int64_t>(size), &bits, size);
  }
}

ArenaBatch RandomArenaBatch(uint64_t seed, const RandomBatchOptions& options) {
  std::mt19937_64 rng(seed);
  static constexpr double kScales[] = {1.0, 0.5, -3.25, 1.0 / 3.0, 70000.0, 1e-30};
  ArenaBatch b;
  b.scale = kScales[rng() % (sizeof(kScales) / sizeof(kScales[0]))];
  const std::vector<DtypePair> pairs = SupportedCopyPairs();
  const int n = 1 + static_cast<int>(rng() % static_cast<uint64_t>(options.max_entries));
  struct Placed {
    DtypePair p;
    int64_t count;
    bool in_place;
  };
  std::vector<Placed> placed;
  int64_t src_bytes = 0, dst_bytes = 0;
  for (int i = 0; i < n; ++i) {
    DtypePair p = pairs[rng() % pairs.size()];
    if (b.scale != 1.0 && p.src == DataType::kBool) p = {DataType::kUint8, DataType::kUint8};
    const int64_t count = options.count(rng);
    const bool in_place = p.src == p.dst && rng() % 4 == 0;
    placed.push_back({p, count, in_place});
    src_bytes += count * static_cast<int64_t>(DataTypeSize(p.src)) + 64;
    dst_bytes += count * static_cast<int64_t>(DataTypeSize(p.dst)) + 64;
  }
  b.arena.resize(static_cast<size_t>(src_bytes + dst_bytes + 64));
  options.fill_arena(rng, b.arena);
  uint8_t* base = b.arena.data();
  int64_t src_off = 0, dst_off = src_bytes;
  for (const Placed& pl : placed) {
    const auto ss = static_cast<int64_t>(DataTypeSize(pl.p.src));
    const auto ds = static_cast<int64_t>(DataTypeSize(pl.p.dst));
    // Byte copies may start anywhere; typed kinds at element boundaries.
    const bool bytes = pl.p.src == pl.p.dst && b.scale == 1.0;
    const auto gap = [&](int64_t off, int64_t size) {
      off += static_cast<int64_t>(rng() % 40);
      if (!bytes) off = (off + size - 1) / size * size;
      return off;
    };
    src_off = gap(src_off, ss);
    dst_off = gap(dst_off, ds);
    CopyEntry e{base + src_off, base + dst_off, pl.count, pl.p.src, pl.p.dst};
    if (pl.in_place) {
      e.src = base + dst_off;
      FillRandom(rng, base + dst_off, pl.count, pl.p.src);
    } else {
      FillRandom(rng, base + src_off, pl.count, pl.p.src);
      src_off += pl.count * ss;
    }
    dst_off += pl.count * ds;
    b.entries.push_back(e);
  }
  REQUIRE(dst_off <= static_cast<int64_t>(b.arena.size()));
  return b;
}

bool IsNanElement(DataType dtype, const uint8_t* p) {
  uint16_t h;
  float f;
  double d;
  switch (dtype) {
    case DataType::kFloat16:
      std::memcpy(&h, p, 2);
      return std::isnan(ops::HalfToFloat(h));
    case DataType::kBfloat16:
      std::memcpy(&h, p, 2);
      return std::isnan(ops::Bfloat16ToFloat(h));
    case DataType::kFloat32:
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    case DataType::kFloat64:
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    default:
      return false;
  }
}

std::vector<NanRange> NanRanges(const std::vector<CopyEntry>& entries, double scale,
                                const uint8_t* base) {
  std::vector<NanRange> ranges;
  for (const CopyEntry& e : entries) {
    if (e.num_elements == 0 || (e.src_dtype == e.dst_dtype && scale == 1.0)) continue;
    if (!IsFloatingPoint(e.dst_dtype)) continue;
    const auto begin = static_cast<size_t>(static_cast<uint8_t*>(e.dst) - base);
    ranges.push_back({begin,
                      begin + static_cast<size_t>(e.num_elements) * DataTypeSize(e.dst_dtype),
                      e.dst_dtype});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const NanRange& a, const NanRange& b) { return a.begin < b.begin; });
  return ranges;
}

size_t CountMismatches(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                       const std::vector<NanRange>& nan_ranges) {
  REQUIRE(got.size() >= want.size());
  size_t bad = 0;
  size_t first_bad = want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] == want[i]) continue;
    auto it = std::upper_bound(nan_ranges.begin(), nan_ranges.end(), i,
                               [](size_t v, const NanRange& r) { return v < r.begin; });
    bool ok = false;
    if (it != nan_ranges.begin()) {
      --it;
      if (i < it->end) {
        const size_t es = DataTypeSize(it->dtype);
        const size_t elem = it->begin + (i - it->begin) / es * es;
        ok = IsNanElement(it->dtype, got.data() + elem) &&
             IsNanElement(it->dtype, want.data() + elem);
      }
    }
    if (!ok) {
      if (bad == 0) first_bad = i;
      ++bad;
    }
  }
  if (bad > 0) {
    UNSCOPED_INFO("first mismatch at byte " << first_bad << ": got " << int{got[first_bad]}
                                            << ", want " << int{want[first_bad]});
  }
  return bad;
}

}  // namespace chorus::testing
