#include "runtime/submit/name_hash.h"

// The header-only build of XXH3: inlined here, nothing to link.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace chorus::runtime {

size_t HashName(absl::string_view name) {
  return static_cast<size_t>(XXH3_64bits(name.data(), name.size()));
}

}  // namespace chorus::runtime
