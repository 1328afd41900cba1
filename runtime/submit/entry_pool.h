// File: runtime/submit/entry_pool.h
//
// Recycles TensorEntry objects between the background loop, which retires them once their ops
// completed, and the submitting threads, which take them for new ops. A steady training loop
// then allocates no entries, and the strings and vectors of a recycled entry's request keep
// their capacity, so that a submitting thread seldom allocates and never frees memory that
// another thread allocated (a cross-thread free is the slow path of glibc's malloc).
//
// Thread-safety: thread-safe.
#ifndef CHORUS_RUNTIME_SUBMIT_ENTRY_POOL_H_
#define CHORUS_RUNTIME_SUBMIT_ENTRY_POOL_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"

#include "base/mutex.h"
#include "runtime/submit/tensor_entry.h"

namespace chorus::runtime {

class EntryPool {
 public:
  // At most `capacity` retired entries are kept; the others are freed.
  explicit EntryPool(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // A default-initialised entry (as TensorEntry{}), recycled when one is available. Only the
  // request's name and shape keep (empty) heap buffers from earlier use.
  std::unique_ptr<TensorEntry> Take() ABSL_LOCKS_EXCLUDED(mu_);

  // Takes the entries (empties *entries) for reuse; null elements are skipped. REQUIRES: their
  // callbacks have run and no other structure refers to them.
  void Retire(std::vector<std::unique_ptr<TensorEntry>>* entries) ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

  static constexpr size_t kDefaultCapacity = 1 << 14;

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::vector<std::unique_ptr<TensorEntry>> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_SUBMIT_ENTRY_POOL_H_
