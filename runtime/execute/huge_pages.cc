#include "runtime/execute/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace chorus::runtime {

namespace {

#if defined(__linux__) && !defined(MADV_COLLAPSE)
constexpr int MADV_COLLAPSE = 25;  // Linux 6.1; older headers lack the name
#endif

// The seen-range table forgets everything past this many ranges (a job that keeps allocating
// new large tensors): a forgotten range costs one cheap re-collapse.
constexpr size_t kMaxRanges = 1 << 16;

}  // namespace

void HugePageBufferDeleter::operator()(std::byte* p) const {
  if (p != nullptr) munmap(p, bytes);
}

HugePageBuffer AllocateHugePageBuffer(int64_t bytes, bool huge) {
  const size_t rounded = HugePageCeil(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  // Map one huge page more than needed and trim both ends to a 2 MiB boundary.
  void* raw = mmap(nullptr, rounded + kHugePageBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return HugePageBuffer(nullptr, HugePageBufferDeleter{0});
  const uintptr_t first = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = HugePageCeil(first);
  if (aligned > first) munmap(raw, aligned - first);
  const uintptr_t tail = first + kHugePageBytes - aligned;  // what lies past aligned + rounded
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + rounded), tail);
#if defined(MADV_HUGEPAGE)
  if (huge) madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);  // refused: small
#endif
  return HugePageBuffer(reinterpret_cast<std::byte*>(aligned), HugePageBufferDeleter{rounded});
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
  // Smaller tensors are left alone: collapsing the 2 MiB around a small tensor would mostly
  // move (and, where they were never touched, allocate) other memory.
  if (!enabled_ || data == nullptr || bytes < static_cast<int64_t>(kHugePageBytes)) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end_of_tensor = begin + static_cast<uintptr_t>(bytes);
  const uintptr_t start = HugePageFloor(begin);
  const uintptr_t end = HugePageCeil(end_of_tensor);
  if (seen_.size() >= kMaxRanges) seen_.clear();
  Seen& seen = seen_[start];
  if (seen.end == end && ++seen.sightings < kRecheckEvery) return;
  seen.end = end;
  seen.sightings = 0;
  if (madvise(reinterpret_cast<void*>(start), end - start, MADV_COLLAPSE) == 0) {
    advised_bytes_ += static_cast<int64_t>(end - start);
    return;
  }
  // Refused in part (ENOMEM: part of the range is not mapped; EAGAIN: a page could not be moved,
  // e.g. pinned) or cut short by a neighbouring mapping that cannot take huge pages (EINVAL: the
  // kernel stops at it). The 2 MiB pages wholly inside the tensor lie in its own mapping: ask
  // for those alone. Retried after kRecheckEvery sightings.
  ++failures_;
  const uintptr_t inner_start = HugePageCeil(begin);
  const uintptr_t inner_end = HugePageFloor(end_of_tensor);
  if (inner_end > inner_start &&
      madvise(reinterpret_cast<void*>(inner_start), inner_end - inner_start, MADV_COLLAPSE) == 0) {
    advised_bytes_ += static_cast<int64_t>(inner_end - inner_start);
  }
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace chorus::runtime
