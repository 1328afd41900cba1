// File: test/fuzz/fuzz_check.h
//
// FUZZ_CHECK(condition) << "what": the property checks of the fuzz targets. A failed check prints
// the condition, its place and the streamed message to stderr and aborts, which libFuzzer reports
// as a crash and saves the input that caused it.
//
// Thread-safety: a failed check ends the process; a passing one touches nothing.
#ifndef CHORUS_TEST_FUZZ_FUZZ_CHECK_H_
#define CHORUS_TEST_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace chorus::fuzz {

// Collects the message of a failed check; its destructor prints it and aborts.
class CheckFailure {
 public:
  CheckFailure(const char* condition, const char* file, int line) {
    stream_ << file << ":" << line << ": check failed: " << condition << ": ";
  }
  ~CheckFailure() {
    std::fprintf(stderr, "%s\n", stream_.str().c_str());
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

}  // namespace chorus::fuzz

// A loop, not an if/else, so that it nests under an if without a dangling else; the failure's
// destructor aborts, so the body runs at most once.
#define FUZZ_CHECK(condition) \
  while (!(condition)) ::chorus::fuzz::CheckFailure(#condition, __FILE__, __LINE__).stream()

#endif  // CHORUS_TEST_FUZZ_FUZZ_CHECK_H_
