// File: test/support/fast_cycle_config.h
//
// The runtime configuration of the unit tier's simulated ranks: short cycles, so that tests
// with many rounds finish quickly on a small machine.
#ifndef CHORUS_TEST_SUPPORT_FAST_CYCLE_CONFIG_H_
#define CHORUS_TEST_SUPPORT_FAST_CYCLE_CONFIG_H_

#include "absl/time/time.h"

#include "runtime/config.h"

namespace chorus::testing {

inline runtime::Config FastCycleConfig() {
  runtime::Config c;
  c.cycle_time = absl::Microseconds(200);
  c.idle_cycle_time = absl::Milliseconds(2);
  return c;
}

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_FAST_CYCLE_CONFIG_H_
