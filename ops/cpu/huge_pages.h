// File: ops/cpu/huge_pages.h
//
// Backs large CPU tensors with transparent huge pages before the data plane moves them.
//
// Note [Huge pages for large tensors]
// Frameworks allocate each large tensor with malloc, i.e. its own mmap of 4 KiB pages. Moving
// such a tensor between processes on one host (Open MPI's and UCX's shared-memory transports
// copy with process_vm_readv/writev) pins and walks it page by page, and the reduction walks it
// through the TLB: on this project's 2-core machine, 2 ranks allreducing ResNet-50's 161
// gradients one MPI call per tensor took 42.8 ms on 4 KiB pages and 32.1 ms once the 2 MiB-
// aligned interiors of the tensors were collapsed into huge pages (NumPy, which advises huge
// pages for its own large arrays, is as fast). So before a tensor is reduced in place, the
// aligned 2 MiB pages inside it are collapsed (madvise MADV_COLLAPSE, Linux >= 6.1): the first
// time this costs a copy of those pages, later it is free. Nothing outside the tensor's own
// bytes is touched, the contents are unchanged, and failures (an older kernel, memory that is
// not anonymous, THP disabled) only mean the tensor stays on small pages.
//
// A range already collapsed is skipped, except every kRecheckEvery sightings: memory freed and
// mapped again at the same address (a framework that reallocates gradients every step) starts
// on small pages again and is collapsed at the next recheck.
//
// Thread-safety: thread-compatible (the background thread owns one).
#ifndef CHORUS_OPS_CPU_HUGE_PAGES_H_
#define CHORUS_OPS_CPU_HUGE_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"

namespace chorus::ops {

// Frees a buffer from AllocateHugePageBuffer.
struct HugePageBufferDeleter {
  void operator()(std::byte* p) const;
};
using HugePageBuffer = std::unique_ptr<std::byte[], HugePageBufferDeleter>;

// An uninitialised buffer of at least `bytes` bytes, 2 MiB-aligned and advised to be backed by
// huge pages as it is first touched (madvise MADV_HUGEPAGE; plain pages where that is refused).
// Null when out of memory.
HugePageBuffer AllocateHugePageBuffer(int64_t bytes);

class HugePageAdvisor {
 public:
  static constexpr uintptr_t kHugePageBytes = uintptr_t{2} << 20;
  static constexpr int32_t kRecheckEvery = 64;

  // A disabled advisor does nothing; neither does one on a kernel without MADV_COLLAPSE.
  explicit HugePageAdvisor(bool enabled);

  // Whether Advise does anything here.
  bool enabled() const { return enabled_; }

  // Collapses the 2 MiB-aligned pages inside [data, data + bytes) into huge pages (see the
  // Note). Cheap for ranges seen before; a no-op when nothing aligned fits inside.
  void Advise(const void* data, int64_t bytes);

  // Bytes this advisor asked the kernel to collapse successfully, and calls that failed
  // (for tests and diagnostics).
  int64_t collapsed_bytes() const { return collapsed_bytes_; }
  int64_t failures() const { return failures_; }

 private:
  struct Seen {
    uintptr_t end = 0;
    int32_t sightings = 0;
  };
  bool enabled_;
  absl::flat_hash_map<uintptr_t, Seen> seen_;  // by aligned start
  int64_t collapsed_bytes_ = 0;
  int64_t failures_ = 0;
};

}  // namespace chorus::ops

#endif  // CHORUS_OPS_CPU_HUGE_PAGES_H_
