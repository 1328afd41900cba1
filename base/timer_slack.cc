#include "base/timer_slack.h"

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace chorus {

void UsePreciseSleeps() {
#if defined(__linux__)
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);  // nanoseconds
#endif
}

}  // namespace chorus
