// File: elastic/host_discovery.h
//
// Host discovery for elastic jobs (horovodrun's --host-discovery-script): a user script prints
// the hosts available now, one per line, and the driver runs it again and again.
//
//   host            a host with the default number of slots (--slots-per-host)
//   host:slots      a host with `slots` slots, 1 <= slots <= 1000000
//
// Surrounding whitespace is dropped and blank lines are skipped. A host listed more than once is
// one host with the largest of its slot counts (a line without slots counting as the default):
// Horovod reads the lines as a set, so their order must not matter, and the largest count never
// hides slots the script offered. Host names are those -H accepts (letters, digits, '.', '-',
// '_'; launcher/hosts.h). Anything else (`h:x`, `h:0`, `h:-1`, `:3`, `h 2`, `h:`) is an error
// naming the line. An empty output is a valid answer: no host is available now.
//
// The script runs as `/bin/sh -c SCRIPT` (so a path, or a command with arguments), with stdin
// /dev/null, in its own process group (launcher::WorkerGroup). It must exit 0 within the timeout
// (30 s by default); otherwise its whole process group gets SIGTERM and, after the grace period,
// SIGKILL, and the run is an error naming the timeout. A non-zero exit or a signal is an error
// naming the exit status (and the script's last stderr line).
//
// HostDiscovery keeps the last good answer: when a run fails after one succeeded, it returns
// that answer again with a warning (a transient failure must not shrink the job); when the very
// first run fails, the error is returned (the driver treats it as fatal, as horovodrun does).
//
// The elastic driver does not call RunDiscoveryScript: it starts DiscoveryScriptSpec under its
// own Supervisor (so that the script never blocks its loop) and hands the run to Judge().
//
// Thread-safety: ParseDiscoveryOutput is stateless. RunDiscoveryScript uses a WorkerGroup: it
// owns SIGINT, SIGTERM, SIGCHLD and SIGPIPE while the script runs, and only one WorkerGroup may
// run at a time per process (launcher/worker_group.h). HostDiscovery is thread-compatible.
#ifndef CHORUS_ELASTIC_HOST_DISCOVERY_H_
#define CHORUS_ELASTIC_HOST_DISCOVERY_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "elastic/host_set.h"
#include "launcher/mpirun_command.h"
#include "launcher/worker_group.h"

namespace chorus::elastic {

inline constexpr absl::Duration kDefaultDiscoveryTimeout = absl::Seconds(30);
// The script's stdout beyond this is an error: a host list is small.
inline constexpr size_t kMaxDiscoveryOutputBytes = size_t{1} << 20;

struct DiscoveryOptions {
  std::string script;                                 // run as /bin/sh -c `script`
  int default_slots = 1;                              // for a line without ":slots"
  absl::Duration timeout = kDefaultDiscoveryTimeout;  // then the process group is killed
  absl::Duration grace = absl::Seconds(1);            // SIGTERM -> SIGKILL after the timeout
  launcher::Environment environment;                  // the script's whole environment
};

// How one run of the script ended.
struct ScriptRun {
  launcher::WorkerExit exit;
  bool timed_out = false;          // the timeout passed and the group was killed
  std::optional<int> stop_signal;  // SIGINT/SIGTERM that reached this process meanwhile
  std::string stdout_text;         // at most kMaxDiscoveryOutputBytes
  bool stdout_overflow = false;    // there was more
  std::string stderr_tail;         // the last bytes of its stderr (a few KiB)
};

// An OutputSink that fills `run`'s stdout_text (up to kMaxDiscoveryOutputBytes, then
// stdout_overflow) and stderr_tail; for a script started by any supervisor (`run` borrowed).
class ScriptOutputSink : public launcher::OutputSink {
 public:
  explicit ScriptOutputSink(ScriptRun* run) : run_(run) {}
  void Write(int index, launcher::OutputStream stream, absl::string_view bytes) override;
  void Close(int, launcher::OutputStream) override {}

 private:
  ScriptRun* run_;
};

// What runs the script: /bin/sh -c options.script in options.environment, stdin /dev/null.
launcher::WorkerSpec DiscoveryScriptSpec(const DiscoveryOptions& options);

// InvalidArgument when `options` cannot be used (empty script, default_slots outside
// [1, launcher::kMaxSlots], timeout <= 0, grace < 0).
absl::Status ValidateDiscoveryOptions(const DiscoveryOptions& options);

// Parses the script's stdout (the format above). InvalidArgument naming the 1-based line.
// REQUIRES: 1 <= default_slots <= launcher::kMaxSlots.
absl::StatusOr<HostSet> ParseDiscoveryOutput(absl::string_view output, int default_slots);

// Runs the script once and returns how it ended (not judged). Internal when it cannot be
// started (pipe, fork); a script /bin/sh cannot run exits 127.
absl::StatusOr<ScriptRun> RunDiscoveryScript(const DiscoveryOptions& options);

// Judges one run: the host set, or an error naming the script and what went wrong:
// DeadlineExceeded (the timeout), Cancelled (chorusrun was signalled), Unavailable (non-zero
// exit or killed by a signal), InvalidArgument (a malformed line, too much output).
absl::StatusOr<HostSet> InterpretScriptRun(const DiscoveryOptions& options, const ScriptRun& run);

class HostDiscovery {
 public:
  // Runs the script once; tests substitute a fake.
  using ScriptRunner = std::function<absl::StatusOr<ScriptRun>(const DiscoveryOptions&)>;

  struct Result {
    HostSet hosts;
    // Empty when `hosts` is this run's answer; otherwise why this run failed, and `hosts` is
    // the last good answer.
    std::string warning;
  };

  // InvalidArgument for bad options (ValidateDiscoveryOptions).
  static absl::StatusOr<HostDiscovery> Create(DiscoveryOptions options,
                                              ScriptRunner runner = RunDiscoveryScript);

  // Runs the script and judges the run. A failure is returned as an error when no run has
  // succeeded yet, or when chorusrun was signalled (Cancelled: the driver must stop, not carry
  // on with old hosts); otherwise the last good host set comes back with a warning.
  absl::StatusOr<Result> Discover();

  // Discover()'s judgement of a run made elsewhere (the elastic driver supervises the script in
  // its own loop): the same results, and the last good answer is kept the same way.
  absl::StatusOr<Result> Judge(const absl::StatusOr<ScriptRun>& run);

  // The last good answer; nullopt before the first success.
  const std::optional<HostSet>& last_good() const { return last_good_; }
  const DiscoveryOptions& options() const { return options_; }

 private:
  HostDiscovery(DiscoveryOptions options, ScriptRunner runner);

  DiscoveryOptions options_;
  ScriptRunner runner_;
  std::optional<HostSet> last_good_;
};

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_HOST_DISCOVERY_H_
