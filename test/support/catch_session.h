// File: test/support/catch_session.h
//
// Runs Catch2 for a test binary's own main() (the MPI tier, the GPU tier's skip rule). Catch2's
// implementation, Session included, is compiled once in catch_session.cc for every test binary
// (library chorus_catch), so a main() reaches it through this function; binaries with nothing to
// do before the tests link chorus_catch_main instead.
//
// A case that cannot check what it is for on this machine or in this run (a kernel without a
// feature, one rank where it needs two) calls SkipCase(why) and returns: the case is reported as
// skipped, not passed. When every case a run selected skipped, RunCatch returns kSkipped (ctest's
// SKIP_RETURN_CODE) instead of 0, so a ctest entry made of such cases shows as skipped, with the
// reasons on its output.
//
// Thread-safety: RunCatch once, from main(); SkipCase from a test case's thread.
#ifndef CHORUS_TEST_SUPPORT_CATCH_SESSION_H_
#define CHORUS_TEST_SUPPORT_CATCH_SESSION_H_

#include <string>
#include <string_view>

namespace chorus::testing {

struct CatchRunOptions {
  std::string name;        // the run's name in the report ("" keeps the binary's)
  bool compact = false;    // the compact reporter, unless -r chose one
  bool no_colour = false;  // no colour codes, unless --use-colour asked for them
};

// The exit code of a run whose every selected case skipped (ctest: SKIP_RETURN_CODE 77).
inline constexpr int kSkipped = 77;

// Parses the command line and runs the selected tests; Catch2's exit code (non-zero on a bad
// command line or a failure), or kSkipped when no case failed and every case run skipped.
int RunCatch(int argc, char** argv, const CatchRunOptions& options = {});

// Marks the running test case as skipped, saying why (printed at once and at the end of the
// run); the caller returns from the case right after.
void SkipCase(std::string_view why);

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_CATCH_SESSION_H_
