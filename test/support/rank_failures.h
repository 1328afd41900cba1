// File: test/support/rank_failures.h
//
// Failures found on rank threads of a unit test (simulated ranks as threads), reported on the
// main thread: Catch2's assertion macros are not thread-safe. And the check of every rank
// thread's status at the end of a test (CheckAllOk).
//
// Thread-safety: Check may be called from any thread; Report from the main thread once the rank
// threads have ended.
#ifndef CHORUS_TEST_SUPPORT_RANK_FAILURES_H_
#define CHORUS_TEST_SUPPORT_RANK_FAILURES_H_

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

namespace chorus::testing {

class Failures {
 public:
  // Records `what` for rank thread `rank` unless `ok`.
  void Check(bool ok, int rank, const std::string& what) {
    if (!ok) Add(absl::StrCat("rank thread ", rank, ": ", what));
  }
  // Records `what` unless `ok` (`what` names the rank where that matters).
  void Check(bool ok, const std::string& what) {
    if (!ok) Add(what);
  }
  // One failed check per recorded message; passes when there is none.
  void Report() {
    for (const std::string& m : messages_) FAIL_CHECK(m);
    CHECK(messages_.empty());
  }

 private:
  void Add(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    messages_.push_back(std::move(what));
  }

  std::mutex mu_;
  std::vector<std::string> messages_;
};

// CHECKs that every rank thread's status (indexed by rank) is OK, naming the rank otherwise.
inline void CheckAllOk(const std::vector<absl::Status>& status) {
  for (size_t r = 0; r < status.size(); ++r) {
    INFO("rank " << r << ": " << status[r].ToString());
    CHECK(status[r].ok());
  }
}

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_RANK_FAILURES_H_
