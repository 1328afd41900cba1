// File: test/support/sanitized.h
//
// Under a sanitizer (ASan, TSan) every memory access is instrumented, so the test cases that
// move large buffers through many configurations ([large]) cost minutes there. Such a case
// takes its full set of configurations in an uninstrumented build (ctest `unit_large`) and a
// few of them, the same code paths at the same sizes, under a sanitizer (`unit` there):
//
//   const int n = GENERATE(from_range(FullOrSanitized<int>({2, 3, 5}, {3})));
#ifndef CHORUS_TEST_SUPPORT_SANITIZED_H_
#define CHORUS_TEST_SUPPORT_SANITIZED_H_

#include <vector>

namespace chorus::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// `full` in an uninstrumented build, `sanitized` under a sanitizer.
template <typename T>
std::vector<T> FullOrSanitized(std::vector<T> full, std::vector<T> sanitized) {
  return kSanitized ? sanitized : full;
}

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_SANITIZED_H_
