// The process set rank rule shared by Runtime, the handshake and the coordinator
// (runtime/negotiate/process_set_ranks.h).
#include "runtime/negotiate/process_set_ranks.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>

namespace chorus::runtime {
namespace {

TEST_CASE("CheckProcessSetRanks accepts ascending, unique world ranks", "[process_set_ranks]") {
  const std::vector<int32_t> ranks =
      GENERATE(std::vector<int32_t>{0}, std::vector<int32_t>{3}, std::vector<int32_t>{0, 2},
               std::vector<int32_t>{0, 1, 2, 3});
  CAPTURE(ranks);
  CHECK(CheckProcessSetRanks(ranks, 4).ok());
}

TEST_CASE("CheckProcessSetRanks rejects empty, unordered, repeated or out-of-world ranks",
          "[process_set_ranks]") {
  const std::vector<int32_t> ranks =
      GENERATE(std::vector<int32_t>{}, std::vector<int32_t>{1, 0}, std::vector<int32_t>{1, 1},
               std::vector<int32_t>{0, 2, 1}, std::vector<int32_t>{-1}, std::vector<int32_t>{-1, 0},
               std::vector<int32_t>{0, 4}, std::vector<int32_t>{4});
  CAPTURE(ranks);
  const absl::Status status = CheckProcessSetRanks(ranks, 4);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("CheckProcessSetRanks names the ranks and the world size", "[process_set_ranks]") {
  CHECK(CheckProcessSetRanks({2, 1, 5}, 3).message() ==
        "process set ranks [2, 1, 5] must be non-empty, ascending, unique world ranks below 3");
  CHECK(CheckProcessSetRanks({}, 2).message() ==
        "process set ranks [] must be non-empty, ascending, unique world ranks below 2");
}

TEST_CASE("CheckProcessSetRanks: a world of one rank has one valid set", "[process_set_ranks]") {
  CHECK(CheckProcessSetRanks({0}, 1).ok());
  CHECK_FALSE(CheckProcessSetRanks({1}, 1).ok());
  CHECK_FALSE(CheckProcessSetRanks({0}, 0).ok());
}

}  // namespace
}  // namespace chorus::runtime
