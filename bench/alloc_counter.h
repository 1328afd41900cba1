// File: bench/alloc_counter.h
//
// Counts heap allocations in a whole process, and per thread: linking this library into an
// executable replaces malloc, calloc, realloc and the aligned allocators (C++'s operator new
// comes through malloc) with versions that count each call and then call glibc's. Not in a
// sanitizer build, whose allocator must stay in place: nothing is counted there. For the
// host-cost benchmark (allocations per step, bench/overhead.h) and the regression check that a
// registered op's steady state allocates nothing (test/alloc).
//
// Thread-safety: thread-safe; the counters are relaxed atomics (process) and thread-locals.
#ifndef CHORUS_BENCH_ALLOC_COUNTER_H_
#define CHORUS_BENCH_ALLOC_COUNTER_H_

#include <cstdint>

namespace chorus::bench {

// Whether allocations are counted (false in a sanitizer build).
bool AllocationsCounted();
// Allocations (malloc, calloc, realloc and the aligned allocators; not free) so far, in the
// whole process and on the calling thread (0 when not counted).
int64_t ProcessAllocations();
int64_t ThreadAllocations();

// Stacks of allocations, for saying what allocated where none was expected: while capture is
// on, the first kMaxCapturedStacks allocations in the process each keep their call stack
// (return addresses, no allocation while capturing). StartCapture clears what was kept.
inline constexpr int kMaxCapturedStacks = 4;
void StartCapture();
void StopCapture();
// Writes the kept stacks (symbolized as far as the dynamic symbol table allows; resolve the
// rest with addr2line) to the file descriptor; returns how many there were.
int WriteCapturedStacks(int fd);

}  // namespace chorus::bench

#endif  // CHORUS_BENCH_ALLOC_COUNTER_H_
