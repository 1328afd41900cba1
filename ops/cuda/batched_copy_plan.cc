#include "ops/cuda/batched_copy_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "base/status_macros.h"

namespace chorus::ops::gpu {
namespace {

constexpr int kSrcSize[kNumCopyKinds] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 4, 2, 4, 2};
constexpr int kDstSize[kNumCopyKinds] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 2, 4, 2, 4};

bool ValidKind(CopyKind kind) { return static_cast<int>(kind) < kNumCopyKinds; }

// Half-open byte range [begin, end) of one side of an entry.
struct Range {
  uintptr_t begin;
  uintptr_t end;
  uint32_t entry;
};

std::string EntryName(size_t i) { return absl::StrCat("entry ", i); }

// What CopyChunk::count counts for an entry: bytes for kBytes, elements otherwise.
int64_t Units(const CopyEntry& e, CopyKind kind) {
  return kind == CopyKind::kBytes ? e.num_elements * static_cast<int64_t>(DataTypeSize(e.src_dtype))
                                  : e.num_elements;
}

absl::Status OverlapError(const Range& a, const char* a_side, const Range& b, const char* b_side) {
  return absl::InvalidArgumentError(
      absl::StrCat("PlanBatchedCopy: the ", a_side, " of ", EntryName(a.entry), " overlaps the ",
                   b_side, " of ", EntryName(b.entry), " (the copies would race)"));
}

// See PlanOptions::check_overlap. Destination ranges must be pairwise disjoint; a source range
// may meet a destination range only as the exact in-place range of the same entry.
absl::Status CheckOverlap(absl::Span<const CopyEntry> entries, const std::vector<CopyKind>& kinds) {
  std::vector<Range> dst;
  std::vector<Range> src;
  dst.reserve(entries.size());
  src.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const CopyEntry& e = entries[i];
    if (e.num_elements == 0) continue;
    const uintptr_t s = reinterpret_cast<uintptr_t>(e.src);
    const uintptr_t d = reinterpret_cast<uintptr_t>(e.dst);
    const auto n = static_cast<uintptr_t>(Units(e, kinds[i]));
    const auto entry = static_cast<uint32_t>(i);
    src.push_back({s, s + n * static_cast<uintptr_t>(CopyKindSrcSize(kinds[i])), entry});
    dst.push_back({d, d + n * static_cast<uintptr_t>(CopyKindDstSize(kinds[i])), entry});
  }
  const auto by_begin = [](const Range& a, const Range& b) { return a.begin < b.begin; };
  std::sort(dst.begin(), dst.end(), by_begin);
  for (size_t i = 1; i < dst.size(); ++i) {
    if (dst[i].begin < dst[i - 1].end) {
      return OverlapError(dst[i - 1], "destination", dst[i], "destination");
    }
  }
  // dst is sorted and disjoint: the only destination that can overlap [s.begin, s.end) without
  // one before it overlapping too is the last one starting before s.end.
  for (const Range& s : src) {
    auto it = std::lower_bound(dst.begin(), dst.end(), s.end,
                               [](const Range& r, uintptr_t v) { return r.begin < v; });
    if (it == dst.begin()) continue;
    --it;
    if (it->end <= s.begin) continue;
    const bool in_place = it->entry == s.entry && it->begin == s.begin && it->end == s.end;
    if (!in_place) return OverlapError(s, "source", *it, "destination");
    // In place: every earlier destination ends at or before it->begin == s.begin.
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const PlanOptions& options) {
  if (options.chunk_bytes < 256 || options.chunk_bytes % 16 != 0 ||
      options.chunk_bytes > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PlanBatchedCopy: chunk_bytes must be a multiple of 16 in [256, 2^31), not ",
                     options.chunk_bytes));
  }
  return absl::OkStatus();
}

bool SameEntries(absl::Span<const CopyEntry> a, absl::Span<const CopyEntry> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const CopyEntry& x, const CopyEntry& y) {
                      return x.src == y.src && x.dst == y.dst && x.num_elements == y.num_elements &&
                             x.src_dtype == y.src_dtype && x.dst_dtype == y.dst_dtype;
                    });
}

bool Aligned(const void* p, int size) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(size) == 0;
}

absl::Status PlanInto(absl::Span<const CopyEntry> entries, double scale, const PlanOptions& options,
                      BatchedCopyPlan* plan) {
  CHORUS_RETURN_IF_ERROR(CheckOptions(options));
  if (entries.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PlanBatchedCopy: ", entries.size(), " entries (at most 2^32-1)"));
  }
  std::vector<CopyKind> kinds(entries.size());
  CopyKind kind = CopyKind::kBytes;
  int64_t total_chunks = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const CopyEntry& e = entries[i];
    if (e.num_elements < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PlanBatchedCopy: ", EntryName(i), " has a negative element count ", e.num_elements));
    }
    // Batches are usually of one dtype pair: look the kind up only when the pair changes.
    if (i == 0 || e.src_dtype != entries[i - 1].src_dtype ||
        e.dst_dtype != entries[i - 1].dst_dtype) {
      absl::StatusOr<CopyKind> k = CopyKindFor(e.src_dtype, e.dst_dtype, scale);
      if (!k.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("PlanBatchedCopy: ", EntryName(i), ": ", k.status().message()));
      }
      kind = *k;
    }
    kinds[i] = kind;
    if (e.num_elements == 0) continue;
    if (e.src == nullptr || e.dst == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("PlanBatchedCopy: ", EntryName(i),
                                                     " has a null ",
                                                     e.src == nullptr ? "source" : "destination",
                                                     " pointer and ", e.num_elements, " elements"));
    }
    const int ss = CopyKindSrcSize(kind);
    const int ds = CopyKindDstSize(kind);
    if (!Aligned(e.src, ss) || !Aligned(e.dst, ds)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PlanBatchedCopy: ", EntryName(i), " (", CopyKindName(kind), ") needs its source ",
          "aligned to ", ss, " bytes and its destination to ", ds, " bytes"));
    }
    if (e.num_elements > (int64_t{1} << 60)) {
      return absl::InvalidArgumentError(absl::StrCat("PlanBatchedCopy: ", EntryName(i),
                                                     " has too many elements: ", e.num_elements));
    }
    const int64_t per_chunk = options.chunk_bytes / std::max(ss, ds);
    total_chunks += (Units(e, kind) + per_chunk - 1) / per_chunk;
  }
  if (total_chunks > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("PlanBatchedCopy: ", total_chunks,
                                                   " chunks (at most 2^31-1); raise chunk_bytes"));
  }
  if (options.check_overlap) CHORUS_RETURN_IF_ERROR(CheckOverlap(entries, kinds));

  plan->scale = scale;
  plan->num_entries = entries.size();
  plan->chunks.reserve(static_cast<size_t>(total_chunks));
  plan->origins.reserve(static_cast<size_t>(total_chunks));
  for (size_t i = 0; i < entries.size(); ++i) {
    const CopyEntry& e = entries[i];
    if (e.num_elements == 0) continue;
    const CopyKind kind = kinds[i];
    const int ss = CopyKindSrcSize(kind);
    const int ds = CopyKindDstSize(kind);
    const int64_t per_chunk = options.chunk_bytes / std::max(ss, ds);
    const int64_t units = Units(e, kind);
    // Byte offsets of kBytes chunks are multiples of 16, hence of the element size.
    const int64_t units_per_element =
        kind == CopyKind::kBytes ? static_cast<int64_t>(DataTypeSize(e.src_dtype)) : 1;
    const auto* src = static_cast<const uint8_t*>(e.src);
    auto* dst = static_cast<uint8_t*>(e.dst);
    for (int64_t off = 0; off < units; off += per_chunk) {
      CopyChunk c;
      c.src = src + off * ss;
      c.dst = dst + off * ds;
      c.count = static_cast<uint32_t>(std::min(per_chunk, units - off));
      c.kind = kind;
      plan->chunks.push_back(c);
      plan->origins.push_back({static_cast<uint32_t>(i), off / units_per_element});
    }
    plan->bytes_read += units * ss;
    plan->bytes_written += units * ds;
  }
  return absl::OkStatus();
}

}  // namespace

const char* CopyKindName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kBytes:
      return "bytes";
    case CopyKind::kScaleUint8:
      return "scale_uint8";
    case CopyKind::kScaleInt8:
      return "scale_int8";
    case CopyKind::kScaleInt16:
      return "scale_int16";
    case CopyKind::kScaleInt32:
      return "scale_int32";
    case CopyKind::kScaleInt64:
      return "scale_int64";
    case CopyKind::kScaleFloat16:
      return "scale_float16";
    case CopyKind::kScaleBfloat16:
      return "scale_bfloat16";
    case CopyKind::kScaleFloat32:
      return "scale_float32";
    case CopyKind::kScaleFloat64:
      return "scale_float64";
    case CopyKind::kFloat32ToFloat16:
      return "float32_to_float16";
    case CopyKind::kFloat16ToFloat32:
      return "float16_to_float32";
    case CopyKind::kFloat32ToBfloat16:
      return "float32_to_bfloat16";
    case CopyKind::kBfloat16ToFloat32:
      return "bfloat16_to_float32";
  }
  return "unknown";
}

absl::StatusOr<CopyKind> CopyKindFor(DataType src_dtype, DataType dst_dtype, double scale) {
  if (!IsValidDataType(static_cast<int32_t>(src_dtype)) ||
      !IsValidDataType(static_cast<int32_t>(dst_dtype))) {
    return absl::InvalidArgumentError(absl::StrCat("undefined data type (",
                                                   static_cast<int32_t>(src_dtype), " -> ",
                                                   static_cast<int32_t>(dst_dtype), ")"));
  }
  if (src_dtype == dst_dtype) {
    if (scale == 1.0) return CopyKind::kBytes;
    switch (src_dtype) {
      case DataType::kUint8:
        return CopyKind::kScaleUint8;
      case DataType::kInt8:
        return CopyKind::kScaleInt8;
      case DataType::kInt16:
        return CopyKind::kScaleInt16;
      case DataType::kInt32:
        return CopyKind::kScaleInt32;
      case DataType::kInt64:
        return CopyKind::kScaleInt64;
      case DataType::kFloat16:
        return CopyKind::kScaleFloat16;
      case DataType::kBfloat16:
        return CopyKind::kScaleBfloat16;
      case DataType::kFloat32:
        return CopyKind::kScaleFloat32;
      case DataType::kFloat64:
        return CopyKind::kScaleFloat64;
      case DataType::kBool:
        break;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("bool tensors cannot be scaled (scale ", scale, ")"));
  }
  if (src_dtype == DataType::kFloat32 && dst_dtype == DataType::kFloat16) {
    return CopyKind::kFloat32ToFloat16;
  }
  if (src_dtype == DataType::kFloat16 && dst_dtype == DataType::kFloat32) {
    return CopyKind::kFloat16ToFloat32;
  }
  if (src_dtype == DataType::kFloat32 && dst_dtype == DataType::kBfloat16) {
    return CopyKind::kFloat32ToBfloat16;
  }
  if (src_dtype == DataType::kBfloat16 && dst_dtype == DataType::kFloat32) {
    return CopyKind::kBfloat16ToFloat32;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported cast from ", DataTypeName(src_dtype), " to ", DataTypeName(dst_dtype),
      " (supported: same dtype, float32 <-> float16, float32 <-> bfloat16)"));
}

int CopyKindSrcSize(CopyKind kind) {
  return ValidKind(kind) ? kSrcSize[static_cast<int>(kind)] : 0;
}

int CopyKindDstSize(CopyKind kind) {
  return ValidKind(kind) ? kDstSize[static_cast<int>(kind)] : 0;
}

absl::Status PlanBatchedCopy(absl::Span<const CopyEntry> entries, double scale,
                             const PlanOptions& options, BatchedCopyPlan* plan) {
  plan->scale = scale;
  plan->chunks.clear();
  plan->origins.clear();
  plan->num_entries = 0;
  plan->bytes_read = 0;
  plan->bytes_written = 0;
  absl::Status status = PlanInto(entries, scale, options, plan);
  if (!status.ok()) {
    plan->chunks.clear();
    plan->origins.clear();
    plan->num_entries = 0;
    plan->bytes_read = 0;
    plan->bytes_written = 0;
  }
  return status;
}

absl::StatusOr<BatchedCopyPlan> PlanBatchedCopy(absl::Span<const CopyEntry> entries, double scale,
                                                const PlanOptions& options) {
  BatchedCopyPlan plan;
  absl::Status status = PlanBatchedCopy(entries, scale, options, &plan);
  if (!status.ok()) return status;
  return plan;
}

CopyPlanCache::CopyPlanCache(PlanOptions options, size_t capacity)
    : options_(options), kept_(std::max<size_t>(capacity, 1)) {}

absl::StatusOr<const BatchedCopyPlan*> CopyPlanCache::Get(absl::Span<const CopyEntry> entries,
                                                          double scale) {
  ++clock_;
  Kept* oldest = &kept_[0];
  for (Kept& k : kept_) {
    if (k.last_use != 0 && k.scale == scale && SameEntries(k.entries, entries)) {
      k.last_use = clock_;
      ++hits_;
      return &k.plan;
    }
    if (k.last_use < oldest->last_use) oldest = &k;
  }
  ++misses_;
  oldest->last_use = 0;
  CHORUS_RETURN_IF_ERROR(PlanBatchedCopy(entries, scale, options_, &oldest->plan));
  oldest->entries.assign(entries.begin(), entries.end());
  oldest->scale = scale;
  oldest->last_use = clock_;
  return &oldest->plan;
}

FusionLayout PackFusionLayout(absl::Span<const int64_t> num_elements, DataType dtype,
                              int64_t align_bytes) {
  FusionLayout layout;
  layout.offsets.reserve(num_elements.size());
  const auto esize = static_cast<int64_t>(DataTypeSize(dtype));
  const int64_t mask = std::max<int64_t>(align_bytes, 1) - 1;
  int64_t end = 0;
  for (const int64_t n : num_elements) {
    const int64_t off = (end + mask) & ~mask;
    layout.offsets.push_back(off);
    end = off + n * esize;
  }
  layout.total_bytes = end;
  return layout;
}

}  // namespace chorus::ops::gpu
