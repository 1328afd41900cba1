// File: test/support/rank_failures.h
//
// Failures found on rank threads of a unit test (simulated ranks as threads), reported on the
// main thread: Catch2's assertion macros are not thread-safe.
//
// Thread-safety: Check may be called from any thread; Report from the main thread once the rank
// threads have ended.
#ifndef CHORUS_TEST_SUPPORT_RANK_FAILURES_H_
#define CHORUS_TEST_SUPPORT_RANK_FAILURES_H_

#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

namespace chorus::testing {

class Failures {
 public:
  // Records `what` for rank thread `rank` unless `ok`.
  void Check(bool ok, int rank, const std::string& what) {
    if (ok) return;
    std::lock_guard<std::mutex> lock(mu_);
    messages_.push_back(absl::StrCat("rank thread ", rank, ": ", what));
  }
  // One failed check per recorded message; passes when there is none.
  void Report() {
    for (const std::string& m : messages_) FAIL_CHECK(m);
    CHECK(messages_.empty());
  }

 private:
  std::mutex mu_;
  std::vector<std::string> messages_;
};

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_RANK_FAILURES_H_
