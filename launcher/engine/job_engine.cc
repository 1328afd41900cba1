#include "launcher/engine/job_engine.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "elastic/blacklist.h"
#include "elastic/host_discovery.h"
#include "elastic/next_generation.h"
#include "launcher/cli/worker_env.h"
#include "launcher/engine/discovery_runner.h"
#include "launcher/engine/generation_notice.h"
#include "launcher/engine/job_settings.h"
#include "launcher/engine/rendezvous_server.h"
#include "launcher/engine/worker_fleet.h"
#include "launcher/hosts/host_checks.h"
#include "launcher/hosts/job_hosts.h"
#include "launcher/hosts/rank_layout.h"
#include "launcher/hosts/rendezvous_address.h"
#include "launcher/process/executable_search.h"
#include "launcher/process/supervisor.h"

namespace chorus::launcher {
namespace {

// A worker silent this long (no Watch call: hung, stopped, cut off) is lost: it is killed.
constexpr absl::Duration kHeartbeatSilence = absl::Seconds(5);
// How often the loop looks for silent workers and joiners that became ready.
constexpr absl::Duration kHeartbeatCheckPeriod = absl::Milliseconds(500);
// After the last worker ended, how long its remaining output may take to arrive.
constexpr absl::Duration kDrainAfterEnd = absl::Milliseconds(500);

// The exit status for a failure before anything started: 2 for bad input, else 1.
int ExitStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return 2;
    default:
      return 1;
  }
}

class JobEngine {
 public:
  JobEngine(const LaunchOptions& o, const Environment& env, JobSettings settings)
      : o_(o), env_(env), settings_(std::move(settings)) {}

  ~JobEngine() {
    if (server_ != nullptr) server_->Shutdown();
  }

  // Resolves hosts, programs, the rendezvous server and the supervisor; nothing is started.
  absl::Status Prepare();
  // The loop; chorusrun's exit status.
  int Run();

 private:
  // What the loop gathered since the last decision; returns them for the next one.
  elastic::Events Wait(absl::Time wake);
  // Carries out one action (not EndJob). A worker that cannot be started becomes an event.
  void Apply(const elastic::Action& action, elastic::Events& events);
  // Stops everything with `end.signal`, reads the last output, prints the line: the status.
  int End(const elastic::EndJob& end);
  // Takes a discovery answer: holds it until ssh checked its remote hosts, then delivers the
  // usable ones.
  void Deliver(elastic::Events& events, absl::Time now);
  // SIGUSR2 reached chorusrun: passes it to the workers on this host, each of which asks every
  // rank for its flight recorder dump (Note [Flight dump on demand] in
  // runtime/flight/flight_recorder.h).
  void AskForFlightDumps();
  std::string RendezvousAddressFor(const std::string& host) const;
  // Chooses the rendezvous address remote host `host` dials (rendezvous_address.h), once.
  absl::Status ChooseAddress(const std::string& host);

  const LaunchOptions& o_;
  const Environment& env_;
  JobSettings settings_;
  std::string this_host_;
  std::map<std::string, std::string> addresses_;  // remote host -> the address it dials
  std::set<std::string> unaddressable_;           // remote hosts with none (reported once)
  std::unique_ptr<RendezvousServer> server_;
  std::optional<elastic::JobState> state_;
  std::optional<elastic::HostSet> answer_;  // a discovery answer waiting for its ssh checks
  // Declared before the supervisor, which closes open streams into their sinks when it goes.
  std::unique_ptr<DiscoveryRunner> discovery_;
  std::unique_ptr<HostChecks> checks_;
  std::unique_ptr<WorkerFleet> fleet_;
  std::unique_ptr<Supervisor> supervisor_;
};

absl::Status JobEngine::Prepare() {
  this_host_ = ThisHostname();
  absl::StatusOr<elastic::Blacklist> blacklist =
      elastic::Blacklist::Create({settings_.cooldown, 0.1});
  if (!blacklist.ok()) return blacklist.status();
  state_.emplace(*std::move(blacklist));

  // Where the hosts come from.
  bool may_be_remote = true;
  if (o_.elastic.discovery_script) {
    elastic::DiscoveryOptions options;
    options.script = *o_.elastic.discovery_script;
    options.default_slots = settings_.slots_per_host;
    absl::StatusOr<std::unique_ptr<DiscoveryRunner>> discovery =
        DiscoveryRunner::ForScript(options, env_, settings_.discovery_interval);
    if (!discovery.ok()) return discovery.status();
    discovery_ = *std::move(discovery);
  } else {
    absl::StatusOr<JobHosts> hosts = ResolveJobHosts(o_, env_, /*use_slurm=*/true);
    if (!hosts.ok()) return hosts.status();
    elastic::HostSet pool;
    may_be_remote = false;
    for (const HostSlots& h : hosts->hosts) {
      if (!pool.contains(h.host)) state_->order.push_back(h);  // ranks follow the -H order
      pool[h.host] = std::max(pool[h.host], h.slots);
      may_be_remote = may_be_remote || !IsLocalHost(h.host, this_host_);
    }
    discovery_ = DiscoveryRunner::ForPool(std::move(pool), settings_.discovery_interval);
  }

  // What workers run, and how they reach this machine.
  const auto path_it = env_.find("PATH");
  const std::string path = path_it == env_.end() ? "" : path_it->second;
  WorkerFleet::Options fleet;
  absl::StatusOr<std::string> program = FindExecutable(o_.command[0], path);
  if (!program.ok() && !may_be_remote) return program.status();
  fleet.start.program = program.ok() ? *program : "";
  fleet.start.command = o_.command;
  fleet.start.launcher_env = env_;
  fleet.start.grace_seconds = kGraceSeconds;
  fleet.start.ssh.port = o_.ssh_port;
  fleet.start.ssh.identity_file = o_.ssh_identity_file;
  fleet.start.ssh.connect_timeout_s =
      static_cast<int>(absl::ToInt64Seconds(settings_.start_timeout));
  std::string ssh_missing;
  if (may_be_remote) {
    absl::StatusOr<std::string> ssh = FindExecutable("ssh", path);
    if (ssh.ok()) {
      fleet.start.ssh_path = *ssh;
    } else {
      ssh_missing = absl::StrCat("ssh is needed to start workers there: ", ssh.status().message());
      if (!o_.elastic.discovery_script) return absl::FailedPreconditionError(ssh_missing);
    }
  }
  // A fixed pool's remote hosts get their rendezvous address now: a bad --network-interface is
  // bad input, reported before anything starts.
  for (const HostSlots& h : state_->order) {
    if (!IsLocalHost(h.host, this_host_)) {
      if (absl::Status s = ChooseAddress(h.host); !s.ok()) return s;
    }
  }
  absl::StatusOr<std::string> cwd = CurrentDirectory();
  if (!cwd.ok()) return cwd.status();
  fleet.start.cwd = *std::move(cwd);

  absl::StatusOr<std::string> secret = GenerateRendezvousSecret();
  if (!secret.ok()) return secret.status();
  RendezvousServerOptions server_options;
  server_options.host = may_be_remote ? "0.0.0.0" : "127.0.0.1";
  server_options.secret = *secret;
  absl::StatusOr<std::unique_ptr<RendezvousServer>> server =
      RendezvousServer::Start(server_options);
  if (!server.ok()) return server.status();
  server_ = *std::move(server);
  if (o_.verbose) {
    std::cout << "chorusrun: rendezvous server listening on " << server_options.host << ":"
              << server_->port() << std::endl;
  }
  fleet.start.secret = *secret;
  fleet.rendezvous.secret = *secret;
  fleet.rendezvous.start_timeout_s =
      static_cast<int>(absl::ToInt64Seconds(settings_.start_timeout));
  fleet.address_for = [this](const std::string& host) { return RendezvousAddressFor(host); };
  fleet.worker_vars = WorkerEnvironment(o_);
  fleet.this_host = this_host_;
  fleet.elastic = !settings_.rules.fixed;
  fleet.elastic_timeout = settings_.rules.elastic_timeout;
  fleet.output_dir = o_.output_filename;
  fleet.timestamps = o_.prefix_output_with_timestamp;
  fleet.verbose = o_.verbose;

  Supervisor::Options supervisor_options;
  supervisor_options.grace = absl::Seconds(kGraceSeconds);
  absl::StatusOr<std::unique_ptr<Supervisor>> supervisor = Supervisor::Create(supervisor_options);
  if (!supervisor.ok()) return supervisor.status();
  supervisor_ = *std::move(supervisor);
  checks_ = std::make_unique<HostChecks>(fleet.start.ssh, fleet.start.ssh_path, ssh_missing, env_,
                                         settings_.start_timeout);
  fleet_ = std::make_unique<WorkerFleet>(std::move(fleet), supervisor_.get());
  return absl::OkStatus();
}

absl::Status JobEngine::ChooseAddress(const std::string& host) {
  if (addresses_.contains(host)) return absl::OkStatus();
  absl::StatusOr<std::map<std::string, std::string>> chosen =
      RendezvousAddresses({host}, o_.network_interfaces);
  if (!chosen.ok()) return chosen.status();
  addresses_[host] = chosen->at(host);
  return absl::OkStatus();
}

std::string JobEngine::RendezvousAddressFor(const std::string& host) const {
  auto it = addresses_.find(host);
  const std::string address = it != addresses_.end() ? it->second : "127.0.0.1";
  return absl::StrCat(address, ":", server_->port());
}

int JobEngine::Run() {
  elastic::Events events;
  while (true) {
    elastic::Decision d =
        elastic::NextGeneration(*std::move(state_), events, absl::Now(), settings_.rules);
    state_.emplace(std::move(d.state));
    events = elastic::Events();
    for (const elastic::Action& action : d.actions) {
      if (const auto* end = std::get_if<elastic::EndJob>(&action)) return End(*end);
      Apply(action, events);
    }
    // A worker that could not be started is decided on at once.
    if (events.empty()) events = Wait(d.wake);
  }
}

void JobEngine::Apply(const elastic::Action& action, elastic::Events& events) {
  if (const auto* g = std::get_if<elastic::PublishGeneration>(&action)) {
    if (!g->line.empty()) std::cerr << g->line << std::endl;
    if (absl::Status s = fleet_->Publish(*g); !s.ok()) {
      events.start_failed.emplace_back("", std::string(s.message()));
    }
    absl::Status published = server_->PublishGeneration(MakeGenerationNotice(*g, absl::Now()));
    if (!published.ok()) {  // a bug: generations only grow
      std::cerr << "chorusrun: warning: " << published.message() << std::endl;
    }
  } else if (const auto* start = std::get_if<elastic::StartWorker>(&action)) {
    if (absl::Status s = fleet_->Start(start->worker, start->generation); !s.ok()) {
      events.start_failed.emplace_back(start->worker.id, std::string(s.message()));
    }
  } else if (const auto* stop = std::get_if<elastic::StopWorker>(&action)) {
    fleet_->Stop(stop->id, stop->signal);
    server_->ForgetWorker(stop->id);
  } else if (const auto* log = std::get_if<elastic::LogLine>(&action)) {
    std::cerr << log->line << std::endl;
  }
}

elastic::Events JobEngine::Wait(absl::Time wake) {
  elastic::Events events;
  const absl::Time now = absl::Now();
  absl::Time until = std::min(wake, now + kHeartbeatCheckPeriod);
  until = std::min(until, discovery_->Tick(*supervisor_, now));
  until = std::min(until, checks_->Tick(*supervisor_, now));
  Supervisor::Events ev = supervisor_->Poll(until);
  if (!ev.signals.empty()) events.signal = ev.signals.front();
  if (ev.dump_requests > 0) AskForFlightDumps();
  if (std::optional<DiscoveryAnswer> answer = discovery_->Take(ev, absl::Now())) {
    if (answer->ok()) {
      if (!(*answer)->warning.empty()) {
        std::cerr << "chorusrun: warning: " << (*answer)->warning << std::endl;
      }
      answer_ = std::move((*answer)->hosts);
    } else if (!absl::IsCancelled(answer->status())) {
      events.discovery_fatal = std::string(answer->status().message());
    }
  }
  events.unreachable = checks_->Take(ev);
  Deliver(events, absl::Now());
  // The reports first: a worker's report was written before any end it caused.
  events.failure_reports = fleet_->TakeFailureReports();
  events.ends = fleet_->TakeEnds(ev);
  for (const elastic::WorkerEnd& end : events.ends) server_->ForgetWorker(end.id);
  // Heartbeats: silent workers, and joiners heard from for the first time.
  for (std::string& id : server_->SilentWorkers(kHeartbeatSilence)) {
    server_->ForgetWorker(id);
    events.silent.push_back(std::move(id));
  }
  for (const elastic::Worker& w : state_->workers) {
    if (!w.place && !w.ready && server_->Heard(w.id)) events.heard.push_back(w.id);
  }
  return events;
}

void JobEngine::AskForFlightDumps() {
  // Only workers that have called chorus init, which then takes SIGUSR2 as a request: to one
  // still starting, the signal would be fatal.
  const int signalled =
      fleet_->SignalLocal(SIGUSR2, [this](const std::string& id) { return server_->Heard(id); });
  if (signalled > 0) {
    std::cerr << "chorusrun: SIGUSR2: passed to the " << signalled
              << " initialised worker(s) on this host; every rank whose loop runs writes its "
                 "flight recorder dump (CHORUS_FLIGHT_RECORDER_DIR, default /tmp/chorus-flight on "
                 "each host)"
              << std::endl;
  } else {
    std::cerr << "chorusrun: SIGUSR2: no initialised worker runs on this host; send SIGUSR2 to a "
                 "worker process on its host, and every rank whose loop runs writes its flight "
                 "recorder dump"
              << std::endl;
  }
}

void JobEngine::Deliver(elastic::Events& events, absl::Time now) {
  if (!answer_) return;
  std::vector<std::string> remote;
  for (const auto& [host, slots] : *answer_) {
    if (!fleet_->remote(host) || unaddressable_.contains(host)) continue;
    // A host with no address of this machine to dial cannot join.
    if (absl::Status s = ChooseAddress(host); !s.ok()) {
      unaddressable_.insert(host);
      events.unreachable.emplace_back(host, std::string(s.message()));
      continue;
    }
    remote.push_back(host);
  }
  checks_->Check(remote, *supervisor_, now);
  if (!checks_->Settled(remote)) return;
  elastic::HostSet usable;
  for (const auto& [host, slots] : *answer_) {
    if (!fleet_->remote(host) || (checks_->Passed(host) && addresses_.contains(host))) {
      usable.emplace(host, slots);
    }
  }
  events.discovered = std::move(usable);
  answer_.reset();
}

int JobEngine::End(const elastic::EndJob& end) {
  discovery_->Stop(*supervisor_);
  checks_->Stop(*supervisor_);
  fleet_->StopAll(end.signal);
  // Every process chorusrun started ends (SIGKILL after the grace period; a second signal to
  // chorusrun sends it at once), then the last of their output is read.
  while (supervisor_->running() > 0) {
    Supervisor::Events ev = supervisor_->Poll(absl::InfiniteFuture());
    if (!ev.signals.empty()) fleet_->StopAll(SIGKILL);
  }
  const absl::Time deadline = absl::Now() + kDrainAfterEnd;
  while (supervisor_->output_open() && absl::Now() < deadline) {
    supervisor_->Poll(deadline, /*return_when_idle=*/true);
  }
  if (!end.line.empty()) std::cerr << end.line << std::endl;
  return end.status;
}

}  // namespace

int RunMpiLessJob(const LaunchOptions& o, const Environment& launcher_env) {
  absl::StatusOr<JobSettings> settings = ResolveJobSettings(o, launcher_env);
  absl::Status prepared = settings.status();
  std::optional<JobEngine> engine;
  if (prepared.ok()) {
    engine.emplace(o, launcher_env, *std::move(settings));
    prepared = engine->Prepare();
  }
  if (!prepared.ok()) {
    std::cerr << "chorusrun: error: " << prepared.message() << std::endl;
    return ExitStatusFor(prepared);
  }
  return engine->Run();
}

}  // namespace chorus::launcher
