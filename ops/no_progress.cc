#include "ops/no_progress.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace chorus::ops {
namespace {

// The payload: "<bound in ns>\n<peers, comma-separated>\n<call>".
constexpr absl::string_view kPayloadUrl = "chorus.ops/no_progress";

}  // namespace

absl::Status NoProgressError(const NoProgress& what, std::string message) {
  absl::Status status = absl::UnavailableError(std::move(message));
  status.SetPayload(kPayloadUrl,
                    absl::Cord(absl::StrCat(absl::ToInt64Nanoseconds(what.bound), "\n",
                                            absl::StrJoin(what.peers, ","), "\n", what.call)));
  return status;
}

std::optional<NoProgress> NoProgressOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kPayloadUrl);  // an absl::optional<absl::Cord>
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  const std::vector<absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits('\n', 2));
  int64_t ns = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &ns)) return std::nullopt;
  NoProgress what;
  what.bound = absl::Nanoseconds(ns);
  what.call = std::string(parts[2]);
  for (absl::string_view peer : absl::StrSplit(parts[1], ',', absl::SkipEmpty())) {
    int32_t rank = 0;
    if (!absl::SimpleAtoi(peer, &rank)) return std::nullopt;
    what.peers.push_back(rank);
  }
  return what;
}

}  // namespace chorus::ops
