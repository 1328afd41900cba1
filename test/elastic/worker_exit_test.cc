#include "elastic/worker_exit.h"

#include <signal.h>

#include <catch2/catch.hpp>

namespace chorus::elastic {
namespace {

TEST_CASE("DescribeExit", "[elastic][worker_exit]") {
  CHECK(DescribeExit({false, 3}) == "exited with code 3");
  CHECK(DescribeExit({true, SIGKILL}) == "killed by SIGKILL");
  CHECK(DescribeExit({true, SIGSEGV}) == "killed by SIGSEGV");
  CHECK(SignalName(SIGKILL) == "9 (Killed)");
  CHECK(SignalAbbrev(SIGTERM) == "SIGTERM");
  CHECK(WorkerExit{true, 9}.shell_status() == 137);
  CHECK(WorkerExit{false, 3}.shell_status() == 3);
  CHECK_FALSE(WorkerExit{false, 3}.ok());
  CHECK(WorkerExit{false, 0}.ok());
}

TEST_CASE("ClassifyExit: one rule for local and remote workers", "[elastic][worker_exit]") {
  struct Row {
    WorkerExit exit;
    bool remote;
    ExitKind kind;
    const char* description;
  };
  const Row rows[] = {
      {{false, 0}, false, ExitKind::kSucceeded, "exited with code 0"},
      {{false, 0}, true, ExitKind::kSucceeded, "exited with code 0"},
      {{true, SIGTERM}, false, ExitKind::kLeft, "left after SIGTERM"},
      {{false, 143}, true, ExitKind::kLeft, "left after SIGTERM"},
      // Locally, 143 is only an exit code the program chose.
      {{false, 143}, false, ExitKind::kFailed, "exited with code 143"},
      {{false, 3}, false, ExitKind::kFailed, "exited with code 3"},
      {{true, SIGKILL}, false, ExitKind::kFailed, "killed by SIGKILL"},
      {{false, 137},
       true,
       ExitKind::kFailed,
       "exited with code 137 (the remote shell's code for SIGKILL)"},
      {{false, 255},
       true,
       ExitKind::kFailed,
       "exited with code 255 (ssh's own failure: host unreachable or connection lost)"},
      {{false, 255}, false, ExitKind::kFailed, "exited with code 255"},
      {{true, SIGKILL}, true, ExitKind::kFailed, "killed by SIGKILL"},
  };
  for (const Row& row : rows) {
    INFO(row.description << (row.remote ? " (remote)" : ""));
    const ExitVerdict v = ClassifyExit(row.exit, row.remote);
    CHECK(v.kind == row.kind);
    CHECK(v.description == row.description);
  }
}

}  // namespace
}  // namespace chorus::elastic
