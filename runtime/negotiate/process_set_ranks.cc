#include "runtime/negotiate/process_set_ranks.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chorus::runtime {
namespace {

bool IsStrictlyAscending(absl::Span<const int32_t> ranks) {
  return std::adjacent_find(ranks.begin(), ranks.end(), std::greater_equal<int32_t>()) ==
         ranks.end();
}

}  // namespace

absl::Status CheckProcessSetRanks(absl::Span<const int32_t> ranks, int32_t world_size) {
  if (!ranks.empty() && IsStrictlyAscending(ranks) && ranks.front() >= 0 &&
      ranks.back() < world_size) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("process set ranks [", absl::StrJoin(ranks, ", "),
                   "] must be non-empty, ascending, unique world ranks below ", world_size));
}

}  // namespace chorus::runtime
