#include "runtime/controller.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "base/status_macros.h"

namespace chorus::runtime {
namespace {

// Ranks named in a message; the rest are counted.
constexpr size_t kNamedRanks = 8;

}  // namespace

absl::StatusOr<std::vector<int>> RanksWithProblem(Controller& controller, bool here) {
  const int size = controller.size();
  const int rank = controller.rank();
  std::vector<uint64_t> fine((static_cast<size_t>(size) + 63) / 64, ~uint64_t{0});
  if (here) fine[static_cast<size_t>(rank) / 64] &= ~(uint64_t{1} << (rank % 64));
  CHORUS_RETURN_IF_ERROR(controller.AllreduceBitAnd(absl::MakeSpan(fine)));
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) {
    if ((fine[static_cast<size_t>(r) / 64] >> (r % 64) & 1) == 0) ranks.push_back(r);
  }
  return ranks;
}

absl::Status AgreeNoProblem(Controller& controller, const std::string& problem,
                            absl::string_view there) {
  CHORUS_ASSIGN_OR_RETURN(const std::vector<int> ranks,
                          RanksWithProblem(controller, !problem.empty()));
  if (ranks.empty()) return absl::OkStatus();
  if (!problem.empty()) return absl::InvalidArgumentError(problem);
  std::string named =
      absl::StrJoin(ranks.begin(), ranks.begin() + std::min(ranks.size(), kNamedRanks), ", ");
  if (ranks.size() > kNamedRanks)
    absl::StrAppend(&named, " and ", ranks.size() - kNamedRanks, " more");
  return absl::InvalidArgumentError(absl::StrCat("chorus init failed on rank",
                                                 ranks.size() == 1 ? " " : "s ", named, " (rank ",
                                                 controller.rank(), " is fine): ", there, "; see ",
                                                 ranks.size() == 1 ? "its error" : "their errors"));
}

}  // namespace chorus::runtime
