#include "runtime/execute/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>

#include <catch2/catch.hpp>

#include "test/support/catch_session.h"
#include "test/support/huge_page_probe.h"

namespace chorus::runtime {
namespace {

using chorus::testing::AnonHugeBytes;

// An anonymous mapping of `bytes`, written with the word index, unmapped at scope exit.
struct Mapping {
  explicit Mapping(size_t n) : bytes(n) {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(base != MAP_FAILED);
    auto* words = static_cast<uint32_t*>(base);
    for (size_t i = 0; i < bytes / 4; ++i) words[i] = static_cast<uint32_t>(i);
  }
  ~Mapping() { munmap(base, bytes); }
  bool Intact() const {
    const auto* words = static_cast<const uint32_t*>(base);
    for (size_t i = 0; i < bytes / 4; ++i) {
      if (words[i] != static_cast<uint32_t>(i)) return false;
    }
    return true;
  }
  void* base;
  size_t bytes;
};

TEST_CASE("HugePageAdvisor collapses the 2 MiB pages a tensor overlaps", "[huge_pages]") {
  HugePageAdvisor advisor(true);
  if (!advisor.enabled()) {
    chorus::testing::SkipCase("this kernel has no MADV_COLLAPSE: the advisor is off");
    return;
  }
  Mapping map(16 << 20);
  // A tensor 3 pages past a 2 MiB boundary inside the mapping, 9 MiB long: it overlaps the five
  // 2 MiB pages from that boundary on, all inside the mapping.
  const uintptr_t start = HugePageCeil(reinterpret_cast<uintptr_t>(map.base));
  const uintptr_t tensor = start + 3 * 4096;
  const int64_t bytes = 9 << 20;
  const uintptr_t end = start + 5 * kHugePageBytes;

  advisor.Advise(reinterpret_cast<void*>(tensor), bytes);
  CHECK(advisor.failures() == 0);
  CHECK(advisor.advised_bytes() == static_cast<int64_t>(end - start));
  CHECK(AnonHugeBytes(start, end) >= static_cast<int64_t>(end - start));
  CHECK(map.Intact());

  SECTION("a range seen before is skipped until its recheck") {
    for (int i = 1; i < HugePageAdvisor::kRecheckEvery; ++i) {
      advisor.Advise(reinterpret_cast<void*>(tensor), bytes);
    }
    CHECK(advisor.advised_bytes() == static_cast<int64_t>(end - start));
    advisor.Advise(reinterpret_cast<void*>(tensor), bytes);
    CHECK(advisor.advised_bytes() == static_cast<int64_t>(2 * (end - start)));
    CHECK(map.Intact());
  }
  SECTION("ranges under 2 MiB are left alone") {
    advisor.Advise(reinterpret_cast<void*>(end + 4096), static_cast<int64_t>(kHugePageBytes) - 1);
    advisor.Advise(nullptr, bytes);
    CHECK(advisor.advised_bytes() == static_cast<int64_t>(end - start));
    CHECK(advisor.failures() == 0);
  }
}

TEST_CASE("HugePageAdvisor collapses what lies within the tensor's mapping and nothing past it",
          "[huge_pages]") {
  HugePageAdvisor advisor(true);
  if (!advisor.enabled()) {
    chorus::testing::SkipCase("this kernel has no MADV_COLLAPSE: the advisor is off");
    return;
  }
  // Inaccessible guard space around a writable mapping (a mapping of its own: the kernel never
  // merges mappings of different protections) that starts 3 pages past a 2 MiB boundary and is
  // 7 MiB long. The tensor is all of it: its first and last 2 MiB pages reach into the guards.
  void* space = mmap(nullptr, 16 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(space != MAP_FAILED);
  const uintptr_t start = HugePageCeil(reinterpret_cast<uintptr_t>(space));
  auto* tensor = reinterpret_cast<uint32_t*>(start + 3 * 4096);
  const size_t bytes = size_t{7} << 20;
  REQUIRE(mprotect(tensor, bytes, PROT_READ | PROT_WRITE) == 0);
  for (size_t i = 0; i < bytes / 4; ++i) tensor[i] = static_cast<uint32_t>(i);

  advisor.Advise(tensor, static_cast<int64_t>(bytes));
  // The kernel refuses the guards; the two 2 MiB pages wholly inside the tensor are huge now.
  CHECK(advisor.failures() == 1);
  CHECK(advisor.advised_bytes() == static_cast<int64_t>(2 * kHugePageBytes));
  CHECK(AnonHugeBytes(start + kHugePageBytes, start + 3 * kHugePageBytes) >=
        static_cast<int64_t>(2 * kHugePageBytes));
  bool intact = true;
  for (size_t i = 0; i < bytes / 4; ++i) intact &= tensor[i] == static_cast<uint32_t>(i);
  CHECK(intact);
  munmap(space, 16 << 20);
}

TEST_CASE("A disabled HugePageAdvisor leaves memory alone", "[huge_pages]") {
  HugePageAdvisor advisor(false);
  CHECK_FALSE(advisor.enabled());
  Mapping map(6 << 20);
  advisor.Advise(map.base, static_cast<int64_t>(map.bytes));
  CHECK(advisor.advised_bytes() == 0);
  CHECK(advisor.failures() == 0);
  CHECK(map.Intact());
}

TEST_CASE("AllocateHugePageBuffer returns 2 MiB-aligned memory backed by huge pages",
          "[huge_pages]") {
  const int64_t bytes = (4 << 20) + 100;
  HugePageBuffer buffer = AllocateHugePageBuffer(bytes);
  REQUIRE(buffer != nullptr);
  const uintptr_t p = reinterpret_cast<uintptr_t>(buffer.get());
  CHECK(p % kHugePageBytes == 0);
  std::memset(buffer.get(), 0x5a, static_cast<size_t>(bytes));
  CHECK(buffer[bytes - 1] == std::byte{0x5a});
  if (chorus::testing::TransparentHugePagesOff()) {
    chorus::testing::SkipCase("transparent huge pages are disabled on this machine");
    return;
  }
  CHECK(AnonHugeBytes(p, p + static_cast<uintptr_t>(bytes)) >=
        static_cast<int64_t>(kHugePageBytes));
}

TEST_CASE("AllocateHugePageBuffer without huge pages maps plain pages", "[huge_pages]") {
  const int64_t bytes = 4 << 20;
  HugePageBuffer buffer = AllocateHugePageBuffer(bytes, /*huge=*/false);
  REQUIRE(buffer != nullptr);
  const uintptr_t p = reinterpret_cast<uintptr_t>(buffer.get());
  CHECK(p % kHugePageBytes == 0);
  std::memset(buffer.get(), 0x5a, static_cast<size_t>(bytes));
  CHECK(buffer[bytes - 1] == std::byte{0x5a});
  if (!chorus::testing::TransparentHugePagesOnlyWhenAdvised()) {
    chorus::testing::SkipCase("transparent huge pages are not in 'madvise' mode here");
    return;
  }
  CHECK(AnonHugeBytes(p, p + static_cast<uintptr_t>(bytes)) == 0);
}

}  // namespace
}  // namespace chorus::runtime
