#include "elastic/next_generation.h"

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "elastic/reset_log.h"

namespace chorus::elastic {
namespace {

using Phase = JobState::Phase;

constexpr int kJobFailed = 1;

bool Placed(const Worker& w) { return w.place.has_value() && !w.released; }
bool Joining(const Worker& w) { return !w.place.has_value() && !w.released; }

// One slot of one host.
struct Slot {
  std::string host;
  int slot = 0;
};

std::string Seconds(absl::Duration d) { return absl::StrCat(absl::ToInt64Seconds(d), " s"); }

// One call of NextGeneration: the steps of the file comment of next_generation.h, in order.
class Decider {
 public:
  Decider(JobState state, absl::Time now, const JobRules& rules)
      : s_(std::move(state)), now_(now), rules_(rules) {}

  Decision Run(const Events& e) {
    if (s_.phase == Phase::kEnded) return Done();
    if (e.signal) {
      End(128 + *e.signal,
          absl::StrCat("chorusrun: job stopped: chorusrun received signal ", SignalName(*e.signal)),
          *e.signal);
      return Done();
    }
    if (e.discovery_fatal) {
      Fail(absl::StrCat("host discovery failed: ", *e.discovery_fatal));
      return Done();
    }
    for (const auto& [id, why] : e.start_failed) {
      const Worker* w = Find(id);
      Fail(absl::StrCat("cannot start worker ", id, w != nullptr ? " on " + w->host : "", ": ",
                        why));
      return Done();
    }
    for (const auto& [host, why] : e.unreachable) Unreachable(host, why);
    if (s_.phase == Phase::kEnded) return Done();
    if (e.discovered) {
      s_.discovered = *e.discovered;
      s_.discovered_once = true;
    }
    if (rules_.fixed) {
      for (const FailureReport& report : e.failure_reports) {
        ChooseFailureReport(&s_.failure_report, report);
      }
    }
    HandleEnds(e.ends);
    HandleSilent(e.silent);
    for (const std::string& id : e.heard) {
      Worker* w = Find(id);
      if (w != nullptr && Joining(*w) && !w->ready) w->ready = now_;
    }
    if (rules_.fixed && fixed_loss_) {
      // Let the others' pending ops fail at once with the cause, then stop them.
      PublishGeneration abort;
      abort.number = ++s_.generation;
      abort.aborted = true;
      abort.cause = fixed_loss_->second;
      actions_.push_back(std::move(abort));
      End(fixed_loss_->first, absl::StrCat("chorusrun: job failed: ", fixed_loss_->second),
          SIGTERM);
      return Done();
    }
    if (s_.phase == Phase::kFinishing || (rules_.fixed && s_.phase == Phase::kRunning)) {
      const bool placed_left = std::any_of(s_.workers.begin(), s_.workers.end(), Placed);
      if (!placed_left || now_ >= s_.finish_by) {
        End(0, "", SIGTERM);
      } else {
        Wake(s_.finish_by);
      }
      return Done();
    }
    // Timers first: a joiner stopped for being late frees its slot for this plan. Then the
    // wake-ups of what the plan released or started.
    Timers();
    Plan();
    if (s_.phase != Phase::kEnded) Timers();
    return Done();
  }

 private:
  Decision Done() {
    if (s_.phase == Phase::kEnded) wake_ = absl::InfiniteFuture();
    return Decision{std::move(s_), std::move(actions_), wake_};
  }

  void Wake(absl::Time t) { wake_ = std::min(wake_, t); }

  Worker* Find(const std::string& id) {
    auto it = std::find_if(s_.workers.begin(), s_.workers.end(),
                           [&id](const Worker& w) { return w.id == id; });
    return it == s_.workers.end() ? nullptr : &*it;
  }

  // The host of placed rank `rank` among the workers still running; empty when none is.
  std::string HostOfRank(int rank) const {
    for (const Worker& w : s_.workers) {
      if (w.place && w.place->rank == rank) return w.place->host;
    }
    return "";
  }

  // Removes worker `id`; nullopt when there is none.
  std::optional<Worker> Take(const std::string& id) {
    auto it = std::find_if(s_.workers.begin(), s_.workers.end(),
                           [&id](const Worker& w) { return w.id == id; });
    if (it == s_.workers.end()) return std::nullopt;
    Worker w = std::move(*it);
    s_.workers.erase(it);
    return w;
  }

  void End(int status, std::string line, int signal) {
    actions_.push_back(EndJob{status, std::move(line), signal});
    s_.phase = Phase::kEnded;
  }

  void Fail(const std::string& cause) {
    End(kJobFailed,
        absl::StrCat(rules_.fixed ? "chorusrun: job failed: " : "chorusrun: elastic job failed: ",
                     cause),
        SIGTERM);
  }

  void Log(std::string line) { actions_.push_back(LogLine{std::move(line)}); }

  void Unreachable(const std::string& host, const std::string& why) {
    if (rules_.fixed) {
      End(kJobFailed, absl::StrCat("chorusrun: error: ", why), SIGTERM);
      return;
    }
    s_.blacklist.RecordFailure(host, now_);
    Log(absl::StrCat("chorusrun: ", why, "; ", host, " blacklisted"));
  }

  // A placed worker is gone: a reset cause (elastic), the job's end (fixed).
  void Lose(const Worker& w, const std::string& why, bool failed, int status) {
    const RankPlacement& p = *w.place;
    std::string cause = absl::StrCat("rank ", p.rank, " on ", p.host, " ", why);
    if (rules_.fixed) {
      if (fixed_loss_) return;
      if (const std::optional<FailureReport>& report = s_.failure_report) {
        // The reporting rank is the cause, whether it ended first or this rank failed because
        // of it (then it still runs: its host is among the workers).
        cause = DescribeFailureReport(*report,
                                      report->rank == p.rank ? p.host : HostOfRank(report->rank));
      }
      fixed_loss_.emplace(status, std::move(cause));
      return;
    }
    s_.change.aborted = true;
    s_.change.lost_ranks.push_back(p.rank);
    s_.change.notes[p.host].push_back(absl::StrCat("rank ", p.rank, " ", why));
    if (failed) {
      s_.blacklist.RecordFailure(p.host, now_);
      s_.change.blacklisted.insert(p.host);
      absl::StrAppend(&cause, "; ", p.host, " blacklisted");
    }
    s_.change.causes.push_back(std::move(cause));
  }

  // A joining worker is gone before it joined: not a reset, but its host is to blame when it
  // failed.
  void LoseJoiner(const Worker& w, const std::string& why, bool failed) {
    std::string line =
        absl::StrCat("chorusrun: worker ", w.id, " on ", w.host, " ", why, " before it joined");
    if (failed && !rules_.fixed) {
      s_.blacklist.RecordFailure(w.host, now_);
      absl::StrAppend(&line, "; ", w.host, " blacklisted");
    }
    Log(std::move(line));
  }

  void HandleEnds(const std::vector<WorkerEnd>& ends) {
    for (const WorkerEnd& end : ends) {
      std::optional<Worker> w = Take(end.id);
      if (!w || w->released || end.stopped || s_.phase == Phase::kFinishing) continue;
      const ExitVerdict& v = end.verdict;
      if (!w->place) {
        LoseJoiner(*w, v.description, v.kind == ExitKind::kFailed);
        continue;
      }
      if (v.kind == ExitKind::kSucceeded) {
        if (rules_.fixed) continue;  // the job ends once every worker has
        // As in Horovod, a worker that finished ends the job: the others get the grace period.
        s_.phase = Phase::kFinishing;
        s_.finish_by = now_ + rules_.finish_grace;
        continue;
      }
      Lose(*w, v.description, v.kind == ExitKind::kFailed, end.shell_status);
    }
  }

  void HandleSilent(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      std::optional<Worker> w = Take(id);
      if (!w) continue;
      actions_.push_back(StopWorker{id, SIGKILL});
      if (w->released || s_.phase == Phase::kFinishing) continue;
      const std::string why =
          absl::StrCat("silent for ", absl::FormatDuration(rules_.heartbeat_silence),
                       " (no heartbeat: hung, stopped or cut off), killed");
      if (!w->place) {
        LoseJoiner(*w, why, /*failed=*/true);
      } else {
        Lose(*w, why, /*failed=*/true, kJobFailed);
      }
    }
  }

  // Counts a reset against --reset-limit; false (and the job ends) past it.
  bool CountReset(const std::string& cause) {
    if (rules_.reset_limit && s_.resets >= *rules_.reset_limit) {
      Fail(absl::StrCat("reset limit ", *rules_.reset_limit,
                        " reached (--reset-limit); the next reset was due to: ", cause));
      return false;
    }
    ++s_.resets;
    return true;
  }

  void Plan() {
    if (!s_.discovered_once) return;  // the first answer is awaited before anything starts
    const HostSet usable = s_.blacklist.Filter(s_.discovered, now_);
    const std::vector<HostSlots> ordered = OrderHosts(s_.order, usable);

    // Occupants: placed workers by rank, then joiners; AssignRanks keeps those whose slot still
    // exists under --max-np, in that order, and lists the free slots after them. (Workers are
    // named by id: s_.workers changes under the plan.)
    std::vector<const Worker*> placed;
    for (const Worker& w : s_.workers) {
      if (Placed(w)) placed.push_back(&w);
    }
    std::sort(placed.begin(), placed.end(),
              [](const Worker* a, const Worker* b) { return a->place->rank < b->place->rank; });
    std::vector<std::string> occupants;
    std::vector<PreviousWorker> previous;
    auto occupy = [&](const Worker& w) {
      previous.push_back({w.host, w.slot, static_cast<int>(occupants.size()), true});
      occupants.push_back(w.id);
    };
    for (const Worker* w : placed) occupy(*w);
    for (const Worker& w : s_.workers) {
      if (Joining(w)) occupy(w);
    }
    absl::StatusOr<RankAssignment> plan = AssignRanks(previous, ordered, rules_.limits);
    if (!plan.ok()) {
      Fail(std::string(plan.status().message()));
      return;
    }
    s_.order = ordered;

    // Workers without a place in the plan: placed ones are released, joiners stopped.
    std::set<std::string> listed;
    for (const HostSlots& h : ordered) listed.insert(h.host);
    for (const PreviousWorker& r : plan->released) {
      Worker& w = *Find(occupants[static_cast<size_t>(r.rank)]);
      if (Joining(w)) {
        actions_.push_back(StopWorker{w.id, SIGTERM});
        dropped_.insert(w.id);
        continue;
      }
      w.released = now_;
      s_.change.released = true;
      std::vector<std::string>& notes = s_.change.notes[w.host];
      const std::string note = listed.contains(w.host)
                                   ? absl::StrCat("rank ", w.place->rank, " released")
                               : s_.discovered.contains(w.host) ? "blacklisted"
                                                                : "gone from discovery";
      if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
    }
    DropStopped();

    std::vector<std::string> survivors;  // placed, by rank
    std::vector<std::string> joiners;    // in start order
    for (const std::string& id : occupants) {
      const Worker* w = Find(id);
      if (w == nullptr || w->released) continue;
      (Placed(*w) ? survivors : joiners).push_back(id);
    }
    // Free slots; a released worker still holds its slot until it has left.
    std::set<std::pair<std::string, int>> held;
    for (const Worker& w : s_.workers) {
      if (w.released) held.insert({w.host, w.slot});
    }
    std::vector<Slot> free;
    for (const WorkerAssignment& a : plan->workers) {
      if (!a.previous_rank && !held.contains({a.placement.host, a.slot})) {
        free.push_back({a.placement.host, a.slot});
      }
    }
    // Slots the job can use now.
    const size_t available = survivors.size() + joiners.size() + free.size();

    if (survivors.empty()) {
      StartAfresh(joiners, free, available);
      return;
    }
    std::vector<std::string> ready;
    std::optional<absl::Time> first_ready;
    for (const std::string& id : joiners) {
      const Worker& w = *Find(id);
      if (!w.ready) continue;
      ready.push_back(id);
      first_ready = std::min(first_ready.value_or(*w.ready), *w.ready);
    }
    bool join = false;
    if (!ready.empty()) {
      join = ready.size() == joiners.size() || now_ >= *first_ready + rules_.join_window;
      if (!join) Wake(*first_ready + rules_.join_window);
    }
    const size_t min_np = static_cast<size_t>(rules_.limits.min_np);
    const bool changed = !s_.change.causes.empty() || s_.change.released;
    if (survivors.size() + (join ? ready.size() : 0) >= min_np) {
      if (changed || join || s_.phase == Phase::kHolding) {
        std::vector<std::string> members = survivors;
        if (join) members.insert(members.end(), ready.begin(), ready.end());
        if (!Publish(members, /*hold=*/false, join ? ready : std::vector<std::string>{})) return;
      }
      s_.phase = Phase::kRunning;
      s_.short_since.reset();
    } else {
      if ((changed || s_.phase != Phase::kHolding) && !Publish(survivors, /*hold=*/true, {})) {
        return;
      }
      s_.phase = Phase::kHolding;
      if (available < min_np) {
        Short(available);
      } else {
        s_.short_since.reset();  // enough slots: waiting for joiners to start
      }
    }
    for (const Slot& slot : free) StartJoiner(slot);
  }

  // No survivor: the next generation starts with every worker new (joiners already started
  // take their places in it) once --min-np slots exist.
  void StartAfresh(const std::vector<std::string>& joiners, const std::vector<Slot>& free,
                   size_t available) {
    if (available < static_cast<size_t>(rules_.limits.min_np)) {
      s_.phase = Phase::kStarting;
      Short(available);
      return;
    }
    // Joiners keep their slots; new workers start placed, with the generation's variables.
    std::vector<std::string> members = joiners;
    std::vector<std::string> fresh;
    for (const Slot& slot : free) {
      Worker w;
      w.id = absl::StrCat("w", s_.workers_started++);
      w.host = slot.host;
      w.slot = slot.slot;
      w.started = now_;
      fresh.push_back(w.id);
      members.push_back(w.id);
      s_.workers.push_back(std::move(w));
    }
    // Ranks follow the host order, each host's slots in order (as without a previous
    // generation).
    std::map<std::string, size_t> host_index;
    for (size_t i = 0; i < s_.order.size(); ++i) host_index.emplace(s_.order[i].host, i);
    std::sort(members.begin(), members.end(), [&](const std::string& a, const std::string& b) {
      const Worker& wa = *Find(a);
      const Worker& wb = *Find(b);
      return std::make_pair(host_index.at(wa.host), wa.slot) <
             std::make_pair(host_index.at(wb.host), wb.slot);
    });
    if (!Publish(members, /*hold=*/false, {})) return;
    for (const std::string& id : fresh) actions_.push_back(StartWorker{*Find(id), s_.generation});
    s_.phase = Phase::kRunning;
    s_.short_since.reset();
  }

  // Removes the workers stopped in this call from the state.
  void DropStopped() {
    s_.workers.erase(std::remove_if(s_.workers.begin(), s_.workers.end(),
                                    [this](const Worker& w) { return dropped_.contains(w.id); }),
                     s_.workers.end());
  }

  // Fewer than --min-np slots (`available`): wait, bounded by --elastic-timeout.
  void Short(size_t available) {
    if (!rules_.blacklist_cooldown && !s_.discovered.empty() &&
        s_.blacklist.Filter(s_.discovered, now_).empty()) {
      std::vector<std::string> hosts;
      for (const auto& [host, slots] : s_.discovered) hosts.push_back(host);
      Fail(absl::StrCat("every host is blacklisted (", absl::StrJoin(hosts, ", "),
                        ") after its workers failed; no worker is left"));
      return;
    }
    if (!s_.short_since) s_.short_since = now_;
    if (now_ - *s_.short_since > rules_.elastic_timeout) {
      Fail(absl::StrCat(
          "fewer than --min-np=", rules_.limits.min_np, " slots for longer than --elastic-timeout=",
          Seconds(rules_.elastic_timeout), " (", available, " available",
          s_.generation < 0 ? "" : absl::StrCat(" after generation ", s_.generation), ")"));
      return;
    }
    Wake(*s_.short_since + rules_.elastic_timeout + absl::Milliseconds(1));
  }

  // Starts a worker without a place for `slot`: it joins once it is ready.
  void StartJoiner(const Slot& slot) {
    Worker w;
    w.id = absl::StrCat("w", s_.workers_started++);
    w.host = slot.host;
    w.slot = slot.slot;
    w.started = now_;
    actions_.push_back(StartWorker{w, s_.generation});
    s_.workers.push_back(std::move(w));
  }

  // Publishes generation + 1 with the workers `members` (ids) in rank order (a held one when
  // `hold`); `joined` are the joiners it places. False when the job ended instead
  // (--reset-limit).
  bool Publish(const std::vector<std::string>& members, bool hold,
               const std::vector<std::string>& joined) {
    // What changed since the last generation: its hosts, then losses and joins.
    std::vector<std::string> causes = s_.change.causes;
    HostDiff diff = DiffHosts(s_.published_order, s_.order);
    // A host blacklisted for one of the causes is gone for that reason already.
    std::erase_if(diff.removed,
                  [this](const std::string& h) { return s_.change.blacklisted.contains(h); });
    if (s_.generation >= 0 && !diff.empty()) {
      causes.push_back(absl::StrCat("hosts changed: ", DescribeDiff(diff)));
    }
    if (!joined.empty()) {
      std::vector<std::string> names;
      for (size_t i = 0; i < members.size(); ++i) {
        if (std::find(joined.begin(), joined.end(), members[i]) != joined.end()) {
          names.push_back(absl::StrCat("rank ", i, " on ", Find(members[i])->host));
        }
      }
      causes.push_back(absl::StrCat("joined: ", absl::StrJoin(names, ", ")));
    }
    // Every generation after the first scales the job up or down: a reset.
    if (s_.generation >= 0 && !CountReset(absl::StrJoin(causes, "; "))) return false;
    std::vector<WorkerAssignment> world;
    for (const std::string& id : members) {
      const Worker& w = *Find(id);
      WorkerAssignment a;
      a.placement.host = w.host;
      a.placement.rank = static_cast<int>(world.size());
      a.slot = w.slot;
      world.push_back(std::move(a));
    }
    NumberWorkers(s_.order, world);
    PublishGeneration g;
    g.number = ++s_.generation;
    g.aborted = s_.change.aborted;
    g.hold = hold;
    g.lost_ranks = s_.change.lost_ranks;
    std::sort(g.lost_ranks.begin(), g.lost_ranks.end());
    g.hosts_added = !diff.added.empty() || !joined.empty();
    g.hosts_removed = !diff.removed.empty() || s_.change.released;
    g.cause = absl::StrJoin(causes, "; ");
    std::vector<std::string> hosts;
    for (size_t i = 0; i < members.size(); ++i) {
      Worker& w = *Find(members[i]);
      w.place = world[i].placement;
      g.places.emplace_back(w.id, world[i].placement);
      if (std::find(hosts.begin(), hosts.end(), w.host) == hosts.end()) hosts.push_back(w.host);
    }
    if (g.number == 0 && !rules_.fixed && rules_.num_proc &&
        static_cast<int>(members.size()) < *rules_.num_proc) {
      Log(absl::StrCat(
          "chorusrun: the elastic job starts with ", members.size(), " workers, fewer than -np ",
          *rules_.num_proc, ": ", members.size(),
          " usable slots found (--min-np=", rules_.limits.min_np, "); workers join as slots appear",
          rules_.limits.max_np ? absl::StrCat(", up to --max-np=", *rules_.limits.max_np)
                               : std::string()));
    }
    if (g.number > 0) {
      ResetRecord record;
      record.generation = g.number;
      record.previous_hosts = s_.previous_hosts;
      record.current_hosts = hosts;
      record.notes = s_.change.notes;
      record.previous_size = s_.previous_size;
      record.current_size = static_cast<int>(members.size());
      record.cause = g.cause;
      g.line = FormatResetLine(record);
      if (hold) {
        absl::StrAppend(&g.line, "; on hold: fewer than --min-np=", rules_.limits.min_np,
                        " workers, waiting up to --elastic-timeout=",
                        Seconds(rules_.elastic_timeout), " for more");
      }
    }
    actions_.push_back(std::move(g));
    s_.change = PendingChange();
    s_.published_order = s_.order;
    s_.previous_hosts = std::move(hosts);
    s_.previous_size = static_cast<int>(members.size());
    // Placed workers by rank first, then joiners and released ones.
    std::stable_sort(s_.workers.begin(), s_.workers.end(), [](const Worker& a, const Worker& b) {
      const int ra = Placed(a) ? a.place->rank : INT32_MAX;
      const int rb = Placed(b) ? b.place->rank : INT32_MAX;
      return ra < rb;
    });
    return true;
  }

  // Released workers past their grace period are stopped; joiners never ready within the
  // elastic timeout are stopped.
  void Timers() {
    for (Worker& w : s_.workers) {
      if (w.released) {
        if (w.stop_sent) continue;
        if (now_ >= *w.released + rules_.release_grace) {
          w.stop_sent = true;
          actions_.push_back(StopWorker{w.id, SIGTERM});
        } else {
          Wake(*w.released + rules_.release_grace);
        }
      } else if (Joining(w) && !w.ready) {
        if (now_ >= w.started + rules_.elastic_timeout) {
          actions_.push_back(StopWorker{w.id, SIGKILL});
          Log(absl::StrCat("chorusrun: worker ", w.id, " on ", w.host,
                           " did not start chorus within --elastic-timeout=",
                           Seconds(rules_.elastic_timeout), "; stopped"));
          dropped_.insert(w.id);
        } else {
          Wake(w.started + rules_.elastic_timeout);
        }
      }
    }
    DropStopped();
  }

  JobState s_;
  const absl::Time now_;
  const JobRules& rules_;
  std::vector<Action> actions_;
  absl::Time wake_ = absl::InfiniteFuture();
  std::optional<std::pair<int, std::string>> fixed_loss_;  // status, cause
  std::set<std::string> dropped_;                          // joiners stopped in this call
};

}  // namespace

Decision NextGeneration(JobState state, const Events& events, absl::Time now,
                        const JobRules& rules) {
  return Decider(std::move(state), now, rules).Run(events);
}

}  // namespace chorus::elastic
