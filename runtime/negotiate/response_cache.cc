// File: runtime/negotiate/response_cache.cc
//
// Bit-indexed entries, a name -> bit hash map for O(1) Find, and an intrusive LRU list of bits.
// Nothing here iterates a hash map, so bit assignment and eviction depend only on the sequence
// of calls, which is identical on every rank.
#include "runtime/negotiate/response_cache.h"

#include <cstdint>
#include <utility>

namespace chorus::runtime {
namespace {

// Request equality ignoring request_rank; copies only when the ranks differ.
bool SameSignature(const Request& a, const Request& b) {
  if (a.request_rank == b.request_rank) return a == b;
  Request copy = a;
  copy.request_rank = b.request_rank;
  return copy == b;
}

}  // namespace

ResponseCache::ResponseCache(int32_t capacity) : capacity_(capacity < 0 ? 0 : capacity) {}

int32_t ResponseCache::capacity() const { return capacity_; }

int32_t ResponseCache::size() const { return static_cast<int32_t>(bits_.size()); }

ResponseCache::Lookup ResponseCache::Find(const Request& local) const {
  auto it = bits_.find(local.name);
  if (it == bits_.end()) return {};
  const Entry& entry = entries_[static_cast<size_t>(it->second)];
  // An entry put without a local request is reported invalid (not a miss) when this rank later
  // asks for the name: other ranks may hit it, so it must be erased everywhere first.
  const bool hit = entry.signature.has_value() && SameSignature(local, *entry.signature);
  return {hit ? State::kHit : State::kInvalid, it->second};
}

int32_t ResponseCache::Put(const Response& response, const Request* local) {
  if (capacity_ == 0 || response.names.empty()) return -1;
  const std::string& name = response.names[0];
  int32_t bit;
  if (auto it = bits_.find(name); it != bits_.end()) {
    bit = it->second;
    lru_.erase(entries_[static_cast<size_t>(bit)].lru);
  } else {
    if (!free_bits_.empty()) {
      bit = *free_bits_.begin();
      free_bits_.erase(free_bits_.begin());
    } else if (static_cast<int32_t>(entries_.size()) < capacity_) {
      bit = static_cast<int32_t>(entries_.size());
      entries_.emplace_back();
    } else {
      bit = lru_.back();
      lru_.pop_back();
      bits_.erase(entries_[static_cast<size_t>(bit)].response.names[0]);
    }
    bits_.emplace(name, bit);
  }
  Entry& entry = entries_[static_cast<size_t>(bit)];
  entry.used = true;
  entry.version = next_version_++;
  ++epoch_;
  entry.response = response;
  if (local != nullptr) {
    entry.signature = *local;
  } else {
    entry.signature.reset();
  }
  lru_.push_front(bit);
  entry.lru = lru_.begin();
  return bit;
}

const Response& ResponseCache::Get(int32_t bit) const {
  return entries_[static_cast<size_t>(bit)].response;
}

bool ResponseCache::Contains(int32_t bit) const {
  return bit >= 0 && static_cast<size_t>(bit) < entries_.size() &&
         entries_[static_cast<size_t>(bit)].used;
}

void ResponseCache::Touch(int32_t bit) {
  if (!Contains(bit)) return;
  Entry& entry = entries_[static_cast<size_t>(bit)];
  lru_.splice(lru_.begin(), lru_, entry.lru);
}

void ResponseCache::Erase(int32_t bit) {
  if (!Contains(bit)) return;
  Entry& entry = entries_[static_cast<size_t>(bit)];
  bits_.erase(entry.response.names[0]);
  lru_.erase(entry.lru);
  entry = Entry{};
  free_bits_.insert(bit);
  ++epoch_;
}

void ResponseCache::Clear() {
  ++epoch_;
  entries_.clear();
  bits_.clear();
  lru_.clear();
  free_bits_.clear();
}

}  // namespace chorus::runtime
