// File: test/support/huge_page_probe.h
//
// What the kernel says about this process's transparent huge pages, for tests of
// runtime/execute/huge_pages.h. Linux only.
#ifndef CHORUS_TEST_SUPPORT_HUGE_PAGE_PROBE_H_
#define CHORUS_TEST_SUPPORT_HUGE_PAGE_PROBE_H_

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace chorus::testing {

// Bytes of anonymous huge pages (smaps' AnonHugePages) in this process's mappings that overlap
// [begin, end).
inline int64_t AnonHugeBytes(uintptr_t begin, uintptr_t end) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool overlapping = false;
  int64_t total = 0;
  while (std::getline(smaps, line)) {
    // A mapping's first line: "lo-hi perms offset dev inode [path]"; field lines: "Name: value".
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      overlapping = lo < end && hi > begin;
      continue;
    }
    long kb = 0;
    if (overlapping && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) {
      total += static_cast<int64_t>(kb) * 1024;
    }
  }
  return total;
}

// The selected mode of this machine's transparent huge pages ("always", "madvise", "never"), or
// "" when unknown.
inline std::string TransparentHugePagesMode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t open = text.find('['), close = text.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return text.substr(open + 1, close - open - 1);
}

// True when this machine's transparent huge pages are switched off (or unknown).
inline bool TransparentHugePagesOff() {
  const std::string mode = TransparentHugePagesMode();
  return mode.empty() || mode == "never";
}

// True when only memory advised with MADV_HUGEPAGE gets huge pages.
inline bool TransparentHugePagesOnlyWhenAdvised() {
  return TransparentHugePagesMode() == "madvise";
}

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_HUGE_PAGE_PROBE_H_
