// File: elastic/next_generation.h
//
// Every decision of an MPI-less chorusrun job (fixed-size or elastic) as one pure function:
//
//   Decision d = NextGeneration(state, events, now, rules);
//
// takes what the job remembers (JobState), what happened since the last call (Events: a
// discovery answer, workers that ended, fell silent or were first heard from, hosts ssh could
// not reach, a signal to chorusrun) and the clock, and returns the next state, the actions the
// job engine (launcher/engine/job_engine.h) carries out (start workers, publish a generation, stop
// workers, log a line, end the job) and the time by which it must be called again even if
// nothing happens (`wake`). The engine blocks until an event or `wake`: a call with no events
// before `wake` returns no actions, so the engine's loop either sleeps or makes progress.
//
// The rules (Horovod's elastic semantics, docs/elastic.md):
// - Generation 0 starts once the usable hosts (discovered, not blacklisted, ssh-checked) have
//   --min-np slots: a worker per slot, up to --max-np, ranks by elastic/rank_assignment.h.
// - A worker that ends: exit 0 ends the job (the others get `finish_grace`, then are stopped;
//   status 0); SIGTERM from outside leaves (no blacklist); anything else fails and blacklists its
//   host; one silent for the heartbeat bound is killed and counts as failed. Every such loss is
//   a reset: the survivors go on at once in the next generation (published aborted: their
//   pending ops fail and they roll back to their last commit), without waiting for anyone new.
// - Free slots (a lost worker's, a host added by discovery, a blacklisted host back after its
//   cooldown) get joining workers: started without a place, they join in a later generation
//   once they are ready (first heard from, i.e. they called chorus init), so their start-up is
//   off the survivors' critical path; the survivors take that generation at their next commit.
//   Joiners ready within `join_window` of the first one join together.
// - Hosts gone from discovery (or slots removed, or --max-np exceeded) release their workers:
//   they leave at their next commit (published, not aborted); stopped after `release_grace`.
// - Fewer than --min-np workers left: the survivors are held (a generation published with
//   `hold`: they wait in their reset, keeping their state) while joiners start; the world forms
//   again once survivors and ready joiners reach --min-np. No survivor left: the next generation
//   starts afresh. Fewer than --min-np for longer than --elastic-timeout, every host
//   blacklisted (without a cooldown), or the (K+1)-th reset under --reset-limit K: the job fails
//   (status 1, "chorusrun: elastic job failed: <cause>"). Every generation after the first
//   scales the job down or up and counts as a reset (horovodrun's "times the job can scale up or
//   down"): a loss refilled by a joiner is two.
// - A fixed-size job (`rules.fixed`: chorusrun --gloo without elastic flags) is an elastic job
//   with min = max = np, the hosts given once and no reset: the first lost worker ends it with
//   that worker's status ("chorusrun: job failed: rank R on H <how>", after a published abort
//   so that the others' pending ops fail at once), a host ssh cannot reach ends it before it
//   starts, and it ends with status 0 once every worker exited 0.
// - A signal N to chorusrun ends any job: forwarded to the workers, status 128 + N.
//
// Pure: no I/O, no clock, no randomness but the blacklist's injected source.
//
// Thread-safety: stateless; JobState is a plain value.
#ifndef CHORUS_ELASTIC_NEXT_GENERATION_H_
#define CHORUS_ELASTIC_NEXT_GENERATION_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/time.h"

#include "elastic/blacklist.h"
#include "elastic/host_set.h"
#include "elastic/rank_assignment.h"
#include "elastic/worker_exit.h"

namespace chorus::elastic {

// The job's rules, fixed for its life (resolved from chorusrun's flags:
// launcher/engine/job_settings.h).
struct JobRules {
  bool fixed = false;  // a fixed-size job (see the file comment)
  RankLimits limits;
  // An elastic job's -np: a first world smaller than this is said so (it starts with what
  // --min-np allows, and grows as slots appear).
  std::optional<int> num_proc;
  std::optional<int> reset_limit;
  // Fewer than --min-np this long, or a joining worker not ready this long: see above.
  absl::Duration elastic_timeout = absl::Seconds(600);
  // With a blacklist cooldown hosts come back, so "every host blacklisted" does not end the job.
  bool blacklist_cooldown = false;
  absl::Duration heartbeat_silence = absl::Seconds(5);  // for the message only
  absl::Duration release_grace = absl::Seconds(60);
  absl::Duration finish_grace = absl::Seconds(3);
  absl::Duration join_window = absl::Seconds(1);
};

// A worker process of the job, as the decisions track it.
struct Worker {
  std::string id;  // "w<n>": CHORUS_ELASTIC_WORKER_ID, never reused
  std::string host;
  int slot = 0;
  std::optional<RankPlacement> place;  // its place in the current generation; none: joining
  absl::Time started;                  // joining: bounded by the elastic timeout
  std::optional<absl::Time> ready;     // joining: first heard from
  std::optional<absl::Time> released;  // released at; leaves at its next commit
  bool stop_sent = false;              // released: stopped after the grace period

  friend bool operator==(const Worker&, const Worker&) = default;
};

// What the next published generation is about, gathered until it is published.
struct PendingChange {
  bool aborted = false;             // a placed worker was lost
  std::vector<std::string> causes;  // joined into the cause
  std::vector<int> lost_ranks;      // ranks of the current generation that are gone
  std::map<std::string, std::vector<std::string>> notes;  // host -> what happened there
  bool released = false;              // workers released (their hosts left discovery, --max-np)
  std::set<std::string> blacklisted;  // hosts blacklisted for these causes (not "removed" again)
};

struct JobState {
  enum class Phase {
    kStarting,   // no world: waiting for enough slots (first start, or every worker lost)
    kRunning,    // a world runs
    kHolding,    // survivors wait in their reset for enough workers (fewer than --min-np)
    kFinishing,  // a worker exited 0: the others get finish_grace
    kEnded,      // EndJob was decided
  };

  explicit JobState(Blacklist b) : blacklist(std::move(b)) {}

  Phase phase = Phase::kStarting;
  int generation = -1;  // the last published one
  int resets = 0;       // generations after the first: counted against --reset-limit
  int workers_started = 0;
  bool discovered_once = false;
  HostSet discovered;                      // the last discovery answer
  std::vector<HostSlots> order;            // the host order of the last plan
  std::vector<HostSlots> published_order;  // ... when the last generation was published
  Blacklist blacklist;
  std::vector<Worker> workers;            // every worker still running, placed ones by rank first
  std::optional<absl::Time> short_since;  // fewer than --min-np since
  absl::Time finish_by = absl::InfiniteFuture();  // kFinishing
  PendingChange change;
  std::vector<std::string> previous_hosts;  // for the reset line: hosts with ranks, rank order
  int previous_size = 0;
  // A fixed-size job: the first rank that reported dying of an exception. Its report reaches
  // chorusrun before the other ranks can fail because of it, but they may exit first: the job
  // is then said to have failed because of this rank.
  std::optional<FailureReport> failure_report;
};

// A worker's process ended.
struct WorkerEnd {
  std::string id;
  ExitVerdict verdict;   // ClassifyExit's, for how the worker was started
  int shell_status = 0;  // WorkerExit::shell_status(): a fixed-size job's status when it failed
  bool stopped = false;  // chorusrun had stopped it: a consequence, not a cause
};

struct Events {
  std::optional<HostSet> discovered;           // a discovery answer: the usable hosts now
  std::optional<std::string> discovery_fatal;  // the first discovery failed
  std::vector<WorkerEnd> ends;
  std::vector<std::string> silent;  // worker ids silent for the heartbeat bound
  std::vector<std::string> heard;   // joining worker ids heard from for the first time
  // Hosts ssh cannot reach: host, the sentence that says so ("cannot reach host h over ssh ...").
  std::vector<std::pair<std::string, std::string>> unreachable;
  std::vector<std::pair<std::string, std::string>> start_failed;  // worker id, why
  std::optional<int> signal;                                      // SIGINT/SIGTERM to chorusrun
  std::vector<FailureReport> failure_reports;  // placed ranks that died of an exception

  bool empty() const {
    return !discovered && !discovery_fatal && ends.empty() && silent.empty() && heard.empty() &&
           unreachable.empty() && start_failed.empty() && !signal && failure_reports.empty();
  }
};

// Start a worker process: placed (generation `generation`'s place) or joining (no place).
struct StartWorker {
  Worker worker;
  int generation = 0;  // placed: the generation whose variables it starts with
};

// Publish a generation to the workers (the rendezvous service's Watch) and log its line.
struct PublishGeneration {
  int number = 0;
  bool aborted = false;
  bool hold = false;  // too few workers: the places wait for a later generation
  std::string cause;
  std::vector<int> lost_ranks;
  bool hosts_added = false;
  bool hosts_removed = false;
  std::vector<std::pair<std::string, RankPlacement>> places;  // worker id, place; rank order
  std::string line;  // the reset line ("" for generation 0)
};

struct StopWorker {
  std::string id;
  int signal = 0;
};

struct LogLine {
  std::string line;  // one stderr line
};

// End the job: stop every process still running with `signal` (SIGKILL after the grace
// period), read the last output, print `line` (when not empty) and exit with `status`.
struct EndJob {
  int status = 0;
  std::string line;
  int signal = 15;  // SIGTERM, or the signal chorusrun received (forwarded)
};

using Action = std::variant<StartWorker, PublishGeneration, StopWorker, LogLine, EndJob>;

struct Decision {
  JobState state;
  std::vector<Action> actions;
  absl::Time wake = absl::InfiniteFuture();  // call again by then, events or not
};

Decision NextGeneration(JobState state, const Events& events, absl::Time now,
                        const JobRules& rules);

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_NEXT_GENERATION_H_
