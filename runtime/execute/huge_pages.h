// File: runtime/execute/huge_pages.h
//
// Backs large CPU tensors and the fusion buffer with transparent huge pages before the data
// plane moves them: on 4 KiB pages the shared-memory transports and the reductions are markedly
// slower (Note [Huge pages for large tensors] in docs/fusion.md). Best effort and invisible to
// the data: no byte changes, and a refusal (an older kernel, pinned memory, THP disabled) only
// leaves the pages small.
//
// Thread-safety: thread-compatible (the background thread owns one).
#ifndef CHORUS_RUNTIME_EXECUTE_HUGE_PAGES_H_
#define CHORUS_RUNTIME_EXECUTE_HUGE_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"

namespace chorus::runtime {

inline constexpr uintptr_t kHugePageBytes = uintptr_t{2} << 20;

// The 2 MiB boundary at or below / at or above `p`.
constexpr uintptr_t HugePageFloor(uintptr_t p) { return p & ~(kHugePageBytes - 1); }
constexpr uintptr_t HugePageCeil(uintptr_t p) { return HugePageFloor(p + kHugePageBytes - 1); }

// Unmaps a buffer from AllocateHugePageBuffer.
struct HugePageBufferDeleter {
  size_t bytes = 0;  // the mapping's length
  void operator()(std::byte* p) const;
};
using HugePageBuffer = std::unique_ptr<std::byte[], HugePageBufferDeleter>;

// A buffer of at least `bytes` bytes (zero until written), in a fresh 2 MiB-aligned mapping
// advised, when `huge` is true, to be backed by huge pages as it is first touched (madvise
// MADV_HUGEPAGE; plain pages where that is refused). A fresh mapping, not malloc: memory malloc
// recycles may already sit on small pages. Null when out of memory.
HugePageBuffer AllocateHugePageBuffer(int64_t bytes, bool huge = true);

class HugePageAdvisor {
 public:
  static constexpr int32_t kRecheckEvery = 64;

  // A disabled advisor does nothing; neither does one on a kernel without MADV_COLLAPSE.
  explicit HugePageAdvisor(bool enabled);

  // Whether Advise does anything here.
  bool enabled() const { return enabled_; }

  // Collapses the 2 MiB pages that [data, data + bytes) overlaps into huge pages where the
  // kernel can (Note [Huge pages for large tensors] in docs/fusion.md); nothing for ranges
  // under 2 MiB. Cheap for ranges seen before: a range already collapsed is skipped, except
  // every kRecheckEvery sightings (memory freed and mapped again at the same address is back
  // on small pages).
  void Advise(const void* data, int64_t bytes);

  // Bytes of the ranges the kernel accepted the advice for (it collapses what lies within one
  // mapping and silently skips 2 MiB pages that straddle two), and calls it refused in part or
  // in whole (for tests and diagnostics).
  int64_t advised_bytes() const { return advised_bytes_; }
  int64_t failures() const { return failures_; }

 private:
  struct Seen {
    uintptr_t end = 0;
    int32_t sightings = 0;
  };
  bool enabled_;
  absl::flat_hash_map<uintptr_t, Seen> seen_;  // by aligned start
  int64_t advised_bytes_ = 0;
  int64_t failures_ = 0;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_EXECUTE_HUGE_PAGES_H_
