// File: runtime/huge_pages.h
//
// Backs large CPU tensors with transparent huge pages before the data plane moves them.
//
// Note [Huge pages for large tensors]
// Frameworks allocate each large tensor with malloc, i.e. an mmap of 4 KiB pages. Moving such a
// tensor between processes on one host (Open MPI's and UCX's shared-memory transports copy with
// process_vm_readv/writev) pins and walks it page by page, and the reduction walks it through
// the TLB. On this project's 2-core machine, 2 ranks allreducing ResNet-50's 161 gradients with
// one MPI call per tensor took 49.1 ms on 4 KiB pages, 38.6 ms with the 2 MiB
// pages lying wholly inside each tensor collapsed into huge pages, and 31.3 ms with
// every 2 MiB page the tensors overlap collapsed (in the same run, 4 MiB pieces of one NumPy
// buffer, which NumPy puts on huge pages itself: 39.3 ms).
//
// So before a tensor of at least 2 MiB is reduced in place, the 2 MiB pages it overlaps are
// collapsed into transparent huge pages (madvise MADV_COLLAPSE, Linux >= 6.1). The kernel
// collapses each such page that lies within one mapping and skips those that straddle two;
// consecutive tensors usually share one mapping, so most of a model's gradients end up on huge
// pages. When a neighbouring mapping makes the kernel refuse the call, the pages wholly inside
// the tensor are asked for alone. Bytes around the tensor that share its 2 MiB pages are
// collapsed with it: as when the kernel's khugepaged does this in the background, no byte
// changes and concurrent users of those bytes only wait a moment (pages there that were never
// touched get memory: at most 2 MiB at each end of a tensor). Smaller tensors are left alone,
// since their pages would be mostly other memory. The first time costs a copy of the pages,
// later it is free. Failures (an older kernel, pinned memory, THP disabled) only mean the pages
// stay small.
//
// A range already collapsed is skipped, except every kRecheckEvery sightings: memory freed and
// mapped again at the same address (a framework that reallocates gradients every step) starts
// on small pages again and is collapsed at the next recheck.
//
// Thread-safety: thread-compatible (the background thread owns one).
#ifndef CHORUS_RUNTIME_HUGE_PAGES_H_
#define CHORUS_RUNTIME_HUGE_PAGES_H_

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
  // kernel can (see the Note); nothing for ranges under 2 MiB. Cheap for ranges seen before.
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

#endif  // CHORUS_RUNTIME_HUGE_PAGES_H_
