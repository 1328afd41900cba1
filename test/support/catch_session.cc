// Catch2's implementation (CATCH_CONFIG_RUNNER), compiled once for every test binary.
#define CATCH_CONFIG_RUNNER
#include "test/support/catch_session.h"

#include <catch2/catch.hpp>

namespace chorus::testing {

int RunCatch(int argc, char** argv, const CatchRunOptions& options) {
  Catch::Session session;
  const int parsed = session.applyCommandLine(argc, argv);
  if (parsed != 0) return parsed;
  Catch::ConfigData& config = session.configData();
  if (options.compact && config.reporterName == "console") config.reporterName = "compact";
  if (options.no_colour && config.useColour == Catch::UseColour::Auto) {
    config.useColour = Catch::UseColour::No;
  }
  if (!options.name.empty()) config.name = options.name;
  return session.run();
}

}  // namespace chorus::testing
