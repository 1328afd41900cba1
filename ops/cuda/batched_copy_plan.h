// File: ops/cuda/batched_copy_plan.h
//
// Host-side planning of the batched fusion copy: N tensors copied into (or out of) one fusion
// buffer by ONE kernel launch (ops/cuda/batched_copy.h), with an optional scale factor and a
// float32 <-> float16/bfloat16 cast fused into the copy. No CUDA dependency: it builds and is
// unit-tested without CUDA, and never dereferences the pointers it plans for. Per element it
// does exactly what the CPU path does (CopyKindFor). How plans are cut into chunks, and a usage
// example: docs/gpu.md.
//
// Thread-safety: plain values and pure functions (thread-compatible).
#ifndef CHORUS_OPS_CUDA_BATCHED_COPY_PLAN_H_
#define CHORUS_OPS_CUDA_BATCHED_COPY_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "chorus/types.h"

namespace chorus::ops::gpu {

// One tensor, or one piece of a tensor, to copy: `num_elements` elements of `src_dtype` at
// `src` become `num_elements` elements of `dst_dtype` at `dst`. The pointers are borrowed (and
// only stored); both may be null when num_elements == 0.
struct CopyEntry {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t num_elements = 0;
  DataType src_dtype = DataType::kFloat32;
  DataType dst_dtype = DataType::kFloat32;
};

// What the kernel does to the elements of one chunk. Values are only meaningful inside one
// build (host plan and device kernel are compiled together).
enum class CopyKind : uint8_t {
  kBytes = 0,  // byte copy; CopyChunk::count is in bytes
  kScaleUint8,
  kScaleInt8,
  kScaleInt16,
  kScaleInt32,
  kScaleInt64,
  kScaleFloat16,
  kScaleBfloat16,
  kScaleFloat32,
  kScaleFloat64,
  kFloat32ToFloat16,
  kFloat16ToFloat32,
  kFloat32ToBfloat16,
  kBfloat16ToFloat32,
};
inline constexpr int kNumCopyKinds = 14;

// "bytes", "scale_float16", "float32_to_bfloat16", ...; "unknown" out of range.
const char* CopyKindName(CopyKind kind);

// The kind that copies src_dtype to dst_dtype with `scale`. Semantics, per element (exactly
// those of the CPU path, ops/cpu/reduce_kernels.h, which ops/cuda/batched_copy_reference.h runs
// on the host):
//   same dtype, scale == 1       a byte copy (any dtype, bool included; no alignment needed)
//   same dtype, scale != 1       ScaleCopy: integers multiply in double and truncate toward
//                                zero (saturating, NaN -> 0); float16/bfloat16 widen to
//                                float32, multiply by float(scale), round to nearest even;
//                                float32 multiplies by float(scale), float64 by scale.
//                                bool cannot be scaled.
//   float32 -> float16/bfloat16  round_to_nearest_even(x * float(scale))
//   float16/bfloat16 -> float32  widen(x) * float(scale)
// Every other dtype pair is rejected. A NaN stays a NaN, but its sign and payload are not
// preserved by the scaling and casting kinds (GPUs return a canonical NaN from arithmetic).
// Errors: InvalidArgument for an undefined dtype, a pair that is not supported, or scaling
// bool.
absl::StatusOr<CopyKind> CopyKindFor(DataType src_dtype, DataType dst_dtype, double scale);

// Bytes one element occupies at the source / destination of `kind` (1 / 1 for kBytes).
int CopyKindSrcSize(CopyKind kind);
int CopyKindDstSize(CopyKind kind);

// One unit of kernel work, executed by one thread block. Self-contained (the pointers are
// already offset into the entry), so the kernel reads one record per block.
struct CopyChunk {
  const void* src = nullptr;
  void* dst = nullptr;
  uint32_t count = 0;  // elements; bytes for CopyKind::kBytes
  CopyKind kind = CopyKind::kBytes;
  uint8_t reserved[3] = {0, 0, 0};
};
static_assert(sizeof(CopyChunk) == 24, "the device table and kernel parameters assume 24 bytes");

// Where a chunk came from (host-side bookkeeping, parallel to BatchedCopyPlan::chunks).
struct ChunkOrigin {
  uint32_t entry = 0;          // index into the planned entries
  int64_t element_offset = 0;  // first element of the entry this chunk covers
};

struct PlanOptions {
  // Upper bound on the bytes a chunk reads and writes (one thread block's work). A multiple of
  // 16 in [256, 2^31). 64 KiB keeps a few thousand blocks in flight for a 100 MB batch.
  int64_t chunk_bytes = int64_t{64} << 10;
  // Reject batches whose destination ranges overlap each other or any source range of another
  // entry (the kernel would race). Costs O(N log N) in the number of entries; turn it off only
  // for layouts that are correct by construction (a fusion buffer and distinct tensors).
  bool check_overlap = true;
};

struct BatchedCopyPlan {
  double scale = 1.0;
  std::vector<CopyChunk> chunks;     // in entry order, each entry's chunks in element order
  std::vector<ChunkOrigin> origins;  // origins[i] describes chunks[i]
  size_t num_entries = 0;
  int64_t bytes_read = 0;     // sum over entries of num_elements * source element size
  int64_t bytes_written = 0;  // sum over entries of num_elements * destination element size
};

// Plans `entries` into `*plan`, reusing its vectors' capacity (the hot path replans every
// batch). On error `*plan` is left empty (no chunks).
// Errors (InvalidArgument, naming the entry): negative num_elements; an unsupported kind (see
// CopyKindFor); a null src or dst with num_elements > 0; a src or dst not aligned to its
// element size for a kind other than kBytes; more than 2^32-1 entries or 2^31-1 chunks; bad
// options; with check_overlap, overlapping ranges (an entry with src == dst and equal element
// sizes, i.e. in-place scaling, is allowed).
absl::Status PlanBatchedCopy(absl::Span<const CopyEntry> entries, double scale,
                             const PlanOptions& options, BatchedCopyPlan* plan);
absl::StatusOr<BatchedCopyPlan> PlanBatchedCopy(absl::Span<const CopyEntry> entries, double scale,
                                                const PlanOptions& options = {});

// The last few plans and the inputs they were planned from. A training step launches the same
// batches on the same tensors step after step, and a plan is a pure function of its inputs, so
// the GPU data plane replans (a loop over every 64 KiB chunk: 3200 records for ResNet-50's
// copy-in and copy-out) only when a batch or its tensors changed.
//
// Thread-safety: thread-compatible (the GPU data plane's one background thread uses it).
class CopyPlanCache {
 public:
  explicit CopyPlanCache(PlanOptions options = {}, size_t capacity = 16);

  // The plan of `entries` with `scale` under the cache's options: a kept one planned from equal
  // inputs, else one planned now in place of the least recently used. Valid until the next
  // call. Errors as PlanBatchedCopy's (nothing is kept for them).
  absl::StatusOr<const BatchedCopyPlan*> Get(absl::Span<const CopyEntry> entries, double scale);

  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  struct Kept {
    std::vector<CopyEntry> entries;
    double scale = 1.0;
    BatchedCopyPlan plan;
    uint64_t last_use = 0;  // 0: holds nothing
  };

  const PlanOptions options_;
  std::vector<Kept> kept_;
  uint64_t clock_ = 0;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

// Byte offsets for tensors of `num_elements[i]` elements of `dtype` packed one after another
// into a fusion buffer, each offset rounded up to `align_bytes` (a power of two; 1 packs
// densely, as the CPU executor does; 16 lets every tensor use 16-byte vector accesses).
struct FusionLayout {
  std::vector<int64_t> offsets;  // bytes from the buffer's start, one per tensor
  int64_t total_bytes = 0;       // end of the last tensor (not rounded up)
};
FusionLayout PackFusionLayout(absl::Span<const int64_t> num_elements, DataType dtype,
                              int64_t align_bytes);

}  // namespace chorus::ops::gpu

#endif  // CHORUS_OPS_CUDA_BATCHED_COPY_PLAN_H_
