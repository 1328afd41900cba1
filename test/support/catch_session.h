// File: test/support/catch_session.h
//
// Runs Catch2 for a test binary's own main() (the MPI tier, the GPU tier's skip rule). Catch2's
// implementation, Session included, is compiled once in catch_session.cc for every test binary
// (library chorus_catch), so a main() reaches it through this function; binaries with nothing to
// do before the tests link chorus_catch_main instead.
//
// Thread-safety: call once, from main().
#ifndef CHORUS_TEST_SUPPORT_CATCH_SESSION_H_
#define CHORUS_TEST_SUPPORT_CATCH_SESSION_H_

#include <string>

namespace chorus::testing {

struct CatchRunOptions {
  std::string name;        // the run's name in the report ("" keeps the binary's)
  bool compact = false;    // the compact reporter, unless -r chose one
  bool no_colour = false;  // no colour codes, unless --use-colour asked for them
};

// Parses the command line and runs the selected tests; Catch2's exit code (non-zero on a bad
// command line or a failure).
int RunCatch(int argc, char** argv, const CatchRunOptions& options = {});

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_CATCH_SESSION_H_
