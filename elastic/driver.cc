#include "elastic/driver.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "elastic/blacklist.h"
#include "elastic/driver_settings.h"
#include "elastic/generation_notice.h"
#include "elastic/host_discovery.h"
#include "elastic/host_set.h"
#include "elastic/rank_assignment.h"
#include "elastic/reset_log.h"
#include "elastic/supervisor.h"
#include "launcher/executable_search.h"
#include "launcher/job_hosts.h"
#include "launcher/rank_env.h"
#include "launcher/rendezvous_server.h"
#include "launcher/spawn.h"
#include "launcher/ssh_command.h"
#include "launcher/ucx_launch.h"
#include "launcher/worker_env.h"
#include "launcher/worker_output.h"
#include "launcher/worker_spec.h"

namespace chorus::elastic {
namespace {

using launcher::Environment;
using launcher::LaunchOptions;

constexpr int kUsageError = 2;
constexpr int kJobError = 1;

int Fail(int status, absl::string_view message) {
  std::cerr << "chorusrun: error: " << message << std::endl;
  return status;
}

// A worker silent this long (no Watch call: hung, SIGSTOPped, cut off) is lost: it is killed.
constexpr absl::Duration kHeartbeatSilence = absl::Seconds(5);
// How often the loop looks for silent workers and overdue released ones.
constexpr absl::Duration kHeartbeatCheckPeriod = absl::Milliseconds(500);
// A released worker (no place in the new generation) leaves by itself at its next commit; past
// this it is stopped.
constexpr absl::Duration kReleaseGrace = absl::Seconds(60);

constexpr int kNotStarted = -1;

// One worker of the running generation.
struct Member {
  int id = kNotStarted;   // the Supervisor's
  std::string worker_id;  // CHORUS_ELASTIC_WORKER_ID
  WorkerAssignment assignment;
  bool alive = true;  // false once it ended (or was found silent)
};

// A worker chorusrun released from the job (its host left the discovery output, --max-np): it
// leaves at its next commit; its end is not an event of the job.
struct Released {
  Member member;
  absl::Time deadline;  // then stopped
  bool stopping = false;
};

// The driver loop of elastic/driver.h. Main thread only.
class Driver {
 public:
  Driver(const LaunchOptions& o, const Environment& env, DriverSettings settings,
         Blacklist blacklist)
      : o_(o), env_(env), settings_(std::move(settings)), blacklist_(std::move(blacklist)) {}

  ~Driver() {
    if (server_ != nullptr) server_->Shutdown();
  }

  // Resolves the host source, the programs and the rendezvous server. Exit status on failure.
  std::optional<int> Prepare();
  // The loop; chorusrun's exit status.
  int Run();

 private:
  // Starts a discovery run (or takes the fixed pool).
  void StartDiscovery();
  // Judges the finished discovery run.
  void FinishDiscovery();
  // Supervisor::Poll, with the discovery run's timeout enforced and its exit and end handled
  // here: the events returned concern the workers only.
  Supervisor::Events PollOnce(absl::Time until);
  bool AnyMemberRunning() const;
  void StopDiscovery();
  // The next generation's ranks from the discovered hosts and `previous`.
  absl::StatusOr<RankAssignment> Plan(const std::vector<PreviousWorker>& previous,
                                      std::vector<launcher::HostSlots>* ordered) const;
  std::vector<PreviousWorker> AliveMembers() const;
  // Starts generation generation_ + 1 with every worker new. On failure: the exit status.
  std::optional<int> StartGeneration(const RankAssignment& next,
                                     std::vector<launcher::HostSlots> ordered);
  // Starts generation generation_ + 1 in place: the survivors of `next` stay (they adopt their
  // new places from the published notice), released workers leave at their next commit, new
  // workers are started. On failure: the exit status.
  std::optional<int> Reform(const RankAssignment& next, std::vector<launcher::HostSlots> ordered);
  // Logs the reset line of the generation starting with `next` and publishes its notice.
  void AnnounceGeneration(const std::vector<Member>& next);
  // The output sink of a generation whose members have `ranks` (index order): the terminal,
  // or with --output-filename the rank files, shared by every generation.
  absl::StatusOr<std::unique_ptr<launcher::OutputSink>> GenerationSink(
      const std::vector<int>& ranks);
  // Starts the members of `next` that have no process yet and points every member's output at
  // the generation's sink. On failure: the exit status.
  std::optional<int> StartNewMembers(std::vector<Member>& next);
  absl::StatusOr<launcher::WorkerSpec> SpecFor(const launcher::RankPlacement& p, int generation,
                                               const std::string& worker_id);
  // Kills the workers silent for kHeartbeatSilence (a reset cause each) and stops released
  // workers past their deadline.
  void CheckHeartbeats();
  // Records that `m` is gone for `why` (blacklisting its host when `failed`): a reset cause.
  void RecordLoss(Member& m, const std::string& why, bool failed);
  // Handles the ends of workers. Sets reset_causes_; returns an exit status when the job ends.
  std::optional<int> HandleExits(const std::vector<Supervisor::Exit>& exits);
  // Stops every running worker with `sig` and waits for them (a SIGINT/SIGTERM meanwhile turns
  // the stop into SIGKILL and is returned).
  std::optional<int> StopAll(int sig);
  // A signal reached chorusrun: forwards it, waits, and returns 128 + sig.
  int Shutdown(int sig);
  // Reads the last output of the workers (bounded).
  void DrainOutput();
  int JobFailed(const std::string& cause);
  // Decides a reset: counts it against --reset-limit and stops the generation. An exit
  // status when the job ends.
  std::optional<int> Reset();
  bool EveryHostBlacklisted(absl::Time now) const;

  const LaunchOptions& o_;
  const Environment& env_;
  DriverSettings settings_;
  Blacklist blacklist_;

  // The discovery script's run in progress, supervised like a worker so that it never blocks
  // the loop.
  struct DiscoveryRun {
    int id = 0;  // the Supervisor's
    std::unique_ptr<ScriptRun> run;
    std::unique_ptr<ScriptOutputSink> sink;
    absl::Time deadline;  // then SIGTERM, SIGKILL after the grace period
    bool exited = false;
  };

  std::optional<HostSet> fixed_pool_;  // -H/--hostfile without a script
  std::optional<HostDiscovery> discovery_;
  std::optional<DiscoveryRun> discovery_run_;
  std::optional<absl::Status> discovery_fatal_;  // the first discovery failed
  bool discovered_once_ = false;
  bool discovered_now_ = false;  // a discovery finished since the loop last looked
  HostSet discovered_;
  absl::Time next_discovery_ = absl::InfinitePast();

  // Declared before supervisor_, which closes its workers' streams into them when it goes.
  std::vector<std::unique_ptr<launcher::OutputSink>> sinks_;  // one per generation
  // --output-filename: the first generation's sink, over whose files the later ones write.
  launcher::FileSink* first_file_sink_ = nullptr;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<launcher::RendezvousServer> server_;
  launcher::RendezvousInfo rendezvous_;
  std::string this_host_;
  std::string cwd_;
  absl::StatusOr<std::string> program_ = absl::UnknownError("not looked up");
  launcher::WorkerStart start_;  // how workers are started (program, ssh, directory, secret)
  std::string ssh_missing_;      // why ssh_path is empty, when it is

  int generation_ = -1;
  int resets_ = 0;
  int workers_started_ = 0;  // worker ids are "w<n>"
  std::vector<Released> released_;
  // What the next reset is about (cleared when a generation starts).
  bool worker_lost_ = false;
  std::vector<int> lost_ranks_;
  bool hosts_added_ = false;
  bool hosts_removed_ = false;
  std::vector<launcher::HostSlots> order_;  // the host order of the last generation
  std::vector<Member> members_;             // the running generation, by rank
  std::vector<PreviousWorker> survivors_;   // between a reset and the next generation
  std::vector<std::string> previous_hosts_;
  int previous_size_ = 0;
  std::map<std::string, std::vector<std::string>> notes_;
  std::vector<std::string> reset_causes_;  // non-empty: a reset is due
  // Why the last generation was stopped while too few slots were left: the start of the cause of
  // the generation that follows once enough exist.
  std::vector<std::string> stopped_causes_;
};

std::optional<int> Driver::Prepare() {
  const LaunchOptions::Elastic& e = o_.elastic;
  this_host_ = launcher::ThisHostname();
  bool may_be_remote = true;
  if (e.discovery_script) {
    DiscoveryOptions options;
    options.script = *e.discovery_script;
    options.default_slots = settings_.slots_per_host;
    options.environment = env_;
    absl::StatusOr<HostDiscovery> discovery = HostDiscovery::Create(options);
    if (!discovery.ok()) return Fail(kUsageError, discovery.status().message());
    discovery_ = *std::move(discovery);
  } else {
    absl::StatusOr<launcher::JobHosts> hosts =
        launcher::ResolveJobHosts(o_, env_, /*use_slurm=*/true);
    if (!hosts.ok()) return Fail(kUsageError, hosts.status().message());
    HostSet pool;
    may_be_remote = false;
    for (const launcher::HostSlots& h : hosts->hosts) {
      if (pool.count(h.host) == 0) order_.push_back(h);  // ranks follow the -H order
      pool[h.host] = std::max(pool[h.host], h.slots);
      may_be_remote = may_be_remote || !launcher::IsLocalHost(h.host, this_host_);
    }
    fixed_pool_ = std::move(pool);
  }

  const auto path_it = env_.find("PATH");
  program_ = launcher::FindExecutable(o_.command[0], path_it == env_.end() ? "" : path_it->second);
  if (!may_be_remote && !program_.ok()) return Fail(kUsageError, program_.status().message());
  absl::StatusOr<std::string> cwd = launcher::CurrentDirectory();
  if (!cwd.ok()) return Fail(kJobError, cwd.status().message());
  cwd_ = *std::move(cwd);

  absl::StatusOr<std::string> secret = launcher::GenerateRendezvousSecret();
  if (!secret.ok()) return Fail(kJobError, secret.status().message());
  launcher::RendezvousServerOptions server_options;
  server_options.host = may_be_remote ? "0.0.0.0" : "127.0.0.1";
  server_options.secret = *secret;
  absl::StatusOr<std::unique_ptr<launcher::RendezvousServer>> server =
      launcher::RendezvousServer::Start(server_options);
  if (!server.ok()) return Fail(kJobError, server.status().message());
  server_ = *std::move(server);
  rendezvous_.address = absl::StrCat("127.0.0.1:", server_->port());
  rendezvous_.secret = *secret;

  start_.program = program_.ok() ? *program_ : "";
  start_.command = o_.command;
  start_.cwd = cwd_;
  start_.launcher_env = env_;
  start_.secret = *secret;
  start_.grace_seconds = launcher::kGraceSeconds;
  start_.ssh.port = o_.ssh_port;
  start_.ssh.identity_file = o_.ssh_identity_file;
  start_.ssh.connect_timeout_s = o_.start_timeout_s.value_or(30);
  if (may_be_remote) {
    absl::StatusOr<std::string> ssh =
        launcher::FindExecutable("ssh", path_it == env_.end() ? "" : path_it->second);
    if (ssh.ok()) {
      start_.ssh_path = *std::move(ssh);
    } else {
      ssh_missing_ = std::string(ssh.status().message());
    }
  }
  // Workers started for a generation wait for the survivors to reach their next commit; a lost
  // worker is the driver's to notice (it then aborts the generation), not the rendezvous's.
  rendezvous_.start_timeout_s =
      std::max(o_.start_timeout_s.value_or(30),
               static_cast<int>(absl::ToInt64Seconds(settings_.elastic_timeout)));

  Supervisor::Options sup;
  sup.grace = absl::Seconds(launcher::kGraceSeconds);
  absl::StatusOr<std::unique_ptr<Supervisor>> supervisor = Supervisor::Create(sup);
  if (!supervisor.ok()) return Fail(kJobError, supervisor.status().message());
  supervisor_ = *std::move(supervisor);
  return std::nullopt;
}

void Driver::StartDiscovery() {
  if (fixed_pool_) {
    discovered_ = *fixed_pool_;
    discovered_once_ = discovered_now_ = true;
    next_discovery_ = absl::Now() + settings_.discovery_interval;
    return;
  }
  DiscoveryRun d;
  d.run = std::make_unique<ScriptRun>();
  d.sink = std::make_unique<ScriptOutputSink>(d.run.get());
  d.deadline = absl::Now() + discovery_->options().timeout;
  absl::StatusOr<int> id =
      supervisor_->Start(DiscoveryScriptSpec(discovery_->options()), d.sink.get(), 0);
  if (!id.ok()) {
    discovery_run_.reset();
    absl::StatusOr<HostDiscovery::Result> result = discovery_->Judge(id.status());
    if (!result.ok()) discovery_fatal_ = result.status();
    next_discovery_ = absl::Now() + settings_.discovery_interval;
    return;
  }
  d.id = *id;
  discovery_run_ = std::move(d);
}

void Driver::FinishDiscovery() {
  absl::StatusOr<HostDiscovery::Result> result = discovery_->Judge(*discovery_run_->run);
  discovery_run_.reset();
  next_discovery_ = absl::Now() + settings_.discovery_interval;
  if (!result.ok()) {
    discovery_fatal_ = result.status();
    return;
  }
  if (!result->warning.empty()) {
    std::cerr << "chorusrun: warning: " << result->warning << std::endl;
  }
  discovered_ = std::move(result->hosts);
  discovered_once_ = discovered_now_ = true;
}

Supervisor::Events Driver::PollOnce(absl::Time until) {
  if (discovery_run_ && !discovery_run_->exited && !discovery_run_->run->timed_out) {
    until = std::min(until, discovery_run_->deadline);
  }
  Supervisor::Events ev = supervisor_->Poll(until);
  if (!discovery_run_) return ev;
  DiscoveryRun& d = *discovery_run_;
  for (auto it = ev.exits.begin(); it != ev.exits.end();) {
    if (it->id != d.id) {
      ++it;
      continue;
    }
    d.run->exit = it->exit;
    d.exited = true;
    it = ev.exits.erase(it);
  }
  if (!d.exited && !d.run->timed_out && absl::Now() >= d.deadline) {
    d.run->timed_out = true;
    supervisor_->Stop(d.id, SIGTERM);
  }
  if (std::find(ev.finished.begin(), ev.finished.end(), d.id) != ev.finished.end()) {
    FinishDiscovery();
  }
  return ev;
}

bool Driver::AnyMemberRunning() const {
  auto running = [this](const Member& m) { return supervisor_->is_running(m.id); };
  return std::any_of(members_.begin(), members_.end(), running) ||
         std::any_of(released_.begin(), released_.end(),
                     [&](const Released& r) { return running(r.member); });
}

void Driver::StopDiscovery() {
  if (discovery_run_) supervisor_->Stop(discovery_run_->id, SIGKILL);
}

absl::StatusOr<RankAssignment> Driver::Plan(const std::vector<PreviousWorker>& previous,
                                            std::vector<launcher::HostSlots>* ordered) const {
  *ordered = OrderHosts(order_, blacklist_.Filter(discovered_, absl::Now()));
  return AssignRanks(previous, *ordered, settings_.limits);
}

std::vector<PreviousWorker> Driver::AliveMembers() const {
  std::vector<PreviousWorker> alive;
  for (const Member& m : members_) {
    if (!m.alive) continue;
    const launcher::RankPlacement& p = m.assignment.placement;
    alive.push_back({p.host, m.assignment.slot, p.rank, true});
  }
  return alive;
}

absl::StatusOr<launcher::WorkerSpec> Driver::SpecFor(const launcher::RankPlacement& p,
                                                     int generation, const std::string& worker_id) {
  launcher::RendezvousInfo rendezvous = rendezvous_;
  const bool remote = !launcher::IsLocalHost(p.host, this_host_);
  if (remote) rendezvous.address = absl::StrCat(this_host_, ":", server_->port());
  std::vector<launcher::EnvVar> rank_vars = launcher::RankEnvironment(p, rendezvous);
  // The variables that change with the generation (rank numbers, scope, generation) are the
  // ones a survivor adopts from the notice; appended, they win over RankEnvironment's.
  for (launcher::EnvVar& v : GenerationVariables(p, generation)) rank_vars.push_back(std::move(v));
  rank_vars.emplace_back("CHORUS_ELASTIC", "1");
  rank_vars.emplace_back(kWorkerIdVar, worker_id);
  rank_vars.emplace_back("CHORUS_ELASTIC_TIMEOUT",
                         absl::StrCat(absl::ToInt64Seconds(settings_.elastic_timeout)));
  const Environment env =
      launcher::MergeEnvironment(env_, launcher::WorkerEnvironment(o_), rank_vars);
  if (!remote && !program_.ok()) return program_.status();
  if (remote && start_.ssh_path.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ssh is needed to start workers on ", p.host, ": ", ssh_missing_));
  }
  return launcher::MakeWorkerSpec(start_, p.host, remote, env);
}

void Driver::AnnounceGeneration(const std::vector<Member>& next) {
  std::vector<std::string> hosts;
  std::vector<WorkerPlace> places;
  for (const Member& m : next) {
    const std::string& host = m.assignment.placement.host;
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
    places.push_back({m.worker_id, m.assignment.placement});
  }
  GenerationChange change;
  change.generation = generation_;
  change.aborted = worker_lost_;
  std::vector<std::string> causes = stopped_causes_;
  causes.insert(causes.end(), reset_causes_.begin(), reset_causes_.end());
  change.cause = absl::StrJoin(causes, "; ");
  change.lost_ranks = lost_ranks_;
  std::sort(change.lost_ranks.begin(), change.lost_ranks.end());
  change.hosts_added = hosts_added_;
  change.hosts_removed = hosts_removed_;
  change.decided = absl::Now();
  if (generation_ > 0) {
    ResetRecord record;
    record.generation = generation_;
    record.previous_hosts = previous_hosts_;
    record.current_hosts = hosts;
    record.notes = notes_;
    record.previous_size = previous_size_;
    record.current_size = static_cast<int>(next.size());
    record.cause = change.cause;
    std::cerr << FormatResetLine(record) << std::endl;
  }
  absl::Status published = server_->PublishGeneration(MakeGenerationNotice(change, places));
  if (!published.ok()) {  // a driver bug: generations only grow
    std::cerr << "chorusrun: warning: " << published.message() << std::endl;
  }
  notes_.clear();
  reset_causes_.clear();
  stopped_causes_.clear();
  survivors_.clear();
  worker_lost_ = hosts_added_ = hosts_removed_ = false;
  lost_ranks_.clear();
  previous_hosts_ = hosts;
  previous_size_ = static_cast<int>(next.size());
}

absl::StatusOr<std::unique_ptr<launcher::OutputSink>> Driver::GenerationSink(
    const std::vector<int>& ranks) {
  if (!o_.output_filename) {
    return std::make_unique<launcher::TerminalSink>(ranks, o_.prefix_output_with_timestamp, stdout,
                                                    stderr);
  }
  absl::StatusOr<std::unique_ptr<launcher::FileSink>> files =
      first_file_sink_ == nullptr ? launcher::FileSink::Create(*o_.output_filename, ranks)
                                  : first_file_sink_->ForRanks(ranks);
  if (!files.ok()) return files.status();
  if (first_file_sink_ == nullptr) first_file_sink_ = files->get();
  return std::unique_ptr<launcher::OutputSink>(*std::move(files));
}

std::optional<int> Driver::StartNewMembers(std::vector<Member>& next) {
  // One sink per generation, labelling every member with its rank in it: survivors are
  // redirected there, so their lines carry their new ranks.
  std::vector<int> ranks;
  for (const Member& m : next) ranks.push_back(m.assignment.placement.rank);
  absl::StatusOr<std::unique_ptr<launcher::OutputSink>> sink = GenerationSink(ranks);
  if (!sink.ok()) {
    members_ = next;
    StopAll(SIGKILL);
    return JobFailed(std::string(sink.status().message()));
  }
  sinks_.push_back(*std::move(sink));
  for (size_t index = 0; index < next.size(); ++index) {
    Member& m = next[index];
    if (m.id != kNotStarted) {
      supervisor_->Redirect(m.id, sinks_.back().get(), static_cast<int>(index));
      continue;
    }
    const launcher::RankPlacement& p = m.assignment.placement;
    absl::StatusOr<launcher::WorkerSpec> spec = SpecFor(p, generation_, m.worker_id);
    absl::StatusOr<int> id =
        spec.ok() ? supervisor_->Start(*spec, sinks_.back().get(), static_cast<int>(index))
                  : absl::StatusOr<int>(spec.status());
    if (!id.ok()) {
      members_ = next;
      StopAll(SIGKILL);
      return JobFailed(
          absl::StrCat("cannot start rank ", p.rank, " on ", p.host, ": ", id.status().message()));
    }
    if (o_.verbose) {
      std::cout << "chorusrun: generation " << generation_ << ": rank " << p.rank << " on "
                << p.host << ": " << launcher::ShellJoin(spec->argv) << std::endl;
    }
    m.id = *id;
  }
  return std::nullopt;
}

std::optional<int> Driver::StartGeneration(const RankAssignment& next,
                                           std::vector<launcher::HostSlots> ordered) {
  ++generation_;
  order_ = std::move(ordered);
  std::vector<Member> members;
  for (const WorkerAssignment& w : next.workers) {
    members.push_back({kNotStarted, absl::StrCat("w", workers_started_++), w, true});
  }
  AnnounceGeneration(members);
  if (std::optional<int> status = StartNewMembers(members)) return status;
  members_ = std::move(members);
  return std::nullopt;
}

std::optional<int> Driver::Reform(const RankAssignment& next,
                                  std::vector<launcher::HostSlots> ordered) {
  ++generation_;
  order_ = std::move(ordered);
  std::map<int, Member> alive;  // by previous rank
  for (const Member& m : members_) {
    if (m.alive) alive.emplace(m.assignment.placement.rank, m);
  }
  std::vector<Member> members;
  for (const WorkerAssignment& w : next.workers) {
    if (w.previous_rank && alive.count(*w.previous_rank) != 0) {
      Member m = alive.at(*w.previous_rank);
      alive.erase(*w.previous_rank);
      m.assignment = w;
      members.push_back(std::move(m));
    } else {
      members.push_back({kNotStarted, absl::StrCat("w", workers_started_++), w, true});
    }
  }
  for (auto& [rank, m] : alive) released_.push_back({m, absl::Now() + kReleaseGrace, false});
  AnnounceGeneration(members);
  if (std::optional<int> status = StartNewMembers(members)) return status;
  members_ = std::move(members);
  return std::nullopt;
}

void Driver::RecordLoss(Member& m, const std::string& why, bool failed) {
  m.alive = false;
  server_->ForgetWorker(m.worker_id);
  const launcher::RankPlacement& p = m.assignment.placement;
  worker_lost_ = true;
  lost_ranks_.push_back(p.rank);
  notes_[p.host].push_back(absl::StrCat("rank ", p.rank, " ", why));
  std::string cause = absl::StrCat("rank ", p.rank, " on ", p.host, " ", why);
  if (failed) {
    blacklist_.RecordFailure(p.host, absl::Now());
    absl::StrAppend(&cause, "; ", p.host, " blacklisted");
  }
  reset_causes_.push_back(std::move(cause));
}

void Driver::CheckHeartbeats() {
  for (const std::string& silent : server_->SilentWorkers(kHeartbeatSilence)) {
    server_->ForgetWorker(silent);
    auto it = std::find_if(members_.begin(), members_.end(),
                           [&](const Member& m) { return m.alive && m.worker_id == silent; });
    if (it == members_.end()) continue;
    RecordLoss(*it,
               absl::StrCat("silent for ", absl::FormatDuration(kHeartbeatSilence),
                            " (no heartbeat: hung or stopped), killed"),
               /*failed=*/true);
    supervisor_->Stop(it->id, SIGKILL);
  }
  const absl::Time now = absl::Now();
  for (Released& r : released_) {
    if (!r.stopping && now >= r.deadline) {
      r.stopping = true;
      supervisor_->Stop(r.member.id, SIGTERM);
    }
  }
}

std::optional<int> Driver::HandleExits(const std::vector<Supervisor::Exit>& exits) {
  for (const Supervisor::Exit& e : exits) {
    auto released = std::find_if(released_.begin(), released_.end(),
                                 [&e](const Released& r) { return r.member.id == e.id; });
    if (released != released_.end()) {
      server_->ForgetWorker(released->member.worker_id);
      released_.erase(released);
      continue;
    }
    auto it = std::find_if(members_.begin(), members_.end(),
                           [&e](const Member& m) { return m.id == e.id; });
    if (it == members_.end() || !it->alive) continue;
    if (e.stop_signal) {  // stopped by the driver: a consequence, not a cause
      it->alive = false;
      server_->ForgetWorker(it->worker_id);
      continue;
    }
    if (e.exit.ok()) {
      it->alive = false;
      // A worker that finished ends the job (as in Horovod): the others get the grace period.
      const absl::Time deadline = absl::Now() + absl::Seconds(launcher::kGraceSeconds);
      while (AnyMemberRunning() && absl::Now() < deadline) {
        Supervisor::Events ev = PollOnce(deadline);
        if (!ev.signals.empty()) return Shutdown(ev.signals.front());
      }
      if (std::optional<int> status = StopAll(SIGTERM)) return status;
      StopDiscovery();
      DrainOutput();
      return 0;
    }
    // A remote worker's signal reaches chorusrun as ssh's exit status, 128 + N (the remote
    // script exits with the shell's status of the command).
    const bool remote = !launcher::IsLocalHost(it->assignment.placement.host, this_host_);
    const bool sigterm =
        e.exit.signaled ? e.exit.code == SIGTERM : remote && e.exit.code == 128 + SIGTERM;
    if (sigterm) {
      RecordLoss(*it, "left after SIGTERM", /*failed=*/false);
      continue;
    }
    std::string why = DescribeExit(e.exit);
    if (remote && !e.exit.signaled && e.exit.code == 255) {
      absl::StrAppend(&why, " (ssh's own failure: host unreachable or connection lost)");
    }
    RecordLoss(*it, why, /*failed=*/true);
  }
  return std::nullopt;
}

std::optional<int> Driver::StopAll(int sig) {
  for (const Member& m : members_) supervisor_->Stop(m.id, sig);
  for (const Released& r : released_) supervisor_->Stop(r.member.id, sig);
  while (AnyMemberRunning()) {
    Supervisor::Events ev = PollOnce(absl::InfiniteFuture());
    if (!ev.signals.empty()) return Shutdown(ev.signals.front());
  }
  for (Member& m : members_) {
    m.alive = false;
    server_->ForgetWorker(m.worker_id);
  }
  released_.clear();
  return std::nullopt;
}

int Driver::Shutdown(int sig) {
  for (const Member& m : members_) supervisor_->Stop(m.id, sig);
  for (const Released& r : released_) supervisor_->Stop(r.member.id, sig);
  StopDiscovery();
  while (supervisor_->running() > 0) {
    Supervisor::Events ev = supervisor_->Poll(absl::InfiniteFuture());
    if (!ev.signals.empty()) {
      for (const Member& m : members_) supervisor_->Stop(m.id, SIGKILL);
      for (const Released& r : released_) supervisor_->Stop(r.member.id, SIGKILL);
    }
  }
  DrainOutput();
  std::cerr << "chorusrun: job stopped: chorusrun received signal " << launcher::SignalName(sig)
            << std::endl;
  return 128 + sig;
}

void Driver::DrainOutput() {
  const absl::Time deadline = absl::Now() + launcher::kDrainAfterExit;
  while (supervisor_->output_open() && absl::Now() < deadline) {
    supervisor_->Poll(deadline, /*return_when_idle=*/true);
  }
}

int Driver::JobFailed(const std::string& cause) {
  StopDiscovery();
  DrainOutput();
  std::cerr << "chorusrun: elastic job failed: " << cause << std::endl;
  return kJobError;
}

std::optional<int> Driver::Reset() {
  const std::string cause = absl::StrJoin(reset_causes_, "; ");
  if (settings_.reset_limit && resets_ >= *settings_.reset_limit) {
    if (std::optional<int> status = StopAll(SIGTERM)) return status;
    return JobFailed(absl::StrCat("reset limit ", *settings_.reset_limit,
                                  " reached (--reset-limit); the next reset was due to: ", cause));
  }
  ++resets_;
  std::vector<launcher::HostSlots> ordered;
  absl::StatusOr<RankAssignment> next = Plan(AliveMembers(), &ordered);
  if (next.ok() && next->min_np_met && !next->workers.empty()) {
    return Reform(*next, std::move(ordered));
  }
  // Too few slots to go on: the survivors are stopped too, and the next generation starts
  // afresh (with their rank order) once --min-np slots exist.
  survivors_ = AliveMembers();
  if (std::optional<int> status = StopAll(SIGTERM)) return status;
  members_.clear();
  // The reset is handled: the loop now waits for slots (bounded by --elastic-timeout); its
  // causes open the cause of the generation that starts once enough slots exist.
  std::cerr << "chorusrun: generation " << generation_ << " stopped: " << cause
            << "; fewer than --min-np=" << settings_.limits.min_np << " slots left ("
            << (next.ok() ? next->workers.size() : 0) << "), waiting up to --elastic-timeout="
            << absl::ToInt64Seconds(settings_.elastic_timeout) << " s for more" << std::endl;
  stopped_causes_.insert(stopped_causes_.end(), reset_causes_.begin(), reset_causes_.end());
  reset_causes_.clear();
  return std::nullopt;
}

bool Driver::EveryHostBlacklisted(absl::Time now) const {
  if (settings_.cooldown || discovered_.empty()) return false;
  return blacklist_.Filter(discovered_, now).empty();
}

int Driver::Run() {
  absl::Time waiting_since = absl::Now();
  while (true) {
    if (discovery_fatal_) {
      if (std::optional<int> status = StopAll(SIGTERM)) return *status;
      return JobFailed(absl::StrCat("host discovery failed: ", discovery_fatal_->message()));
    }
    if (!discovery_run_ && absl::Now() >= next_discovery_) {
      StartDiscovery();
      continue;
    }
    const bool discovered_now = discovered_now_;
    discovered_now_ = false;
    if (!discovered_once_) {
      // The first answer is awaited before anything starts.
    } else if (members_.empty()) {
      // Waiting for enough slots (the start, or after a reset).
      std::vector<launcher::HostSlots> ordered;
      absl::StatusOr<RankAssignment> next = Plan(survivors_, &ordered);
      if (!next.ok()) return JobFailed(std::string(next.status().message()));
      if (next->min_np_met && !next->workers.empty()) {
        if (std::optional<int> status = StartGeneration(*next, std::move(ordered))) {
          return *status;
        }
        continue;
      }
      const absl::Time now = absl::Now();
      if (EveryHostBlacklisted(now)) {
        return JobFailed(absl::StrCat(
            "every host is blacklisted (",
            absl::StrJoin(discovered_, ", ",
                          [](std::string* out, const auto& h) { out->append(h.first); }),
            ") after its workers failed; no worker is left"));
      }
      if (now - waiting_since > settings_.elastic_timeout) {
        return JobFailed(absl::StrCat(
            "fewer than --min-np=", settings_.limits.min_np, " slots for longer than ",
            "--elastic-timeout=", absl::ToInt64Seconds(settings_.elastic_timeout), " s (",
            next->workers.size(), " available",
            generation_ < 0 ? "" : absl::StrCat(" after generation ", generation_), ")"));
      }
    } else if (discovered_now && reset_causes_.empty()) {
      std::vector<launcher::HostSlots> ordered;
      absl::StatusOr<RankAssignment> next = Plan(AliveMembers(), &ordered);
      if (!next.ok()) return JobFailed(std::string(next.status().message()));
      bool same = next->released.empty() && next->workers.size() == members_.size();
      for (size_t i = 0; same && i < members_.size(); ++i) {
        const WorkerAssignment& a = members_[i].assignment;
        const WorkerAssignment& b = next->workers[i];
        same = a.placement == b.placement && a.slot == b.slot;
      }
      if (!same) {
        std::set<std::string> listed;
        for (const launcher::HostSlots& h : ordered) listed.insert(h.host);
        for (const std::string& host : previous_hosts_) {
          if (listed.count(host) == 0) notes_[host].push_back("gone from discovery");
        }
        const HostDiff diff = DiffHosts(order_, ordered);
        hosts_added_ = !diff.added.empty();
        hosts_removed_ = !diff.removed.empty();
        reset_causes_.push_back(absl::StrCat("hosts changed: ", DescribeDiff(diff)));
      }
    }
    if (!reset_causes_.empty()) {
      if (std::optional<int> status = Reset()) return *status;
      waiting_since = absl::Now();
      continue;
    }
    CheckHeartbeats();
    if (!reset_causes_.empty()) continue;
    // Wakes for the next discovery, a worker's end, the discovery's end, a signal, or the next
    // heartbeat check.
    absl::Time wake = absl::Now() + kHeartbeatCheckPeriod;
    if (!discovery_run_) wake = std::min(wake, next_discovery_);
    Supervisor::Events ev = PollOnce(wake);
    if (!ev.signals.empty()) return Shutdown(ev.signals.front());
    if (std::optional<int> status = HandleExits(ev.exits)) return *status;
  }
}

}  // namespace

int RunElasticJob(const LaunchOptions& o, const Environment& launcher_env) {
  absl::StatusOr<DriverSettings> settings = ResolveDriverSettings(o, launcher_env);
  if (!settings.ok()) return Fail(kUsageError, settings.status().message());
  Blacklist::Options blacklist_options;
  blacklist_options.cooldown = settings->cooldown;
  absl::StatusOr<Blacklist> blacklist = Blacklist::Create(blacklist_options);
  if (!blacklist.ok()) return Fail(kUsageError, blacklist.status().message());
  Driver driver(o, launcher_env, *std::move(settings), *std::move(blacklist));
  if (std::optional<int> status = driver.Prepare()) return *status;
  return driver.Run();
}

}  // namespace chorus::elastic
