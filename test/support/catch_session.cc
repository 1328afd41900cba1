// Catch2's implementation (CATCH_CONFIG_RUNNER), compiled once for every test binary.
#define CATCH_CONFIG_RUNNER
#include "test/support/catch_session.h"

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include <catch2/catch.hpp>

namespace chorus::testing {
namespace {

// The cases the run entered, and those that skipped with their reasons (by case name: a case
// with generators or sections is entered more than once and counts once).
struct CaseLedger {
  std::set<std::string> run;
  std::map<std::string, std::string> skipped;
};
CaseLedger& Ledger() {
  static CaseLedger ledger;
  return ledger;
}

struct CaseListener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    Ledger().run.insert(info.name);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(CaseListener)

void SkipCase(std::string_view why) {
  const std::string name = Catch::getResultCapture().getCurrentTestName();
  std::printf("SKIPPED: %s: %.*s\n", name.c_str(), static_cast<int>(why.size()), why.data());
  std::fflush(stdout);
  Ledger().skipped.emplace(name, std::string(why));
}

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
  const int failures = session.run();
  const CaseLedger& ledger = Ledger();
  if (ledger.skipped.empty()) return failures;
  std::printf("%zu of %zu test cases skipped:\n", ledger.skipped.size(), ledger.run.size());
  for (const auto& [name, why] : ledger.skipped)
    std::printf("  %s: %s\n", name.c_str(), why.c_str());
  std::fflush(stdout);
  if (failures == 0 && ledger.skipped.size() == ledger.run.size()) return kSkipped;
  return failures;
}

}  // namespace chorus::testing
