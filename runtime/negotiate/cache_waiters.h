// File: runtime/negotiate/cache_waiters.h
//
// The background loop's entries that wait on the response cache: at most one per cache bit
// (two pending entries never share a name, and a bit belongs to one name), owned here while
// they wait, found by bit without hashing, and listed in bit order through a bitset. Each
// remembers the cache's version of its bit when it began to wait (ResponseCache::VersionAt),
// so that an entry whose bit was evicted or reused is recognised without comparing names.
//
// Thread-safety: none; the background loop's thread owns it.
#ifndef CHORUS_RUNTIME_NEGOTIATE_CACHE_WAITERS_H_
#define CHORUS_RUNTIME_NEGOTIATE_CACHE_WAITERS_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/submit/tensor_entry.h"

namespace chorus::runtime {

class CacheWaiters {
 public:
  // Bits 0 .. capacity-1.
  explicit CacheWaiters(int32_t capacity = 0)
      : entries_(static_cast<size_t>(capacity > 0 ? capacity : 0)),
        versions_(entries_.size(), 0),
        held_((entries_.size() + 63) / 64, 0) {}

  int32_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool Holds(int32_t bit) const { return Valid(bit) && entries_[Index(bit)] != nullptr; }
  TensorEntry* Get(int32_t bit) const { return Valid(bit) ? entries_[Index(bit)].get() : nullptr; }
  uint64_t VersionOf(int32_t bit) const { return versions_[Index(bit)]; }

  // `entry` waits on `bit` (of cache version `version`). False (the entry not taken) when the
  // bit is out of range or already holds an entry.
  bool Put(int32_t bit, uint64_t version, std::unique_ptr<TensorEntry>& entry) {
    if (!Valid(bit) || entries_[Index(bit)] != nullptr) return false;
    entries_[Index(bit)] = std::move(entry);
    versions_[Index(bit)] = version;
    held_[Index(bit) / 64] |= uint64_t{1} << (bit % 64);
    ++count_;
    return true;
  }
  // The entry waiting on `bit` (null when none), which stops waiting.
  std::unique_ptr<TensorEntry> Take(int32_t bit) {
    if (!Holds(bit)) return nullptr;
    held_[Index(bit) / 64] &= ~(uint64_t{1} << (bit % 64));
    --count_;
    return std::move(entries_[Index(bit)]);
  }

  // Calls f(bit, entry) for every waiting entry, in ascending bit order. f may Take(bit) its
  // own bit (and no other).
  template <typename F>
  void ForEach(F f) const {
    for (size_t w = 0; w < held_.size(); ++w) {
      uint64_t word = held_[w];
      while (word != 0) {
        const int b = __builtin_ctzll(word);
        word &= word - 1;
        const int32_t bit = static_cast<int32_t>(w * 64 + static_cast<size_t>(b));
        f(bit, entries_[static_cast<size_t>(bit)].get());
      }
    }
  }

 private:
  bool Valid(int32_t bit) const { return bit >= 0 && static_cast<size_t>(bit) < entries_.size(); }
  static size_t Index(int32_t bit) { return static_cast<size_t>(bit); }

  std::vector<std::unique_ptr<TensorEntry>> entries_;
  std::vector<uint64_t> versions_;
  std::vector<uint64_t> held_;  // bit b set: entries_[b] holds an entry
  int32_t count_ = 0;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_NEGOTIATE_CACHE_WAITERS_H_
