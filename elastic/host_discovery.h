// File: elastic/host_discovery.h
//
// Host discovery for elastic jobs (horovodrun's --host-discovery-script): a user script prints
// the hosts available now, one per line, and chorusrun runs it again and again
// (launcher/engine/discovery_runner.h runs it; this file judges what it printed).
//
//   host            a host with the default number of slots (--slots-per-host)
//   host:slots      a host with `slots` slots, 1 <= slots <= 1000000
//
// Surrounding whitespace is dropped and blank lines are skipped. A host listed more than once is
// one host with the largest of its slot counts (a line without slots counting as the default):
// Horovod reads the lines as a set, so their order must not matter, and the largest count never
// hides slots the script offered. Host names are those -H accepts (letters, digits, '.', '-',
// '_'; elastic/hosts.h). Anything else (`h:x`, `h:0`, `h:-1`, `:3`, `h 2`, `h:`) is an error
// naming the line. An empty output is a valid answer: no host is available now.
//
// The script must exit 0 within the timeout (30 s by default); otherwise the run is an error
// naming the timeout, or the exit status (and the script's last stderr line).
//
// DiscoveryJudge keeps the last good answer: when a run fails after one succeeded, it returns
// that answer again with a warning (a transient failure must not shrink the job); when the very
// first run fails, the error is returned (fatal for the job, as in horovodrun).
//
// Pure functions; DiscoveryJudge is a plain value.
//
// Thread-safety: stateless; DiscoveryJudge is thread-compatible.
#ifndef CHORUS_ELASTIC_HOST_DISCOVERY_H_
#define CHORUS_ELASTIC_HOST_DISCOVERY_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "elastic/hosts.h"
#include "elastic/worker_exit.h"

namespace chorus::elastic {

inline constexpr absl::Duration kDefaultDiscoveryTimeout = absl::Seconds(30);
// The script's stdout beyond this is an error: a host list is small.
inline constexpr size_t kMaxDiscoveryOutputBytes = size_t{1} << 20;

struct DiscoveryOptions {
  std::string script;                                 // run as /bin/sh -c `script`
  int default_slots = 1;                              // for a line without ":slots"
  absl::Duration timeout = kDefaultDiscoveryTimeout;  // then the process group is killed
  absl::Duration grace = absl::Seconds(1);            // SIGTERM -> SIGKILL after the timeout
};

// How one run of the script ended.
struct ScriptRun {
  WorkerExit exit;
  bool timed_out = false;          // the timeout passed and the group was killed
  std::optional<int> stop_signal;  // SIGINT/SIGTERM that reached chorusrun meanwhile
  std::string stdout_text;         // at most kMaxDiscoveryOutputBytes
  bool stdout_overflow = false;    // there was more
  std::string stderr_tail;         // the last bytes of its stderr (a few KiB)
};

// Appends `bytes` the script wrote on stdout (`is_stdout`) or stderr to `run`, within the
// bounds above.
void AppendScriptOutput(ScriptRun& run, bool is_stdout, absl::string_view bytes);

// InvalidArgument when `options` cannot be used (empty script, default_slots outside
// [1, kMaxSlots], timeout <= 0, grace < 0).
absl::Status ValidateDiscoveryOptions(const DiscoveryOptions& options);

// Parses the script's stdout (the format above). InvalidArgument naming the 1-based line.
// REQUIRES: 1 <= default_slots <= kMaxSlots.
absl::StatusOr<HostSet> ParseDiscoveryOutput(absl::string_view output, int default_slots);

// Judges one run: the host set, or an error naming the script and what went wrong:
// DeadlineExceeded (the timeout), Cancelled (chorusrun was signalled), Unavailable (non-zero
// exit or killed by a signal), InvalidArgument (a malformed line, too much output).
absl::StatusOr<HostSet> InterpretScriptRun(const DiscoveryOptions& options, const ScriptRun& run);

class DiscoveryJudge {
 public:
  struct Result {
    HostSet hosts;
    // Empty when `hosts` is this run's answer; otherwise why this run failed, and `hosts` is
    // the last good answer.
    std::string warning;
  };

  // REQUIRES: ValidateDiscoveryOptions(options) is OK.
  explicit DiscoveryJudge(DiscoveryOptions options) : options_(std::move(options)) {}

  // Judges a run (or why it could not be started). A failure is returned as an error when no
  // run has succeeded yet, or when chorusrun was signalled (Cancelled: the job must stop, not
  // carry on with old hosts); otherwise the last good host set comes back with a warning.
  absl::StatusOr<Result> Judge(const absl::StatusOr<ScriptRun>& run);

  // The last good answer; nullopt before the first success.
  const std::optional<HostSet>& last_good() const { return last_good_; }
  const DiscoveryOptions& options() const { return options_; }

 private:
  DiscoveryOptions options_;
  std::optional<HostSet> last_good_;
};

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_HOST_DISCOVERY_H_
