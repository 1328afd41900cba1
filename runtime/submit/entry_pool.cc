#include "runtime/submit/entry_pool.h"

#include <string>
#include <utility>

namespace chorus::runtime {

std::unique_ptr<TensorEntry> EntryPool::Take() {
  std::unique_ptr<TensorEntry> entry;
  {
    MutexLock lock(&mu_);
    if (!free_.empty()) {
      entry = std::move(free_.back());
      free_.pop_back();
    }
  }
  if (entry == nullptr) return std::make_unique<TensorEntry>();
  // The old op's own buffers are freed here, on the submitting thread that allocated them.
  entry->ResetForReuse();
  return entry;
}

void EntryPool::Retire(std::vector<std::unique_ptr<TensorEntry>>* entries) {
  {
    MutexLock lock(&mu_);
    for (std::unique_ptr<TensorEntry>& entry : *entries) {
      if (free_.size() >= capacity_) break;
      if (entry != nullptr) free_.push_back(std::move(entry));
    }
  }
  entries->clear();  // frees what did not fit, outside the lock
}

size_t EntryPool::size() const {
  MutexLock lock(&mu_);
  return free_.size();
}

}  // namespace chorus::runtime
