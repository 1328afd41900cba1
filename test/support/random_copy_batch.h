// File: test/support/random_copy_batch.h
//
// Random batches of the batched fusion copy (ops/cuda/batched_copy_plan.h) laid out in one host
// byte arena, and the whole-arena comparison that checks a run of one against the expected
// bytes. Shared by the host tests of the planner and reference executor
// (test/unit/batched_copy_plan_test.cc) and the GPU tests of the kernels
// (test/gpu/batched_copy_gpu_test.cc), so both draw their layouts from one generator.
//
// Every function is deterministic given its rng/seed. The functions that check (RandomArenaBatch,
// CountMismatches) use Catch2 assertions, so call them from inside a test case. Built without
// CUDA (chorus_copy_batch_testing in test/CMakeLists.txt).
#ifndef CHORUS_TEST_SUPPORT_RANDOM_COPY_BATCH_H_
#define CHORUS_TEST_SUPPORT_RANDOM_COPY_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "chorus/types.h"
#include "ops/cuda/batched_copy_plan.h"

namespace chorus::testing {

// Every defined chorus dtype.
inline constexpr DataType kAllDataTypes[] = {
    DataType::kUint8,   DataType::kInt8,    DataType::kInt16,    DataType::kInt32,
    DataType::kInt64,   DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32,
    DataType::kFloat64, DataType::kBool};

// A (source, destination) dtype pair of one copy entry.
struct DtypePair {
  DataType src, dst;
};

// The pairs the batched copy supports: every dtype to itself, then float32 <-> float16 and
// float32 <-> bfloat16.
std::vector<DtypePair> SupportedCopyPairs();

// Overwrites every byte of `v` with random bits (8 bytes per draw).
void FillBytes(std::mt19937_64& rng, std::vector<uint8_t>& v);

// Fills `n` elements of `dtype` at p: random bit patterns (NaN, inf, subnormals included), and
// for float32 also values in the float16 range and near its limits.
void FillRandom(std::mt19937_64& rng, uint8_t* p, int64_t n, DataType dtype);

// A batch whose entries all point into `arena`. Copying or moving the struct keeps the pointers
// valid (they point into the vector's heap buffer); copying `arena` alone does not rebase them.
struct ArenaBatch {
  std::vector<uint8_t> arena;
  std::vector<ops::gpu::CopyEntry> entries;  // pointers into arena
  double scale = 1.0;
};

// How RandomArenaBatch draws a batch.
struct RandomBatchOptions {
  int max_entries = 40;  // each batch has 1 to max_entries entries
  // The element count of one entry (may be 0). Required.
  int64_t (*count)(std::mt19937_64& rng) = nullptr;
  // The arena's initial bytes (what the destinations hold before the copy).
  void (*fill_arena)(std::mt19937_64& rng, std::vector<uint8_t>& arena) = FillBytes;
};

// A random batch from `seed`: a random scale, random supported dtype pairs (bool only without
// scaling), sources in the first part of the arena and destinations after them, about one in
// four same-dtype entries in place (source == destination), random gaps of up to 39 bytes.
// Byte copies start at any offset, typed kinds at element boundaries. The sources hold
// FillRandom values.
ArenaBatch RandomArenaBatch(uint64_t seed, const RandomBatchOptions& options);

// Whether the element of `dtype` at p is a NaN (false for non-floating dtypes).
bool IsNanElement(DataType dtype, const uint8_t* p);

// A destination range where a NaN may differ in payload: [begin, end) bytes of elements of
// `dtype`, as offsets from an arena's base.
struct NanRange {
  size_t begin, end;
  DataType dtype;
};

// The destinations of `entries` (pointers into the arena at `base`) whose kind is a scaling or
// casting one to a floating dtype, sorted by begin: where a NaN keeps only its NaN-ness.
std::vector<NanRange> NanRanges(const std::vector<ops::gpu::CopyEntry>& entries, double scale,
                                const uint8_t* base);

// The number of bytes of `want` where `got` differs, except inside an element of `nan_ranges`
// (sorted by begin, disjoint) that is a NaN in both. Requires got.size() >= want.size(); on a
// mismatch, logs the first one (UNSCOPED_INFO).
size_t CountMismatches(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                       const std::vector<NanRange>& nan_ranges);

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_RANDOM_COPY_BATCH_H_
