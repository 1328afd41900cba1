#include "runtime/ucx/controller_address_exchange.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

#include "base/status_macros.h"

namespace chorus::runtime {

absl::StatusOr<std::vector<std::string>> ControllerAddressExchange::AllGather(
    const std::string& mine) {
  std::vector<std::string> all;
  CHORUS_RETURN_IF_ERROR(controller_->GatherToRoot(mine, &all));
  // Rank 0 packs the addresses as length-prefixed strings and broadcasts them.
  std::string packed;
  for (const std::string& a : all) {
    const uint64_t n = a.size();
    packed.append(reinterpret_cast<const char*>(&n), sizeof(n));
    packed.append(a);
  }
  CHORUS_RETURN_IF_ERROR(controller_->BroadcastFromRoot(&packed));
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < packed.size()) {
    uint64_t n = 0;
    if (packed.size() - pos < sizeof(n)) break;
    std::memcpy(&n, packed.data() + pos, sizeof(n));
    pos += sizeof(n);
    if (packed.size() - pos < n) break;
    out.push_back(packed.substr(pos, n));
    pos += n;
  }
  if (pos != packed.size() || static_cast<int>(out.size()) != controller_->size()) {
    return absl::InternalError(absl::StrCat("malformed UCX address list from rank 0 (", out.size(),
                                            " of ", controller_->size(), ")"));
  }
  return out;
}

}  // namespace chorus::runtime
