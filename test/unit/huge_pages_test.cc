#include "ops/cpu/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>

#include <catch2/catch.hpp>

#include "test/support/huge_page_probe.h"

namespace chorus::ops {
namespace {

using chorus::testing::AnonHugeBytes;

constexpr uintptr_t kHuge = HugePageAdvisor::kHugePageBytes;

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

TEST_CASE("HugePageAdvisor collapses the aligned 2 MiB pages inside a tensor", "[huge_pages]") {
  HugePageAdvisor advisor(true);
  if (!advisor.enabled()) {
    WARN("this kernel has no MADV_COLLAPSE: the advisor is off, nothing to check");
    return;
  }
  Mapping map(12 << 20);
  // A tensor that starts 3 pages into the mapping (not 2 MiB-aligned) and spans 9 MiB.
  const uintptr_t tensor = reinterpret_cast<uintptr_t>(map.base) + 3 * 4096;
  const int64_t bytes = 9 << 20;
  const uintptr_t start = (tensor + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (tensor + bytes) & ~(kHuge - 1);
  REQUIRE(end - start >= 3 * kHuge);

  advisor.Advise(reinterpret_cast<void*>(tensor), bytes);
  CHECK(advisor.failures() == 0);
  CHECK(advisor.collapsed_bytes() == static_cast<int64_t>(end - start));
  CHECK(AnonHugeBytes(start, end) >= static_cast<int64_t>(end - start));
  CHECK(map.Intact());

  SECTION("a range seen before is skipped until its recheck") {
    for (int i = 1; i < HugePageAdvisor::kRecheckEvery; ++i) {
      advisor.Advise(reinterpret_cast<void*>(tensor), bytes);
    }
    CHECK(advisor.collapsed_bytes() == static_cast<int64_t>(end - start));
    advisor.Advise(reinterpret_cast<void*>(tensor), bytes);
    CHECK(advisor.collapsed_bytes() == static_cast<int64_t>(2 * (end - start)));
    CHECK(map.Intact());
  }
  SECTION("a range holding no aligned 2 MiB page is left alone") {
    advisor.Advise(reinterpret_cast<void*>(start + 4096), static_cast<int64_t>(kHuge));
    advisor.Advise(reinterpret_cast<void*>(start), static_cast<int64_t>(kHuge) - 1);
    advisor.Advise(nullptr, bytes);
    CHECK(advisor.collapsed_bytes() == static_cast<int64_t>(end - start));
  }
}

TEST_CASE("A disabled HugePageAdvisor leaves memory alone", "[huge_pages]") {
  HugePageAdvisor advisor(false);
  CHECK_FALSE(advisor.enabled());
  Mapping map(6 << 20);
  advisor.Advise(map.base, static_cast<int64_t>(map.bytes));
  CHECK(advisor.collapsed_bytes() == 0);
  CHECK(advisor.failures() == 0);
  CHECK(map.Intact());
}

TEST_CASE("AllocateHugePageBuffer returns 2 MiB-aligned memory backed by huge pages",
          "[huge_pages]") {
  const int64_t bytes = (4 << 20) + 100;
  HugePageBuffer buffer = AllocateHugePageBuffer(bytes);
  REQUIRE(buffer != nullptr);
  const uintptr_t p = reinterpret_cast<uintptr_t>(buffer.get());
  CHECK(p % kHuge == 0);
  std::memset(buffer.get(), 0x5a, static_cast<size_t>(bytes));
  CHECK(buffer[bytes - 1] == std::byte{0x5a});
  if (chorus::testing::TransparentHugePagesOff()) {
    WARN("transparent huge pages are disabled on this machine: no huge pages to check");
    return;
  }
  CHECK(AnonHugeBytes(p, p + static_cast<uintptr_t>(bytes)) >= static_cast<int64_t>(kHuge));
}

}  // namespace
}  // namespace chorus::ops
