// File: runtime/negotiate/process_set_registry.h
//
// Which process sets exist and who is in them, readable from any thread (Enqueue validates
// membership against it); the background loop is the only writer.
//
// Thread-safety: thread-safe.
#ifndef CHORUS_RUNTIME_NEGOTIATE_PROCESS_SET_REGISTRY_H_
#define CHORUS_RUNTIME_NEGOTIATE_PROCESS_SET_REGISTRY_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"

#include "base/mutex.h"

namespace chorus::runtime {

class ProcessSetRegistry {
 public:
  void Set(int32_t id, std::vector<int32_t> world_ranks) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    sets_[id] = std::move(world_ranks);
    version_.fetch_add(1, std::memory_order_release);
  }
  void Erase(int32_t id) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    sets_.erase(id);
    version_.fetch_add(1, std::memory_order_release);
  }
  // Forgets every set (a runtime re-formed in place registers the new world's global set).
  void Clear() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    sets_.clear();
    version_.fetch_add(1, std::memory_order_release);
  }
  // Changes with every Set, Erase and Clear: what a check of membership made under one
  // version still holds under it (registered ops, runtime/submit/op_slots.h).
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // The set's world ranks (ascending), or nullopt if no such set.
  std::optional<std::vector<int32_t>> Ranks(int32_t id) const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    auto it = sets_.find(id);
    if (it == sets_.end()) return std::nullopt;
    return it->second;
  }
  // What Enqueue checks, without copying the ranks: the set's size when it exists.
  struct Membership {
    bool exists = false;
    bool member = false;  // `rank` is one of the set's ranks
    int32_t size = 0;
  };
  Membership Find(int32_t id, int32_t rank) const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    Membership m;
    auto it = sets_.find(id);
    if (it == sets_.end()) return m;
    m.exists = true;
    m.member = std::binary_search(it->second.begin(), it->second.end(), rank);
    m.size = static_cast<int32_t>(it->second.size());
    return m;
  }
  std::vector<int32_t> Ids() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    std::vector<int32_t> ids;
    for (const auto& [id, ranks] : sets_) ids.push_back(id);
    return ids;
  }

 private:
  mutable Mutex mu_;
  std::map<int32_t, std::vector<int32_t>> sets_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> version_{1};
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_NEGOTIATE_PROCESS_SET_REGISTRY_H_
