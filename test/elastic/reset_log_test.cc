#include "elastic/reset_log.h"

#include <signal.h>

#include <string>

#include <catch2/catch.hpp>

namespace chorus::elastic {
namespace {

TEST_CASE("FormatResetLine names removed, added and noted hosts", "[elastic][reset_log]") {
  ResetRecord r;
  r.generation = 3;
  r.previous_hosts = {"hostA", "hostB"};
  r.current_hosts = {"hostA", "hostC"};
  r.notes["hostB"] = {"rank 2 killed by SIGKILL"};
  r.previous_size = 4;
  r.current_size = 4;
  r.cause = "rank 2 on hostB killed by SIGKILL; hostB blacklisted";
  CHECK(FormatResetLine(r) ==
        "chorusrun: generation 3: -hostB (rank 2 killed by SIGKILL) +hostC, size 4 -> 4, cause: "
        "rank 2 on hostB killed by SIGKILL; hostB blacklisted");
}

TEST_CASE("FormatResetLine: a host that stays, and no host change", "[elastic][reset_log]") {
  ResetRecord r;
  r.generation = 1;
  r.previous_hosts = {"a", "b"};
  r.current_hosts = {"a", "b"};
  r.notes["b"] = {"rank 1 left after SIGTERM"};
  r.previous_size = 2;
  r.current_size = 2;
  r.cause = "x";
  CHECK(FormatResetLine(r) ==
        "chorusrun: generation 1: b (rank 1 left after SIGTERM), size 2 -> 2, cause: x");
  r.notes.clear();
  r.current_size = 3;
  CHECK(FormatResetLine(r) == "chorusrun: generation 1: size 2 -> 3, cause: x");
}

}  // namespace
}  // namespace chorus::elastic
