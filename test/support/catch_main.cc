// The main() of the test binaries that need nothing before Catch2 runs.
#include "test/support/catch_session.h"

int main(int argc, char** argv) { return chorus::testing::RunCatch(argc, argv); }
