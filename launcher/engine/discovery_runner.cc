#include "launcher/engine/discovery_runner.h"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace chorus::launcher {

// One run of the script in progress.
struct DiscoveryRunner::Run {
  int id = 0;  // the Supervisor's
  elastic::ScriptRun result;
  ScriptOutputSink sink{&result};
  absl::Time deadline;
  bool exited = false;

  // Consumes the run's own events; true once it is over (reaped, output read to the end).
  bool Take(Supervisor::Events& events) {
    for (auto it = events.exits.begin(); it != events.exits.end();) {
      if (it->id != id) {
        ++it;
        continue;
      }
      result.exit = it->exit;
      exited = true;
      it = events.exits.erase(it);
    }
    auto done = std::find(events.finished.begin(), events.finished.end(), id);
    if (done == events.finished.end()) return false;
    events.finished.erase(done);
    return true;
  }

  // SIGTERM at the deadline (the Supervisor sends SIGKILL after its grace period).
  void Enforce(Supervisor& supervisor, absl::Time now) {
    if (!exited && !result.timed_out && now >= deadline) {
      result.timed_out = true;
      supervisor.Stop(id, SIGTERM);
    }
  }
};

namespace {

absl::StatusOr<std::unique_ptr<DiscoveryRunner::Run>> StartRun(Supervisor& supervisor,
                                                               const elastic::DiscoveryOptions& o,
                                                               const Environment& env,
                                                               absl::Time now);

}  // namespace

WorkerSpec DiscoveryScriptSpec(const elastic::DiscoveryOptions& options, const Environment& env) {
  WorkerSpec spec;
  spec.program = "/bin/sh";
  spec.argv = {"/bin/sh", "-c", options.script};
  spec.environment = env;
  return spec;
}

void ScriptOutputSink::Write(int, OutputStream stream, absl::string_view bytes) {
  elastic::AppendScriptOutput(*run_, stream == OutputStream::kStdout, bytes);
}

absl::StatusOr<std::unique_ptr<DiscoveryRunner>> DiscoveryRunner::ForScript(
    elastic::DiscoveryOptions options, Environment env, absl::Duration interval) {
  if (absl::Status s = elastic::ValidateDiscoveryOptions(options); !s.ok()) return s;
  return std::unique_ptr<DiscoveryRunner>(new DiscoveryRunner(
      elastic::DiscoveryJudge(std::move(options)), std::move(env), {}, interval));
}

std::unique_ptr<DiscoveryRunner> DiscoveryRunner::ForPool(elastic::HostSet pool,
                                                          absl::Duration interval) {
  return std::unique_ptr<DiscoveryRunner>(
      new DiscoveryRunner(std::nullopt, {}, std::move(pool), interval));
}

DiscoveryRunner::DiscoveryRunner(std::optional<elastic::DiscoveryJudge> judge, Environment env,
                                 elastic::HostSet pool, absl::Duration interval)
    : judge_(std::move(judge)), env_(std::move(env)), pool_(std::move(pool)), interval_(interval) {}

DiscoveryRunner::~DiscoveryRunner() = default;

absl::Time DiscoveryRunner::Tick(Supervisor& supervisor, absl::Time now) {
  if (stopped_) return absl::InfiniteFuture();
  if (run_ != nullptr) {
    run_->Enforce(supervisor, now);
    return run_->result.timed_out ? absl::InfiniteFuture() : run_->deadline;
  }
  if (now < next_) return next_;
  if (!judge_) {
    pool_due_ = true;
    next_ = now + interval_;
    return now;  // the answer is ready: Take it at once
  }
  absl::StatusOr<std::unique_ptr<Run>> run = StartRun(supervisor, judge_->options(), env_, now);
  if (!run.ok()) {
    // Judged like a failed run: fatal before the first success, a warning after it.
    failed_start_ = run.status();
    next_ = now + interval_;
    return now;
  }
  run_ = *std::move(run);
  return run_->deadline;
}

std::optional<DiscoveryAnswer> DiscoveryRunner::Take(Supervisor::Events& events, absl::Time now) {
  if (pool_due_) {
    pool_due_ = false;
    return DiscoveryAnswer(elastic::DiscoveryJudge::Result{pool_, ""});
  }
  if (failed_start_) {
    absl::Status failed = *std::move(failed_start_);
    failed_start_.reset();
    return judge_->Judge(failed);
  }
  if (run_ == nullptr || !run_->Take(events)) return std::nullopt;
  const elastic::ScriptRun result = std::move(run_->result);
  run_.reset();
  next_ = now + interval_;
  return judge_->Judge(result);
}

void DiscoveryRunner::Stop(Supervisor& supervisor) {
  stopped_ = true;
  if (run_ != nullptr) supervisor.Stop(run_->id, SIGKILL);
}

namespace {

absl::StatusOr<std::unique_ptr<DiscoveryRunner::Run>> StartRun(Supervisor& supervisor,
                                                               const elastic::DiscoveryOptions& o,
                                                               const Environment& env,
                                                               absl::Time now) {
  auto run = std::make_unique<DiscoveryRunner::Run>();
  run->deadline = now + o.timeout;
  absl::StatusOr<int> id = supervisor.Start(DiscoveryScriptSpec(o, env), &run->sink, 0);
  if (!id.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot start the host discovery script: ", id.status().message()));
  }
  run->id = *id;
  return run;
}

}  // namespace

absl::StatusOr<elastic::ScriptRun> RunDiscoveryScript(const elastic::DiscoveryOptions& options,
                                                      const Environment& env) {
  Supervisor::Options supervisor_options;
  supervisor_options.grace = options.grace;
  absl::StatusOr<std::unique_ptr<Supervisor>> supervisor = Supervisor::Create(supervisor_options);
  if (!supervisor.ok()) return supervisor.status();
  absl::StatusOr<std::unique_ptr<DiscoveryRunner::Run>> run =
      StartRun(**supervisor, options, env, absl::Now());
  if (!run.ok()) return run.status();
  while (true) {
    (*run)->Enforce(**supervisor, absl::Now());
    Supervisor::Events events =
        (*supervisor)->Poll((*run)->result.timed_out ? absl::InfiniteFuture() : (*run)->deadline);
    if (!events.signals.empty() && !(*run)->result.stop_signal) {
      (*run)->result.stop_signal = events.signals.front();
      (*supervisor)->Stop((*run)->id, SIGTERM);
    }
    if ((*run)->Take(events)) return std::move((*run)->result);
  }
}

}  // namespace chorus::launcher
