// File: runtime/loop/cycle_policy.h
//
// The background loop's two timing policies, as functions of the config: how long ops may wait
// on the response cache and how often rank 0 looks for stalled ops (the stall policy), and how
// the loop sleeps between cycles (the sleep policy); and what its messages say about stalls and
// shutdowns (Note [Shutdown causes]). Stateless; any thread.
#ifndef CHORUS_RUNTIME_LOOP_CYCLE_POLICY_H_
#define CHORUS_RUNTIME_LOOP_CYCLE_POLICY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "runtime/config.h"
#include "runtime/negotiate/coordinator.h"
#include "runtime/submit/submission_queue.h"

namespace chorus::runtime {

struct StallPolicy {
  // False when CHORUS_STALL_CHECK_DISABLE is set: no cache expiry, no stall rounds.
  bool enabled = true;
  // A cached entry pending longer than this goes through the coordinator, which can name the
  // missing ranks (the cache path cannot). Half the smaller of the warning and shutdown times,
  // so that the coordinator (which counts from when it first sees the request) still warns and
  // times out close to the configured times.
  absl::Duration cache_wait_limit;
  // Rank 0 looks for stalls this often: a few times per stall period, at most once a second.
  absl::Duration check_every;
  // Stalled ops time out (a shutdown time is set): rank 0 asks for negotiation rounds while
  // the coordinator holds requests, so that it can fail them on every rank.
  bool shutdown_rounds = false;
};

StallPolicy StallPolicyFor(const Config& config);

// One log line for a stalled op: what, how long, which ranks submitted and which are missing,
// and what happens next under `config`'s stall times (reported again every warning time; failed
// on every rank at the shutdown time, or how to set one).
std::string DescribeStall(const StallReport& report, const Config& config);

// Why this rank's pending ops fail when the runtime stops in a cycle that saw a shutdown:
// "chorus was shut down" when this rank asked for it (`requested_here`), else "chorus was shut
// down by rank 2 on n3 (RuntimeError: boom)" (by `ranks`, the ranks that asked, with their hosts
// from `host_names` and the causes they gave from `causes`, both indexed by world rank, where
// known; "another rank" when none is named) with a word on what that means. `suffix` goes
// before that word ("... before this op completed (...)").
std::string DescribeShutdown(bool requested_here, const std::vector<int>& ranks,
                             const std::vector<std::string>& host_names,
                             const std::vector<std::string>& causes, absl::string_view suffix);

// Note [Shutdown causes]: in the cycle whose flags carry a shutdown for which a rank gave a
// cause (kShutdownCause: chorus.torch passes the uncaught exception that ends its process),
// every rank sends rank 0 its part (whether it asked to shut down, and its cause), and rank 0
// sends every rank all the parts: so each rank can name every rank that asked (the flags name
// only ranks below CacheBitVector::kNamedShutdownRanks) and say why. Every rank sees the same
// flags, so all of them take part in the exchange in the same cycle. A shutdown without a
// cause (the end of a job, an elastic reset) exchanges nothing after the flags, as before: a
// collective after the flags could wait on a peer that an elastic reset aborts meanwhile (up
// to the no-progress bound) where there is nothing to tell.
//
// This rank's part: "+" and the cause (NUL bytes replaced, at most kMaxShutdownCause bytes)
// when it asked to shut down, else "-".
inline constexpr size_t kMaxShutdownCause = 1000;
std::string ShutdownPart(bool requested, absl::string_view cause);
// Rank 0's message: the parts of ranks 0..n-1, NUL-separated.
std::string JoinShutdownParts(const std::vector<std::string>& parts);
// The ranks that asked (ascending) and the causes by rank, from rank 0's message for a world of
// `size` ranks; false (outputs untouched) when it is not one.
bool ParseShutdownParts(absl::string_view joined, int size, std::vector<int>* ranks,
                        std::vector<std::string>* causes);

// Sleeps until the next cycle should start (Note [Cache bit vector] explains pending_after).
// While this rank has ops pending (`pending_here`), the cycle time is a batching window for
// local submissions: the next cycle starts once they pause (kBurstQuiet) or the window that
// began at `cycle_start` ends. Sleeping out the whole window would leave ops idle that became
// ready everywhere meanwhile; a next cycle whose peers are not there yet waits for them in the
// bit vector's allreduce, without spinning. With nothing pending here, new local work starts
// the next cycle at once; otherwise the loop wakes after the cycle time if some rank still has
// ops pending, or the idle cycle time if none has. Woken by work, it then takes the burst of
// submissions (a whole model's gradients, say) in one cycle: it waits until the burst pauses
// or a thread blocks on an op (SubmissionQueue::Hurry), at most max(cycle time, kBurstMaxWait).
void WaitForNextCycle(const Config& config, absl::Time cycle_start, bool pending_here,
                      bool pending_after, SubmissionQueue* queue);

// A burst of submissions is over when nothing new arrived for this long.
inline constexpr absl::Duration kBurstQuiet = absl::Microseconds(50);
// How long an idle loop woken by new work waits at most for the burst to end (when the cycle
// time is shorter). A submitter that blocks on one of its ops ends the wait at once (Hurry),
// one that pauses ends it after kBurstQuiet or so, so the limit only binds for a dense stream
// of submissions that neither blocks nor pauses: a whole step of small gradients, say, which
// is best taken in one cycle. With a wait of one cycle time (1 ms by default) such a step is
// cut into two or three cycles, each with its negotiation, collective and wake-ups.
inline constexpr absl::Duration kBurstMaxWait = absl::Milliseconds(5);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_LOOP_CYCLE_POLICY_H_
