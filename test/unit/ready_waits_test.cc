// Tests of runtime/gpu/ready_waits (which ready events a GPU launch waits on), on generated
// recording schedules: submitting threads record events on a few streams, their records
// overlapping in time or not; the true order of the records on each stream is known to the
// test, not to the function.
#include "runtime/gpu/ready_waits.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::runtime {
namespace {

struct Record {
  ReadyMark mark;
  double at = 0;  // when the record took effect: between begin and end
};

// `n` records on `streams` streams by `threads` threads. Each thread records one at a time; the
// threads' calls interleave at random, so records of different threads may overlap.
std::vector<Record> Schedule(std::mt19937& rng, int n, int streams, int threads) {
  std::vector<Record> records;
  std::vector<int> open(threads, -1);  // the record a thread is inside, or -1
  uint64_t clock = 1;
  int started = 0;
  while (started < n || std::any_of(open.begin(), open.end(), [](int r) { return r >= 0; })) {
    const int t = static_cast<int>(rng() % threads);
    if (open[t] < 0) {
      if (started == n) continue;
      Record r;
      r.mark.stream =
          reinterpret_cast<const void*>(static_cast<uintptr_t>(0x100 + rng() % streams));
      r.mark.begin = clock++;
      records.push_back(r);
      open[t] = static_cast<int>(records.size()) - 1;
      ++started;
    } else {
      Record& r = records[static_cast<size_t>(open[t])];
      r.mark.end = clock++;
      std::uniform_real_distribution<double> inside(static_cast<double>(r.mark.begin),
                                                    static_cast<double>(r.mark.end));
      r.at = inside(rng);
      open[t] = -1;
    }
  }
  std::shuffle(records.begin(), records.end(), rng);  // a batch's order is not record order
  return records;
}

TEST_CASE("ChooseReadyWaits: every event is covered by a wait on its stream", "[ready_waits]") {
  std::vector<size_t> waits;
  for (uint32_t seed = 0; seed < 2000; ++seed) {
    std::mt19937 rng(seed);
    const int n = 1 + static_cast<int>(rng() % 12);
    const int streams = 1 + static_cast<int>(rng() % 3);
    const int threads = 1 + static_cast<int>(rng() % 3);
    const std::vector<Record> records = Schedule(rng, n, streams, threads);
    std::vector<ReadyMark> marks;
    for (const Record& r : records) marks.push_back(r.mark);
    ChooseReadyWaits(marks, &waits);
    INFO("seed " << seed << ": " << n << " records, " << streams << " streams, " << threads
                 << " threads");
    REQUIRE(std::is_sorted(waits.begin(), waits.end()));
    REQUIRE(std::adjacent_find(waits.begin(), waits.end()) == waits.end());
    // Covered: some waited event on the same stream took effect at or after it.
    for (size_t i = 0; i < records.size(); ++i) {
      const bool covered = std::any_of(waits.begin(), waits.end(), [&](size_t w) {
        return records[w].mark.stream == records[i].mark.stream && records[w].at >= records[i].at;
      });
      CHECK(covered);
    }
    // One thread records one at a time: one wait per stream used.
    if (threads == 1) {
      std::vector<const void*> used;
      for (const ReadyMark& m : marks) used.push_back(m.stream);
      std::sort(used.begin(), used.end());
      used.erase(std::unique(used.begin(), used.end()), used.end());
      CHECK(waits.size() == used.size());
    }
  }
}

TEST_CASE("ChooseReadyWaits: overlapping records on one stream are all waited on",
          "[ready_waits]") {
  const void* s = reinterpret_cast<const void*>(0x1);
  const void* other = reinterpret_cast<const void*>(0x2);
  std::vector<size_t> waits = {7};
  ChooseReadyWaits({}, &waits);
  CHECK(waits.empty());
  // 0 ends after 1 begins: neither is known to come last.
  ChooseReadyWaits({{s, 1, 4}, {s, 2, 3}, {other, 5, 6}}, &waits);
  CHECK(waits == std::vector<size_t>{0, 1, 2});
  // Sequential on s: the last alone.
  ChooseReadyWaits({{s, 5, 6}, {s, 1, 2}, {s, 3, 4}}, &waits);
  CHECK(waits == std::vector<size_t>{0});
}

}  // namespace
}  // namespace chorus::runtime
