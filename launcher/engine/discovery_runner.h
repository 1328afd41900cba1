// File: launcher/engine/discovery_runner.h
//
// Where an MPI-less job's hosts come from, as answers for the job engine
// (launcher/engine/job_engine.h):
//
// - a discovery script (--host-discovery-script): run as /bin/sh -c SCRIPT every `interval`
//   (counted from the end of the previous run) under the job's Supervisor, so that it never
//   blocks the engine's loop; a run past options.timeout gets SIGTERM on its process group and
//   SIGKILL after options.grace. Each run is judged by elastic::DiscoveryJudge (the format, the
//   last good answer kept after a failure, the first failure fatal).
// - a fixed pool (-H, --hostfile, the Slurm allocation or localhost): the same answer every
//   `interval`, so that a blacklisted host is taken back when its cooldown ends.
//
// Thread-safety: thread-compatible; used on the engine's thread with its Supervisor.
#ifndef CHORUS_LAUNCHER_ENGINE_DISCOVERY_RUNNER_H_
#define CHORUS_LAUNCHER_ENGINE_DISCOVERY_RUNNER_H_

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "elastic/host_discovery.h"
#include "launcher/process/environment.h"
#include "launcher/process/spawn.h"
#include "launcher/process/supervisor.h"
#include "launcher/process/worker_output.h"

namespace chorus::launcher {

using DiscoveryAnswer = absl::StatusOr<elastic::DiscoveryJudge::Result>;

// What runs the script: /bin/sh -c options.script in `env`, stdin /dev/null.
WorkerSpec DiscoveryScriptSpec(const elastic::DiscoveryOptions& options, const Environment& env);

// An OutputSink that fills a ScriptRun's stdout_text and stderr_tail (elastic::AppendScriptOutput).
class ScriptOutputSink : public OutputSink {
 public:
  explicit ScriptOutputSink(elastic::ScriptRun* run) : run_(run) {}
  void Write(int, OutputStream stream, absl::string_view bytes) override;
  void Close(int, OutputStream) override {}

 private:
  elastic::ScriptRun* run_;
};

class DiscoveryRunner {
 public:
  // InvalidArgument for bad options (elastic::ValidateDiscoveryOptions).
  static absl::StatusOr<std::unique_ptr<DiscoveryRunner>> ForScript(
      elastic::DiscoveryOptions options, Environment env, absl::Duration interval);
  static std::unique_ptr<DiscoveryRunner> ForPool(elastic::HostSet pool, absl::Duration interval);

  ~DiscoveryRunner();

  // Starts a run when one is due at `now` and enforces the running one's timeout. Returns when
  // it must be called again at the latest.
  absl::Time Tick(Supervisor& supervisor, absl::Time now);

  // Takes the events of its own script out of `events`. Returns the answer once a run has ended
  // (its exit seen and its output read to the end), or the pool's when Tick made it due.
  std::optional<DiscoveryAnswer> Take(Supervisor::Events& events, absl::Time now);

  // Kills a run in progress (SIGKILL); no run starts after this.
  void Stop(Supervisor& supervisor);

 private:
 public:
  struct Run;  // one run in progress (discovery_runner.cc)

 private:
  DiscoveryRunner(std::optional<elastic::DiscoveryJudge> judge, Environment env,
                  elastic::HostSet pool, absl::Duration interval);

  std::optional<elastic::DiscoveryJudge> judge_;  // none: the fixed pool
  Environment env_;
  elastic::HostSet pool_;
  absl::Duration interval_;
  absl::Time next_ = absl::InfinitePast();
  bool pool_due_ = false;
  std::optional<absl::Status> failed_start_;  // the last run could not be started
  bool stopped_ = false;
  std::unique_ptr<Run> run_;  // the run in progress
};

// Runs the script once under a Supervisor of its own and returns how it ended, unjudged (for
// tests and one-off checks). Internal when it cannot be started. Owns the process's SIGINT,
// SIGTERM and SIGCHLD while it runs (launcher/process/supervisor.h).
absl::StatusOr<elastic::ScriptRun> RunDiscoveryScript(const elastic::DiscoveryOptions& options,
                                                      const Environment& env);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_ENGINE_DISCOVERY_RUNNER_H_
