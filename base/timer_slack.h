// File: base/timer_slack.h
//
// Short sleeps that end close to their deadline.
//
// Thread-safety: affects only the calling thread.
#ifndef CHORUS_BASE_TIMER_SLACK_H_
#define CHORUS_BASE_TIMER_SLACK_H_

namespace chorus {

// Lets the calling thread's sleeps end close to their deadline (Linux timer slack, 50 µs by
// default, to 1 µs), so that sleeps of a few microseconds (ops::WaitPolitely's, the background
// loop's batching naps) are as short as asked. A no-op elsewhere than on Linux.
void UsePreciseSleeps();

}  // namespace chorus

#endif  // CHORUS_BASE_TIMER_SLACK_H_
