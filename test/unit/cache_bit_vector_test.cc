#include "runtime/negotiate/cache_bit_vector.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::runtime {
namespace {

// What one rank contributes to a cycle.
struct RankBits {
  uint64_t flags = 0;
  std::vector<int32_t> held;
  std::vector<int32_t> invalid;
};

// Runs one cycle of `ranks` (one vector each, all of `capacity`) through a real AND of their
// packed words, as Controller::AllreduceBitAnd does, and unpacks every rank's copy.
void Cycle(std::vector<CacheBitVector>& vectors, const std::vector<RankBits>& ranks) {
  std::vector<absl::Span<uint64_t>> packed;  // each rank's buffer, which the allreduce rewrites
  std::vector<uint64_t> and_words;
  for (size_t r = 0; r < vectors.size(); ++r) {
    vectors[r].Begin(ranks[r].flags);
    for (int32_t bit : ranks[r].held) vectors[r].Hold(bit);
    for (int32_t bit : ranks[r].invalid) vectors[r].Invalidate(bit);
    packed.push_back(vectors[r].Pack());
    if (r == 0) and_words.assign(packed[0].begin(), packed[0].end());
    REQUIRE(packed[r].size() == and_words.size());
    for (size_t i = 0; i < and_words.size(); ++i) and_words[i] &= packed[r][i];
  }
  for (size_t r = 0; r < vectors.size(); ++r) {
    std::copy(and_words.begin(), and_words.end(), packed[r].begin());
    vectors[r].Unpack();
  }
}

std::vector<int32_t> Ready(const CacheBitVector& v) {
  std::vector<int32_t> bits;
  v.ForEachReady([&](int32_t bit) { bits.push_back(bit); });
  return bits;
}

std::vector<int32_t> Invalid(const CacheBitVector& v) {
  std::vector<int32_t> bits;
  v.ForEachInvalid([&](int32_t bit) { bits.push_back(bit); });
  return bits;
}

TEST_CASE("The bit vector has 1 + 3W words", "[cache_bit_vector]") {
  CHECK(CacheBitVector(0).words().size() == 1);
  CHECK(CacheBitVector(1).words().size() == 4);
  CHECK(CacheBitVector(64).words().size() == 4);
  CHECK(CacheBitVector(65).words().size() == 7);
}

TEST_CASE("Flags AND to their OR over ranks", "[cache_bit_vector]") {
  std::vector<CacheBitVector> v(3, CacheBitVector(128));
  Cycle(v, {{CacheBitVector::kUncached, {}, {}}, {CacheBitVector::kShutdown, {}, {}}, {0, {}, {}}});
  for (const CacheBitVector& rank : v) {
    CHECK(rank.flags() == (CacheBitVector::kUncached | CacheBitVector::kShutdown));
    CHECK(rank.any(CacheBitVector::kShutdown));
    CHECK_FALSE(rank.any(CacheBitVector::kGpuFailed | CacheBitVector::kStallRound));
  }
}

TEST_CASE("Ranks shutting down are named (below 32)", "[cache_bit_vector]") {
  std::vector<CacheBitVector> v(3, CacheBitVector(64));
  Cycle(v, {{0, {}, {}},
            {CacheBitVector::ShutdownFlags(1), {}, {}},
            {CacheBitVector::ShutdownFlags(2) | CacheBitVector::kUncached, {}, {}}});
  for (const CacheBitVector& rank : v) {
    CHECK(rank.any(CacheBitVector::kShutdown));
    CHECK(rank.any(CacheBitVector::kUncached));
    CHECK_FALSE(rank.any(CacheBitVector::kGpuFailed | CacheBitVector::kStallRound));
    CHECK(rank.ShutdownRanks() == std::vector<int>{1, 2});
  }
  // A rank from 32 on shuts down without a name.
  CHECK(CacheBitVector::ShutdownFlags(32) == CacheBitVector::kShutdown);
  CHECK(CacheBitVector::ShutdownFlags(31) == (CacheBitVector::kShutdown | (uint64_t{1} << 63)));
  Cycle(v, {{0, {}, {}}, {0, {}, {}}, {0, {}, {}}});
  CHECK(v[0].ShutdownRanks().empty());
}

TEST_CASE("A bit is ready only when every rank holds it", "[cache_bit_vector]") {
  std::vector<CacheBitVector> v(3, CacheBitVector(200));
  Cycle(v, {{0, {3, 70, 199}, {}}, {0, {3, 199}, {}}, {0, {199, 3, 5}, {}}});
  for (const CacheBitVector& rank : v) {
    CHECK(Ready(rank) == std::vector<int32_t>{3, 199});  // ascending, across words
    CHECK(Invalid(rank).empty());
    // 70 and 5 are held somewhere but not ready everywhere: someone still waits.
    CHECK(rank.pending_after());
  }
}

TEST_CASE("Nothing pending after when all held bits are ready", "[cache_bit_vector]") {
  std::vector<CacheBitVector> v(2, CacheBitVector(64));
  Cycle(v, {{0, {1, 63}, {}}, {0, {63, 1}, {}}});
  CHECK(Ready(v[0]) == std::vector<int32_t>{1, 63});
  CHECK_FALSE(v[0].pending_after());
  CHECK_FALSE(v[1].pending_after());
}

TEST_CASE("Uncached-pending on one rank means pending after on all", "[cache_bit_vector]") {
  std::vector<CacheBitVector> v(2, CacheBitVector(64));
  Cycle(v, {{CacheBitVector::kUncachedPending, {}, {}}, {0, {}, {}}});
  CHECK(v[0].pending_after());
  CHECK(v[1].pending_after());
}

TEST_CASE("Invalid bits are the OR over ranks and are never ready", "[cache_bit_vector]") {
  std::vector<CacheBitVector> v(3, CacheBitVector(130));
  Cycle(v, {{0, {4, 129}, {129}}, {0, {4, 129}, {}}, {0, {4, 129}, {64}}});
  for (const CacheBitVector& rank : v) {
    CHECK(Invalid(rank) == std::vector<int32_t>{64, 129});
    CHECK(Ready(rank) == std::vector<int32_t>{4});
    CHECK(rank.pending_after());  // the holders of 129 renegotiate
  }
}

TEST_CASE("Foreign bits count as ready and persist across cycles", "[cache_bit_vector]") {
  // Rank 1 is not in the process set of the tensor at bit 9.
  std::vector<CacheBitVector> v(2, CacheBitVector(64));
  v[1].SetForeign(9, true);
  Cycle(v, {{0, {9}, {}}, {0, {}, {}}});
  CHECK(Ready(v[0]) == std::vector<int32_t>{9});
  CHECK(Ready(v[1]) == std::vector<int32_t>{9});
  CHECK_FALSE(v[0].pending_after());
  // Next cycle: nobody holds it, so it is not ready although rank 1 is still foreign to it.
  Cycle(v, {{0, {}, {}}, {0, {}, {}}});
  CHECK(Ready(v[0]).empty());
  Cycle(v, {{0, {9}, {}}, {0, {}, {}}});
  CHECK(Ready(v[0]) == std::vector<int32_t>{9});
  // SetForeign(false) (the rank joined a set reusing the bit) and ClearForeign end it.
  v[1].SetForeign(9, false);
  Cycle(v, {{0, {9}, {}}, {0, {}, {}}});
  CHECK(Ready(v[0]).empty());
  v[1].SetForeign(9, true);
  v[1].ClearForeign();
  Cycle(v, {{0, {9}, {}}, {0, {}, {}}});
  CHECK(Ready(v[0]).empty());
}

TEST_CASE("An invalidated bit stops being foreign", "[cache_bit_vector]") {
  std::vector<CacheBitVector> v(2, CacheBitVector(64));
  v[1].SetForeign(2, true);
  Cycle(v, {{0, {}, {2}}, {0, {}, {}}});
  CHECK(Invalid(v[1]) == std::vector<int32_t>{2});
  Cycle(v, {{0, {2}, {}}, {0, {}, {}}});
  CHECK(Ready(v[0]).empty());
}

TEST_CASE("A single rank's cycle reads its own bits back", "[cache_bit_vector]") {
  std::vector<CacheBitVector> v(1, CacheBitVector(10));
  Cycle(v, {{CacheBitVector::kStallRound, {0, 9}, {9}}});
  CHECK(v[0].flags() == CacheBitVector::kStallRound);
  CHECK(Ready(v[0]) == std::vector<int32_t>{0});
  CHECK(Invalid(v[0]) == std::vector<int32_t>{9});
}

TEST_CASE("Capacity 0 carries only the flags", "[cache_bit_vector]") {
  std::vector<CacheBitVector> v(2, CacheBitVector(0));
  Cycle(v, {{CacheBitVector::kGpuFailed, {}, {}}, {0, {}, {}}});
  CHECK(v[1].any(CacheBitVector::kGpuFailed));
  CHECK_FALSE(v[1].pending_after());
  CHECK(Ready(v[1]).empty());
}

}  // namespace
}  // namespace chorus::runtime
