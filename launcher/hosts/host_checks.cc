#include "launcher/hosts/host_checks.h"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "launcher/process/worker_output.h"

namespace chorus::launcher {

// One `ssh HOST true` in progress; keeps the last non-blank line it printed.
struct HostChecks::Probe : public OutputSink {
  int id = 0;
  absl::Time deadline;
  std::optional<WorkerExit> exit;
  bool timed_out = false;
  std::string last_line;
  LineSplitter lines;  // stdout and stderr share one: only the last line matters

  void Write(int, OutputStream, absl::string_view bytes) override {
    lines.Append(bytes, [this](absl::string_view l) { Keep(l); });
  }
  void Close(int, OutputStream) override {
    lines.Finish([this](absl::string_view l) { Keep(l); });
  }
  void Keep(absl::string_view line) {
    if (line.find_first_not_of(" \t\r") != absl::string_view::npos) last_line = std::string(line);
  }
};

HostChecks::HostChecks(SshOptions ssh, std::string ssh_path, std::string ssh_missing,
                       Environment env, absl::Duration timeout)
    : ssh_(std::move(ssh)),
      ssh_path_(std::move(ssh_path)),
      ssh_missing_(std::move(ssh_missing)),
      env_(std::move(env)),
      timeout_(timeout) {}

HostChecks::~HostChecks() = default;

void HostChecks::Check(const std::vector<std::string>& hosts, Supervisor& supervisor,
                       absl::Time now) {
  for (const std::string& host : hosts) {
    if (verdicts_.contains(host) || running_.contains(host)) continue;
    if (ssh_path_.empty()) {
      verdicts_[host] = false;
      failed_.emplace_back(host, absl::StrCat("cannot reach host ", host, ": ", ssh_missing_));
      continue;
    }
    auto check = std::make_unique<Probe>();
    WorkerSpec spec;
    spec.program = ssh_path_;
    spec.argv = SshCheckArgv(ssh_, host);
    spec.environment = env_;
    absl::StatusOr<int> id = supervisor.Start(spec, check.get(), 0);
    if (!id.ok()) {
      verdicts_[host] = false;
      failed_.emplace_back(host, absl::StrCat("cannot reach host ", host,
                                              ": cannot run ssh: ", id.status().message()));
      continue;
    }
    check->id = *id;
    check->deadline = now + timeout_;
    running_.emplace(host, std::move(check));
  }
}

bool HostChecks::Settled(const std::vector<std::string>& hosts) const {
  return std::all_of(hosts.begin(), hosts.end(),
                     [this](const std::string& h) { return verdicts_.contains(h); });
}

bool HostChecks::Passed(const std::string& host) const {
  auto it = verdicts_.find(host);
  return it != verdicts_.end() && it->second;
}

absl::Time HostChecks::Tick(Supervisor& supervisor, absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (auto& [host, check] : running_) {
    if (check->exit || check->timed_out) continue;
    if (now >= check->deadline) {
      check->timed_out = true;
      supervisor.Stop(check->id, SIGTERM);
    } else {
      next = std::min(next, check->deadline);
    }
  }
  return next;
}

std::vector<std::pair<std::string, std::string>> HostChecks::Take(Supervisor::Events& events) {
  for (auto it = events.exits.begin(); it != events.exits.end();) {
    auto check = std::find_if(running_.begin(), running_.end(),
                              [&](const auto& c) { return c.second->id == it->id; });
    if (check == running_.end()) {
      ++it;
      continue;
    }
    check->second->exit = it->exit;
    it = events.exits.erase(it);
  }
  for (auto it = events.finished.begin(); it != events.finished.end();) {
    auto check = std::find_if(running_.begin(), running_.end(),
                              [&](const auto& c) { return c.second->id == *it; });
    if (check == running_.end()) {
      ++it;
      continue;
    }
    const std::string host = check->first;
    const Probe& c = *check->second;
    const bool passed = c.exit && c.exit->ok() && !c.timed_out;
    verdicts_[host] = passed;
    if (c.timed_out) {
      failed_.emplace_back(
          host, absl::StrCat("host ", host, " did not answer over ssh within --start-timeout ",
                             absl::ToInt64Seconds(timeout_), " s"));
    } else if (!passed) {
      const std::string why =
          !c.last_line.empty()
              ? c.last_line
              : absl::StrCat("ssh ", c.exit ? elastic::DescribeExit(*c.exit) : "ended");
      failed_.emplace_back(
          host, absl::StrCat("cannot reach host ", host, " over ssh (ssh ", host, " true): ", why));
    }
    running_.erase(check);
    it = events.finished.erase(it);
  }
  return std::exchange(failed_, {});
}

void HostChecks::Stop(Supervisor& supervisor) {
  for (auto& [host, check] : running_) supervisor.Stop(check->id, SIGKILL);
}

absl::StatusOr<SshCheckOutcome> CheckHostsOverSsh(const std::vector<std::string>& hosts,
                                                  const SshOptions& ssh,
                                                  const std::string& ssh_path,
                                                  const Environment& env, absl::Duration timeout) {
  SshOptions options = ssh;
  options.connect_timeout_s = static_cast<int>(absl::ToInt64Seconds(timeout));
  // Declared before the Supervisor, which closes the checks' open streams into them when it goes.
  HostChecks checks(options, ssh_path, "", env, timeout);
  absl::StatusOr<std::unique_ptr<Supervisor>> supervisor = Supervisor::Create({});
  if (!supervisor.ok()) return supervisor.status();
  checks.Check(hosts, **supervisor, absl::Now());
  SshCheckOutcome outcome;
  Supervisor::Events events;
  while (true) {
    std::vector<std::pair<std::string, std::string>> failed = checks.Take(events);
    if (!failed.empty()) {
      outcome.failure = failed.front().second;
      break;
    }
    if (checks.Settled(hosts)) break;
    events = (*supervisor)->Poll(checks.Tick(**supervisor, absl::Now()));
    if (!events.signals.empty()) {
      outcome.signal = events.signals.front();
      break;
    }
  }
  checks.Stop(**supervisor);  // the Supervisor reaps them as it goes
  return outcome;
}

}  // namespace chorus::launcher
