#include "ops/cpu/huge_pages.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace chorus::ops {

namespace {

#if defined(__linux__) && !defined(MADV_COLLAPSE)
constexpr int MADV_COLLAPSE = 25;  // Linux 6.1; older headers lack the name
#endif

// The seen-range table forgets everything past this many ranges (a job that keeps allocating
// new large tensors): a forgotten range costs one cheap re-collapse.
constexpr size_t kMaxRanges = 1 << 16;

}  // namespace

void HugePageBufferDeleter::operator()(std::byte* p) const { std::free(p); }

HugePageBuffer AllocateHugePageBuffer(int64_t bytes) {
  const size_t rounded = (static_cast<size_t>(std::max<int64_t>(bytes, 1)) +
                          HugePageAdvisor::kHugePageBytes - 1) &
                         ~(HugePageAdvisor::kHugePageBytes - 1);
  void* p = std::aligned_alloc(HugePageAdvisor::kHugePageBytes, rounded);
#if defined(__linux__)
  if (p != nullptr) madvise(p, rounded, MADV_HUGEPAGE);  // a refusal leaves small pages
#endif
  return HugePageBuffer(static_cast<std::byte*>(p));
}

HugePageAdvisor::HugePageAdvisor(bool enabled) : enabled_(enabled) {
#if defined(__linux__)
  // A kernel without MADV_COLLAPSE refuses the advice itself, even for an empty range (which
  // it otherwise accepts at any page-aligned address without looking at the mapping).
  if (enabled_ && madvise(reinterpret_cast<void*>(kHugePageBytes), 0, MADV_COLLAPSE) != 0) {
    enabled_ = false;
  }
#else
  enabled_ = false;
#endif
}

void HugePageAdvisor::Advise(const void* data, int64_t bytes) {
#if defined(__linux__)
  if (!enabled_ || data == nullptr || bytes <= 0) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t start = (begin + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  const uintptr_t end = (begin + static_cast<uintptr_t>(bytes)) & ~(kHugePageBytes - 1);
  if (end <= start) return;
  if (seen_.size() >= kMaxRanges) seen_.clear();
  Seen& seen = seen_[start];
  if (seen.end == end && ++seen.sightings < kRecheckEvery) return;
  seen.end = end;
  seen.sightings = 0;
  if (madvise(reinterpret_cast<void*>(start), end - start, MADV_COLLAPSE) == 0) {
    collapsed_bytes_ += static_cast<int64_t>(end - start);
    return;
  }
  ++failures_;  // retried after kRecheckEvery sightings
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace chorus::ops
