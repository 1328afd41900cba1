#include "launcher/process/spawn.h"

#include "absl/time/time.h"
#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

TEST_CASE("PollTimeoutMs rounds up, clamps at zero and caps infinite waits", "[launcher][spawn]") {
  CHECK(PollTimeoutMs(absl::ZeroDuration()) == 0);
  CHECK(PollTimeoutMs(-absl::Seconds(3)) == 0);
  CHECK(PollTimeoutMs(-absl::InfiniteDuration()) == 0);
  CHECK(PollTimeoutMs(absl::Microseconds(1)) == 1);
  CHECK(PollTimeoutMs(absl::Microseconds(1200)) == 2);
  CHECK(PollTimeoutMs(absl::Milliseconds(250)) == 250);
  CHECK(PollTimeoutMs(absl::Hours(5)) == 3600 * 1000);
  CHECK(PollTimeoutMs(absl::InfiniteDuration()) == 3600 * 1000);
}

}  // namespace
}  // namespace chorus::launcher
