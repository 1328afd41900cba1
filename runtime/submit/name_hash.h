// File: runtime/submit/name_hash.h
//
// Hashing for the tables keyed by tensor name that every op passes through: the submission
// queue's in-flight names, the background loop's pending entries and the response cache. A
// small tensor's name is hashed at each of them, so the hash is a visible part of the per-op
// cost; XXH3 (libxxhash) hashes a typical 10-40 byte name several times faster than
// absl::Hash and mixes well enough for absl's Swiss tables, which take both their bucket and
// their control bits from the hash.
//
// Thread-safety: stateless.
#ifndef CHORUS_RUNTIME_SUBMIT_NAME_HASH_H_
#define CHORUS_RUNTIME_SUBMIT_NAME_HASH_H_

#include <cstddef>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"

namespace chorus::runtime {

// The XXH3 64-bit hash of `name`.
size_t HashName(absl::string_view name);

// Transparent: a table keyed by std::string is looked up with a string_view.
struct NameHash {
  using is_transparent = void;
  size_t operator()(absl::string_view name) const noexcept { return HashName(name); }
};

// `Key`: std::string (the table owns its names) or absl::string_view (it views names that
// live elsewhere for as long as the element).
template <typename Key, typename Value>
using NameMap = absl::flat_hash_map<Key, Value, NameHash, std::equal_to<>>;
template <typename Key>
using NameSet = absl::flat_hash_set<Key, NameHash, std::equal_to<>>;

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_SUBMIT_NAME_HASH_H_
