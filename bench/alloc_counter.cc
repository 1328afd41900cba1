// The replacements of glibc's allocator entry points (see alloc_counter.h). Each counts, then
// calls glibc's implementation through its __libc_* alias, so behaviour is unchanged. Not in a
// sanitizer build (CHORUS_ALLOC_COUNTER_ENABLED 0), whose allocator must stay in place.
#include "bench/alloc_counter.h"

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#if CHORUS_ALLOC_COUNTER_ENABLED
extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
}
#endif

namespace {

std::atomic<int64_t> g_allocations{0};
thread_local int64_t t_allocations = 0;

constexpr int kFrames = 32;
struct Stack {
  void* frames[kFrames];
  int depth = 0;
};
Stack g_stacks[chorus::bench::kMaxCapturedStacks];
std::atomic<bool> g_capturing{false};
std::atomic<int> g_captured{0};

#if CHORUS_ALLOC_COUNTER_ENABLED
thread_local bool t_in_capture = false;  // the unwinder may allocate: not captured

inline void Count() {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  ++t_allocations;
  if (!g_capturing.load(std::memory_order_relaxed) || t_in_capture) return;
  const int slot = g_captured.fetch_add(1, std::memory_order_relaxed);
  if (slot >= chorus::bench::kMaxCapturedStacks) return;
  t_in_capture = true;
  g_stacks[slot].depth = backtrace(g_stacks[slot].frames, kFrames);
  t_in_capture = false;
}
#endif

}  // namespace

namespace chorus::bench {

bool AllocationsCounted() { return CHORUS_ALLOC_COUNTER_ENABLED != 0; }
int64_t ProcessAllocations() { return g_allocations.load(std::memory_order_relaxed); }
int64_t ThreadAllocations() { return t_allocations; }

void StartCapture() {
  if (!AllocationsCounted()) return;
  // The first backtrace loads the unwinder (which allocates): do it before capturing.
  void* warm[2];
  backtrace(warm, 2);
  g_captured.store(0, std::memory_order_relaxed);
  g_capturing.store(true, std::memory_order_release);
}

void StopCapture() { g_capturing.store(false, std::memory_order_release); }

int WriteCapturedStacks(int fd) {
  const int captured = g_captured.load(std::memory_order_acquire);
  const int n = captured < kMaxCapturedStacks ? captured : kMaxCapturedStacks;
  for (int i = 0; i < n; ++i) {
    dprintf(fd, "allocation %d of %d captured:\n", i + 1, captured);
    backtrace_symbols_fd(g_stacks[i].frames, g_stacks[i].depth, fd);
  }
  return n;
}

}  // namespace chorus::bench

#if CHORUS_ALLOC_COUNTER_ENABLED

extern "C" {

void* malloc(size_t size) {
  Count();
  return __libc_malloc(size);
}

void* calloc(size_t n, size_t size) {
  Count();
  return __libc_calloc(n, size);
}

void* realloc(void* p, size_t size) {
  Count();
  return __libc_realloc(p, size);
}

void* memalign(size_t alignment, size_t size) {
  Count();
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  Count();
  return __libc_memalign(alignment, size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  Count();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr && size != 0) return ENOMEM;
  *out = p;
  return 0;
}

}  // extern "C"

#endif  // CHORUS_ALLOC_COUNTER_ENABLED
