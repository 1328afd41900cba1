// File: runtime/negotiate/response_cache.h
//
// The response cache: the steady-state fast path of negotiation. Every rank holds an identical
// cache of single-tensor Responses, each at a bit position; a cycle's readiness is then one
// bitwise-AND allreduce of "which cached tensors I have pending" instead of a gather of
// requests (see Note [Cache bit vector] in runtime/negotiate/cache_bit_vector.h).
//
// Consistency: every rank calls Put, Touch and Erase with the same arguments in the same order
// (they are driven only by the globally ordered response list and the allreduced bit vector),
// so bit positions and LRU evictions agree across ranks without communication. Each rank also
// remembers its OWN request for the entry (its "signature"): a later request with the same name
// hits only if it equals that signature (ignoring request_rank).
//
// Thread-safety: thread-compatible (background-thread-only).
#ifndef CHORUS_RUNTIME_NEGOTIATE_RESPONSE_CACHE_H_
#define CHORUS_RUNTIME_NEGOTIATE_RESPONSE_CACHE_H_

#include <cstdint>
#include <list>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/message.h"
#include "runtime/submit/name_hash.h"

namespace chorus::runtime {

class ResponseCache {
 public:
  // capacity 0 disables the cache: Find always misses and Put does nothing.
  explicit ResponseCache(int32_t capacity);

  int32_t capacity() const;
  int32_t size() const;

  enum class State {
    kMiss,     // no entry with this name
    kHit,      // entry with this name and an equal signature
    kInvalid,  // entry with this name but a different signature: must be erased everywhere
  };
  struct Lookup {
    State state = State::kMiss;
    int32_t bit = -1;  // valid for kHit and kInvalid
  };
  Lookup Find(const Request& local) const;

  // Inserts the entry for response.names[0], replacing any entry with that name (keeping its
  // bit), else taking the lowest free bit, else evicting the least recently used entry and
  // taking its bit. `local` is this rank's request for the tensor, or null when this rank does
  // not hold it (the entry then never hits here, but the bit stays consistent).
  // Returns the entry's bit.
  // REQUIRES: response is not an error and has exactly one name.
  int32_t Put(const Response& response, const Request* local);

  // REQUIRES: Contains(bit).
  const Response& Get(int32_t bit) const;
  bool Contains(int32_t bit) const;
  // A number that changes whenever the entry at `bit` is put, replaced or erased, and is never
  // given twice (0: no entry). What a lookup found at a bit is still there while the bit's
  // version is the one it saw (the background loop's bindings of registered ops).
  uint64_t VersionAt(int32_t bit) const {
    return Contains(bit) ? entries_[static_cast<size_t>(bit)].version : 0;
  }
  // Changes whenever any entry is put, replaced or erased (Touch leaves it): responses read
  // from the cache under one epoch are unchanged while it is the same.
  uint64_t epoch() const { return epoch_; }
  // Marks the entry most recently used.
  void Touch(int32_t bit);
  // Removes the entry; no-op when absent.
  void Erase(int32_t bit);
  void Clear();

 private:
  struct Entry {
    bool used = false;
    Response response;
    std::optional<Request> signature;  // this rank's request; nullopt: never hits here
    std::list<int32_t>::iterator lru;  // position in lru_ while used
    uint64_t version = 0;              // VersionAt
  };

  int32_t capacity_;
  std::vector<Entry> entries_;          // indexed by bit; grows up to capacity_
  NameMap<std::string, int32_t> bits_;  // name -> bit (lookup only, never iterated)
  std::list<int32_t> lru_;              // used bits, most recently used first
  std::set<int32_t> free_bits_;         // erased bits below entries_.size()
  uint64_t next_version_ = 1;
  uint64_t epoch_ = 1;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_NEGOTIATE_RESPONSE_CACHE_H_
