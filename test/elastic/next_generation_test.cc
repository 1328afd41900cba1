#include "elastic/next_generation.h"

#include <signal.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

namespace chorus::elastic {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

JobRules Elastic(int min_np, std::optional<int> max_np = std::nullopt) {
  JobRules r;
  r.limits.min_np = min_np;
  r.limits.max_np = max_np;
  r.elastic_timeout = absl::Seconds(10);
  return r;
}

JobRules Fixed(int np) {
  JobRules r;
  r.fixed = true;
  r.limits.min_np = np;
  r.limits.max_np = np;
  r.elastic_timeout = absl::InfiniteDuration();
  return r;
}

JobState NewState(std::optional<CooldownRange> cooldown = std::nullopt) {
  absl::StatusOr<Blacklist> b = Blacklist::Create({cooldown, 0.0}, [] { return 0.0; });
  REQUIRE(b.ok());
  return JobState(*std::move(b));
}

template <typename T>
std::vector<T> All(const Decision& d) {
  std::vector<T> out;
  for (const Action& a : d.actions) {
    if (const T* t = std::get_if<T>(&a)) out.push_back(*t);
  }
  return out;
}

template <typename T>
T One(const Decision& d) {
  std::vector<T> all = All<T>(d);
  REQUIRE(all.size() == 1);
  return all[0];
}

Events Discovered(HostSet hosts) {
  Events e;
  e.discovered = std::move(hosts);
  return e;
}

WorkerEnd Ended(const std::string& id, ExitKind kind, std::string how, int status) {
  return WorkerEnd{id, ExitVerdict{kind, std::move(how)}, status, false};
}

Events Ends(std::vector<WorkerEnd> ends) {
  Events e;
  e.ends = std::move(ends);
  return e;
}

Events Heard(std::vector<std::string> ids) {
  Events e;
  e.heard = std::move(ids);
  return e;
}

// The ids of a published generation's places, in rank order.
std::vector<std::string> PlaceIds(const PublishGeneration& g) {
  std::vector<std::string> ids;
  for (const auto& [id, place] : g.places) ids.push_back(id);
  return ids;
}

// The (host, rank) of each place.
std::vector<std::pair<std::string, int>> Places(const PublishGeneration& g) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& [id, place] : g.places) out.emplace_back(place.host, place.rank);
  return out;
}

std::string Describe(const Events& e) {
  std::string out;
  if (e.discovered) {
    absl::StrAppend(&out, "discovered{");
    for (const auto& [h, n] : *e.discovered) absl::StrAppend(&out, h, ":", n, " ");
    absl::StrAppend(&out, "} ");
  }
  for (const WorkerEnd& end : e.ends) {
    absl::StrAppend(&out, "end ", end.id, " kind ", static_cast<int>(end.verdict.kind), " ");
  }
  for (const std::string& id : e.silent) absl::StrAppend(&out, "silent ", id, " ");
  for (const std::string& id : e.heard) absl::StrAppend(&out, "heard ", id, " ");
  if (e.signal) absl::StrAppend(&out, "signal ", *e.signal);
  return out.empty() ? "(nothing)" : out;
}

std::string Describe(const Action& a) {
  if (const auto* g = std::get_if<PublishGeneration>(&a)) {
    std::string out = absl::StrCat("publish ", g->number, g->aborted ? " aborted" : "",
                                   g->hold ? " hold" : "", " [");
    for (const auto& [id, p] : g->places) absl::StrAppend(&out, id, "@", p.host, " ");
    return absl::StrCat(out, "] ", g->cause);
  }
  if (const auto* s = std::get_if<StartWorker>(&a)) {
    return absl::StrCat("start ", s->worker.id, " on ", s->worker.host, ":", s->worker.slot,
                        s->worker.place ? " placed" : " joining");
  }
  if (const auto* s = std::get_if<StopWorker>(&a)) return absl::StrCat("stop ", s->id);
  if (const auto* l = std::get_if<LogLine>(&a)) return l->line;
  const auto& end = std::get<EndJob>(a);
  return absl::StrCat("end ", end.status, " ", end.line);
}

// A decision with no events at the same time changes nothing: the engine can sleep until wake.
void CheckQuiet(const Decision& d, absl::Time now, const JobRules& rules) {
  Decision again = NextGeneration(d.state, Events(), now, rules);
  std::string actions;
  for (const Action& a : again.actions) absl::StrAppend(&actions, "\n  -> ", Describe(a));
  INFO("phase " << static_cast<int>(d.state.phase) << ", quiet call:" << actions);
  CHECK(again.actions.empty());
  CHECK(again.wake > now);
  CHECK(again.state.generation == d.state.generation);
  CHECK(again.state.workers == d.state.workers);
}

// Starts an elastic job on `hosts`; returns the state after generation 0.
Decision Start(const JobRules& rules, HostSet hosts) {
  Decision d = NextGeneration(NewState(), Discovered(std::move(hosts)), kT0, rules);
  REQUIRE(d.state.generation == 0);
  return d;
}

TEST_CASE("Nothing starts before the first discovery answer", "[elastic][next_generation]") {
  const JobRules rules = Elastic(2);
  Decision d = NextGeneration(NewState(), Events(), kT0, rules);
  CHECK(d.actions.empty());
  CHECK(d.wake == absl::InfiniteFuture());
  CHECK(d.state.phase == JobState::Phase::kStarting);
}

TEST_CASE("Generation 0 places a worker on every slot, ranks in host order",
          "[elastic][next_generation]") {
  const JobRules rules = Elastic(2);
  Decision d = NextGeneration(NewState(), Discovered({{"b", 2}, {"a", 1}}), kT0, rules);
  const PublishGeneration g = One<PublishGeneration>(d);
  CHECK(g.number == 0);
  CHECK_FALSE(g.aborted);
  CHECK(g.line.empty());
  // New hosts are ordered by name.
  CHECK(Places(g) == std::vector<std::pair<std::string, int>>{{"a", 0}, {"b", 1}, {"b", 2}});
  const std::vector<StartWorker> started = All<StartWorker>(d);
  REQUIRE(started.size() == 3);
  for (const StartWorker& s : started) {
    CHECK(s.generation == 0);
    REQUIRE(s.worker.place);
    CHECK(s.worker.place->size == 3);
  }
  CHECK(started[1].worker.place->local_rank == 0);
  CHECK(started[2].worker.place->local_rank == 1);
  CHECK(d.state.phase == JobState::Phase::kRunning);
  CheckQuiet(d, kT0, rules);
}

TEST_CASE("An elastic job that starts below -np says so", "[elastic][next_generation]") {
  JobRules rules = Elastic(2, 6);
  rules.num_proc = 4;
  Decision d = NextGeneration(NewState(), Discovered({{"a", 2}}), kT0, rules);
  CHECK(One<PublishGeneration>(d).places.size() == 2);
  CHECK(One<LogLine>(d).line ==
        "chorusrun: the elastic job starts with 2 workers, fewer than -np 4: 2 usable slots "
        "found (--min-np=2); workers join as slots appear, up to --max-np=6");
  // At -np or above: nothing to say.
  d = NextGeneration(NewState(), Discovered({{"a", 4}}), kT0, rules);
  CHECK(All<LogLine>(d).empty());
}

TEST_CASE("Too few slots at the start: wait up to the elastic timeout, then fail",
          "[elastic][next_generation]") {
  const JobRules rules = Elastic(3);
  Decision d = NextGeneration(NewState(), Discovered({{"a", 2}}), kT0, rules);
  CHECK(d.actions.empty());
  CHECK(d.wake > kT0 + rules.elastic_timeout);
  CHECK(d.wake < kT0 + rules.elastic_timeout + absl::Seconds(1));
  CheckQuiet(d, kT0 + absl::Seconds(5), rules);
  // A discovery answer meanwhile does not restart the clock.
  d = NextGeneration(d.state, Discovered({{"a", 2}}), kT0 + absl::Seconds(9), rules);
  CHECK(d.actions.empty());
  d = NextGeneration(d.state, Events(), d.wake, rules);
  const EndJob end = One<EndJob>(d);
  CHECK(end.status == 1);
  CHECK(end.line ==
        "chorusrun: elastic job failed: fewer than --min-np=3 slots for longer than "
        "--elastic-timeout=10 s (2 available)");
  CHECK(d.state.phase == JobState::Phase::kEnded);
  CheckQuiet(d, d.wake == absl::InfiniteFuture() ? kT0 + absl::Hours(1) : d.wake, rules);
}

TEST_CASE("A failed worker: survivors go on at once, a joiner refills the slot later",
          "[elastic][next_generation]") {
  const JobRules rules = Elastic(1);
  Decision d = Start(rules, {{"a", 1}, {"b", 2}});
  // a: w0 rank 0; b: w1 rank 1, w2 rank 2. w2 fails: b is blacklisted, so no joiner on b.
  const absl::Time t1 = kT0 + absl::Seconds(1);
  d = NextGeneration(d.state, Ends({Ended("w2", ExitKind::kFailed, "exited with code 3", 3)}), t1,
                     rules);
  PublishGeneration g = One<PublishGeneration>(d);
  CHECK(g.number == 1);
  CHECK(g.aborted);
  CHECK_FALSE(g.hold);
  CHECK(g.lost_ranks == std::vector<int>{2});
  CHECK(PlaceIds(g) == std::vector<std::string>{"w0"});  // w1 was on b: released
  CHECK(g.cause == "rank 2 on b exited with code 3; b blacklisted");
  CHECK(g.line ==
        "chorusrun: generation 1: -b (rank 2 exited with code 3, blacklisted), "
        "size 3 -> 1, cause: rank 2 on b exited with code 3; b blacklisted");
  CHECK(All<StartWorker>(d).empty());
  CHECK(d.state.resets == 1);
  CheckQuiet(d, t1, rules);
}

TEST_CASE("A worker that leaves after SIGTERM is replaced by a joiner once it is ready",
          "[elastic][next_generation]") {
  const JobRules rules = Elastic(1);
  Decision d = Start(rules, {{"a", 2}});
  const absl::Time t1 = kT0 + absl::Seconds(1);
  d = NextGeneration(d.state, Ends({Ended("w1", ExitKind::kLeft, "left after SIGTERM", 143)}), t1,
                     rules);
  const PublishGeneration shrink = One<PublishGeneration>(d);
  CHECK(shrink.aborted);
  CHECK(PlaceIds(shrink) == std::vector<std::string>{"w0"});
  CHECK(shrink.line ==
        "chorusrun: generation 1: a (rank 1 left after SIGTERM), size 2 -> 1, cause: rank 1 "
        "on a left after SIGTERM");
  // Not blacklisted: a joiner starts in the freed slot, without a place.
  const StartWorker joiner = One<StartWorker>(d);
  CHECK(joiner.worker.id == "w2");
  CHECK(joiner.worker.host == "a");
  CHECK(joiner.worker.slot == 1);
  CHECK_FALSE(joiner.worker.place);
  CheckQuiet(d, t1 + absl::Seconds(5), rules);
  // It joins once heard from.
  const absl::Time t2 = t1 + absl::Seconds(3);
  d = NextGeneration(d.state, Heard({"w2"}), t2, rules);
  const PublishGeneration grow = One<PublishGeneration>(d);
  CHECK(grow.number == 2);
  CHECK_FALSE(grow.aborted);
  CHECK(grow.hosts_added);
  CHECK(PlaceIds(grow) == std::vector<std::string>{"w0", "w2"});
  CHECK(grow.cause == "joined: rank 1 on a");
  CHECK(d.state.resets == 2);  // down, then up: each generation after the first is a reset
  CheckQuiet(d, t2, rules);
}

TEST_CASE("Joiners ready within the join window join together", "[elastic][next_generation]") {
  const JobRules rules = Elastic(1);
  Decision d = Start(rules, {{"a", 1}});
  d = NextGeneration(d.state, Discovered({{"a", 1}, {"b", 2}}), kT0 + absl::Seconds(1), rules);
  CHECK(All<PublishGeneration>(d).empty());  // hosts added: joiners first
  CHECK(All<StartWorker>(d).size() == 2);
  CHECK(d.state.resets == 0);  // nothing published yet
  const absl::Time t2 = kT0 + absl::Seconds(2);
  d = NextGeneration(d.state, Heard({"w1"}), t2, rules);
  CHECK(d.actions.empty());
  CHECK(d.wake == t2 + rules.join_window);
  CheckQuiet(d, t2, rules);
  d = NextGeneration(d.state, Heard({"w2"}), t2 + absl::Milliseconds(300), rules);
  const PublishGeneration g = One<PublishGeneration>(d);
  CHECK(PlaceIds(g) == std::vector<std::string>{"w0", "w1", "w2"});
  CHECK(g.cause == "hosts changed: added [b]; joined: rank 1 on b, rank 2 on b");
  CHECK(g.line.find("+b") != std::string::npos);
}

TEST_CASE("A joiner that is late past the join window joins in a later generation",
          "[elastic][next_generation]") {
  const JobRules rules = Elastic(1);
  Decision d = Start(rules, {{"a", 1}});
  d = NextGeneration(d.state, Discovered({{"a", 1}, {"b", 2}}), kT0 + absl::Seconds(1), rules);
  const absl::Time t2 = kT0 + absl::Seconds(2);
  d = NextGeneration(d.state, Heard({"w1"}), t2, rules);
  d = NextGeneration(d.state, Events(), d.wake, rules);
  CHECK(PlaceIds(One<PublishGeneration>(d)) == std::vector<std::string>{"w0", "w1"});
  d = NextGeneration(d.state, Heard({"w2"}), t2 + absl::Seconds(5), rules);
  CHECK(PlaceIds(One<PublishGeneration>(d)) == std::vector<std::string>{"w0", "w1", "w2"});
}

TEST_CASE("Below --min-np after a failure: survivors held, then the job fails at the timeout",
          "[elastic][next_generation]") {
  // The repro: localhost:2 + 127.0.0.1:1, -np 3 --min-np 2 --max-np 3; rank 2 on localhost
  // fails, localhost is blacklisted, one slot is left.
  const JobRules rules = Elastic(2, 3);
  Decision d = Start(rules, {{"localhost", 2}, {"127.0.0.1", 1}});
  const absl::Time t1 = kT0 + absl::Seconds(1);
  d = NextGeneration(d.state, Ends({Ended("w2", ExitKind::kFailed, "killed by SIGKILL", 137)}), t1,
                     rules);
  const PublishGeneration g = One<PublishGeneration>(d);
  CHECK(g.hold);
  CHECK(g.aborted);
  CHECK(PlaceIds(g) == std::vector<std::string>{"w0"});
  CHECK(g.line.find("on hold: fewer than --min-np=2 workers, waiting up to "
                    "--elastic-timeout=10 s for more") != std::string::npos);
  CHECK(d.state.phase == JobState::Phase::kHolding);
  CHECK(d.wake > t1 + rules.elastic_timeout);
  // Every waiting moment is quiet: the engine sleeps until the deadline.
  for (int s = 0; s < 10; ++s) CheckQuiet(d, t1 + absl::Seconds(s), rules);
  d = NextGeneration(d.state, Events(), d.wake, rules);
  const EndJob end = One<EndJob>(d);
  CHECK(end.status == 1);
  CHECK(end.line ==
        "chorusrun: elastic job failed: fewer than --min-np=2 slots for longer than "
        "--elastic-timeout=10 s (1 available after generation 1)");
}

TEST_CASE("Held survivors go on when a joiner brings the world back to --min-np",
          "[elastic][next_generation]") {
  const JobRules rules = Elastic(2);
  Decision d = Start(rules, {{"a", 2}});
  const absl::Time t1 = kT0 + absl::Seconds(1);
  d = NextGeneration(d.state, Ends({Ended("w1", ExitKind::kLeft, "left after SIGTERM", 143)}), t1,
                     rules);
  CHECK(One<PublishGeneration>(d).hold);
  CHECK(One<StartWorker>(d).worker.id == "w2");
  CHECK_FALSE(d.state.short_since);  // enough slots: only the joiner's start-up is awaited
  d = NextGeneration(d.state, Heard({"w2"}), t1 + absl::Seconds(2), rules);
  const PublishGeneration g = One<PublishGeneration>(d);
  CHECK_FALSE(g.hold);
  CHECK(PlaceIds(g) == std::vector<std::string>{"w0", "w2"});
  CHECK(d.state.phase == JobState::Phase::kRunning);
}

TEST_CASE("No survivor left: the next generation starts afresh", "[elastic][next_generation]") {
  const JobRules rules = Elastic(1);
  Decision d = Start(rules, {{"a", 1}});
  d = NextGeneration(d.state, Ends({Ended("w0", ExitKind::kLeft, "left after SIGTERM", 143)}),
                     kT0 + absl::Seconds(1), rules);
  const PublishGeneration g = One<PublishGeneration>(d);
  CHECK(g.number == 1);
  CHECK(PlaceIds(g) == std::vector<std::string>{"w1"});
  const StartWorker s = One<StartWorker>(d);
  CHECK(s.worker.place);
  CHECK(s.generation == 1);
}

TEST_CASE("A worker that exits 0 ends the job after the grace period",
          "[elastic][next_generation]") {
  const JobRules rules = Elastic(1);
  Decision d = Start(rules, {{"a", 3}});
  const absl::Time t1 = kT0 + absl::Seconds(1);
  d = NextGeneration(d.state, Ends({Ended("w0", ExitKind::kSucceeded, "exited with code 0", 0)}),
                     t1, rules);
  CHECK(d.actions.empty());
  CHECK(d.wake == t1 + rules.finish_grace);
  CheckQuiet(d, t1, rules);
  // Ends meanwhile are consequences, not causes.
  d = NextGeneration(d.state, Ends({Ended("w1", ExitKind::kFailed, "exited with code 1", 1)}),
                     t1 + absl::Seconds(1), rules);
  CHECK(d.actions.empty());
  d = NextGeneration(d.state, Events(), d.wake, rules);
  const EndJob end = One<EndJob>(d);
  CHECK(end.status == 0);
  CHECK(end.line.empty());
}

TEST_CASE("A host gone from discovery releases its workers, stopped after the grace period",
          "[elastic][next_generation]") {
  const JobRules rules = Elastic(1);
  Decision d = Start(rules, {{"a", 1}, {"b", 1}});
  const absl::Time t1 = kT0 + absl::Seconds(1);
  d = NextGeneration(d.state, Discovered({{"a", 1}}), t1, rules);
  const PublishGeneration g = One<PublishGeneration>(d);
  CHECK_FALSE(g.aborted);
  CHECK(g.hosts_removed);
  CHECK(PlaceIds(g) == std::vector<std::string>{"w0"});
  CHECK(g.line ==
        "chorusrun: generation 1: -b (gone from discovery), size 2 -> 1, cause: hosts changed: "
        "removed [b]");
  CHECK(d.wake == t1 + rules.release_grace);
  CheckQuiet(d, t1 + absl::Seconds(30), rules);
  d = NextGeneration(d.state, Events(), d.wake, rules);
  const StopWorker stop = One<StopWorker>(d);
  CHECK(stop.id == "w1");
  CHECK(stop.signal == SIGTERM);
  CheckQuiet(d, d.wake == absl::InfiniteFuture() ? t1 + absl::Hours(1) : d.wake, rules);
  // Its end is not an event of the job.
  d = NextGeneration(d.state, Ends({Ended("w1", ExitKind::kLeft, "left after SIGTERM", 143)}),
                     t1 + absl::Seconds(61), rules);
  CHECK(d.actions.empty());
}

TEST_CASE("The reset past --reset-limit ends the job", "[elastic][next_generation]") {
  JobRules rules = Elastic(1);
  rules.reset_limit = 1;
  Decision d = Start(rules, {{"a", 1}});
  d = NextGeneration(d.state, Ends({Ended("w0", ExitKind::kLeft, "left after SIGTERM", 143)}),
                     kT0 + absl::Seconds(1), rules);
  CHECK(d.state.generation == 1);
  d = NextGeneration(d.state, Ends({Ended("w1", ExitKind::kLeft, "left after SIGTERM", 143)}),
                     kT0 + absl::Seconds(2), rules);
  const EndJob end = One<EndJob>(d);
  CHECK(end.status == 1);
  CHECK(end.line ==
        "chorusrun: elastic job failed: reset limit 1 reached (--reset-limit); the next reset "
        "was due to: rank 0 on a left after SIGTERM");
}

TEST_CASE("Every host blacklisted ends the job", "[elastic][next_generation]") {
  const JobRules rules = Elastic(1);
  Decision d = Start(rules, {{"a", 1}, {"b", 1}});
  d = NextGeneration(d.state,
                     Ends({Ended("w0", ExitKind::kFailed, "exited with code 4", 4),
                           Ended("w1", ExitKind::kFailed, "exited with code 4", 4)}),
                     kT0 + absl::Seconds(1), rules);
  CHECK(One<EndJob>(d).line ==
        "chorusrun: elastic job failed: every host is blacklisted (a, b) after its workers "
        "failed; no worker is left");
}

TEST_CASE("A silent worker is killed and counts as failed", "[elastic][next_generation]") {
  const JobRules rules = Elastic(1);
  Decision d = Start(rules, {{"a", 1}, {"b", 1}});
  Events e;
  e.silent = {"w1"};
  d = NextGeneration(d.state, e, kT0 + absl::Seconds(6), rules);
  const StopWorker stop = One<StopWorker>(d);
  CHECK(stop.id == "w1");
  CHECK(stop.signal == SIGKILL);
  const PublishGeneration g = One<PublishGeneration>(d);
  CHECK(g.aborted);
  CHECK(g.cause ==
        "rank 1 on b silent for 5s (no heartbeat: hung, stopped or cut off), killed; b "
        "blacklisted");
}

TEST_CASE("A joiner never ready within the elastic timeout is stopped",
          "[elastic][next_generation]") {
  const JobRules rules = Elastic(1);
  Decision d = Start(rules, {{"a", 1}});
  d = NextGeneration(d.state, Discovered({{"a", 2}}), kT0 + absl::Seconds(1), rules);
  CHECK(One<StartWorker>(d).worker.id == "w1");
  CHECK(d.wake == kT0 + absl::Seconds(1) + rules.elastic_timeout);
  // It is stopped; its slot gets another joiner at once.
  d = NextGeneration(d.state, Events(), d.wake, rules);
  CHECK(One<StopWorker>(d).id == "w1");
  CHECK(One<StartWorker>(d).worker.id == "w2");
}

TEST_CASE("--max-np caps the world", "[elastic][next_generation]") {
  const JobRules rules = Elastic(1, 3);
  Decision d = NextGeneration(NewState(), Discovered({{"a", 2}, {"b", 2}}), kT0, rules);
  CHECK(One<PublishGeneration>(d).places.size() == 3);
}

TEST_CASE("A signal ends the job in every phase", "[elastic][next_generation]") {
  const JobRules rules = Elastic(2);
  Events sigint;
  sigint.signal = SIGINT;
  std::vector<JobState> states;
  states.push_back(NewState());                      // starting
  states.push_back(Start(rules, {{"a", 2}}).state);  // running
  Decision held = NextGeneration(Start(rules, {{"a", 2}}).state,
                                 Ends({Ended("w1", ExitKind::kLeft, "left after SIGTERM", 143)}),
                                 kT0 + absl::Seconds(1), rules);
  states.push_back(held.state);  // holding
  CHECK(states.back().phase == JobState::Phase::kHolding);
  for (const JobState& s : states) {
    Decision d = NextGeneration(s, sigint, kT0 + absl::Seconds(2), rules);
    const EndJob end = One<EndJob>(d);
    CHECK(end.status == 130);
    CHECK(end.signal == SIGINT);
    CHECK(end.line == "chorusrun: job stopped: chorusrun received signal 2 (Interrupt)");
  }
}

TEST_CASE("A fixed-size job ends with the first lost worker's status",
          "[elastic][next_generation]") {
  const JobRules rules = Fixed(3);
  Decision d = NextGeneration(NewState(), Discovered({{"a", 2}, {"b", 1}}), kT0, rules);
  CHECK(One<PublishGeneration>(d).places.size() == 3);
  CheckQuiet(d, kT0, rules);
  d = NextGeneration(d.state,
                     Ends({Ended("w0", ExitKind::kSucceeded, "exited with code 0", 0),
                           Ended("w2", ExitKind::kFailed, "exited with code 3", 3),
                           Ended("w1", ExitKind::kFailed, "killed by SIGTERM", 143)}),
                     kT0 + absl::Seconds(1), rules);
  const PublishGeneration abort = One<PublishGeneration>(d);
  CHECK(abort.aborted);
  CHECK(abort.cause == "rank 2 on b exited with code 3");
  const EndJob end = One<EndJob>(d);
  CHECK(end.status == 3);
  CHECK(end.line == "chorusrun: job failed: rank 2 on b exited with code 3");
}

TEST_CASE("A fixed-size job names the rank that reported an exception, not the first to exit",
          "[elastic][next_generation]") {
  const JobRules rules = Fixed(3);
  Decision d = NextGeneration(NewState(), Discovered({{"a", 2}, {"b", 1}}), kT0, rules);
  CHECK(One<PublishGeneration>(d).places.size() == 3);
  // Rank 2 (on b) reports its exception; nothing ends yet: the job goes on.
  Events report;
  report.failure_reports = {{2, "ValueError: bad batch"}};
  d = NextGeneration(d.state, report, kT0 + absl::Seconds(1), rules);
  CHECK(d.actions.empty());
  SECTION("a rank that failed because of it exits first") {
    d = NextGeneration(d.state, Ends({Ended("w0", ExitKind::kFailed, "exited with code 1", 1)}),
                       kT0 + absl::Seconds(2), rules);
  }
  SECTION("the reporting rank exits first") {
    d = NextGeneration(d.state, Ends({Ended("w2", ExitKind::kFailed, "exited with code 1", 1)}),
                       kT0 + absl::Seconds(2), rules);
  }
  CHECK(One<PublishGeneration>(d).cause == "rank 2 on b raised ValueError: bad batch");
  const EndJob end = One<EndJob>(d);
  CHECK(end.status == 1);
  CHECK(end.line == "chorusrun: job failed: rank 2 on b raised ValueError: bad batch");
}

TEST_CASE("A fixed-size job: the first report wins", "[elastic][next_generation]") {
  const JobRules rules = Fixed(2);
  Decision d = NextGeneration(NewState(), Discovered({{"a", 2}}), kT0, rules);
  Events reports;
  reports.failure_reports = {{1, "KeyError: 'x'"}, {0, "RuntimeError: later"}};
  d = NextGeneration(d.state, reports, kT0 + absl::Seconds(1), rules);
  Events more;
  more.failure_reports = {{0, "RuntimeError: even later"}};
  more.ends = {Ended("w0", ExitKind::kFailed, "exited with code 1", 1)};
  d = NextGeneration(d.state, more, kT0 + absl::Seconds(2), rules);
  CHECK(One<EndJob>(d).line == "chorusrun: job failed: rank 1 on a raised KeyError: 'x'");
}

TEST_CASE("A fixed-size job ends with 0 once every worker exited 0", "[elastic][next_generation]") {
  const JobRules rules = Fixed(2);
  Decision d = NextGeneration(NewState(), Discovered({{"a", 2}}), kT0, rules);
  d = NextGeneration(d.state, Ends({Ended("w1", ExitKind::kSucceeded, "exited with code 0", 0)}),
                     kT0 + absl::Seconds(1), rules);
  CHECK(d.actions.empty());
  CHECK(d.wake == absl::InfiniteFuture());
  d = NextGeneration(d.state, Ends({Ended("w0", ExitKind::kSucceeded, "exited with code 0", 0)}),
                     kT0 + absl::Seconds(9), rules);
  CHECK(One<EndJob>(d).status == 0);
}

TEST_CASE("A fixed-size job whose host ssh cannot reach ends before it starts",
          "[elastic][next_generation]") {
  const JobRules rules = Fixed(2);
  Events e;
  e.unreachable = {{"b", "cannot reach host b over ssh (ssh b true): Connection refused"}};
  Decision d = NextGeneration(NewState(), e, kT0, rules);
  const EndJob end = One<EndJob>(d);
  CHECK(end.status == 1);
  CHECK(end.line ==
        "chorusrun: error: cannot reach host b over ssh (ssh b true): Connection refused");
  CHECK(All<StartWorker>(d).empty());
}

// Drives the policy with random events from a seed and checks, after every decision, what must
// hold whatever happens: no busy wait, contiguous ranks on distinct slots, generations numbered
// one by one, worker ids never reused, the world within --max-np, one end at most, and a
// bounded wait below --min-np.
TEST_CASE("Random event schedules keep the invariants", "[elastic][next_generation]") {
  const std::vector<std::string> host_names = {"a", "b", "c", "d"};
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    auto pick = [&rng](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    const bool fixed = pick(5) == 0;
    const int min_np = 1 + pick(3);
    JobRules rules =
        fixed ? Fixed(min_np) : Elastic(min_np, pick(2) ? std::optional<int>() : min_np + pick(3));
    if (!fixed && pick(3) == 0) rules.reset_limit = pick(4);
    rules.blacklist_cooldown = !fixed && pick(3) == 0;
    JobState state =
        NewState(rules.blacklist_cooldown
                     ? std::optional<CooldownRange>({absl::Seconds(2), absl::Seconds(8)})
                     : std::nullopt);
    auto random_hosts = [&] {
      HostSet hosts;
      for (const std::string& h : host_names) {
        if (pick(3) != 0) hosts[h] = 1 + pick(2);
      }
      if (fixed) hosts = {{"a", min_np}};
      return hosts;
    };
    absl::Time now = kT0;
    absl::Time wake = absl::InfiniteFuture();
    int generation = -1;
    int ends = 0;
    std::set<std::string> started;
    std::optional<absl::Time> short_since;
    std::vector<std::pair<std::string, RankPlacement>> last_places;
    std::string trace;  // the schedule so far, for a failure's message
    for (int step = 0; step < 60; ++step) {
      Events e;
      const int kind = pick(8);
      if (step == 0 || kind == 0) {
        e.discovered = random_hosts();
      } else if (kind <= 3 && !state.workers.empty()) {
        const Worker& w = state.workers[static_cast<size_t>(pick(int(state.workers.size())))];
        const ExitKind k = static_cast<ExitKind>(pick(3));
        e.ends.push_back(Ended(w.id, k, "how", k == ExitKind::kSucceeded ? 0 : 1));
      } else if (kind == 4 && !state.workers.empty()) {
        e.silent.push_back(state.workers[static_cast<size_t>(pick(int(state.workers.size())))].id);
      } else if (kind == 5) {
        for (const Worker& w : state.workers) {
          if (!w.place && pick(2)) e.heard.push_back(w.id);
        }
      } else if (kind == 6 && pick(10) == 0) {
        e.signal = SIGTERM;
      }
      // Time moves on: a little, or to the requested wake-up.
      now = (wake != absl::InfiniteFuture() && pick(2)) ? std::max(now, wake)
                                                        : now + absl::Milliseconds(pick(3000));
      absl::StrAppend(&trace, "\n", absl::FormatTime("%M:%E3S", now, absl::UTCTimeZone()), " ",
                      Describe(e));
      Decision d = NextGeneration(std::move(state), e, now, rules);
      for (const Action& a : d.actions) absl::StrAppend(&trace, "\n  -> ", Describe(a));
      INFO(trace);
      for (const Action& a : d.actions) {
        if (const auto* g = std::get_if<PublishGeneration>(&a)) {
          CHECK(g->number == generation + 1);
          generation = g->number;
          if (!g->places.empty() || !fixed) last_places = g->places;
          for (size_t r = 0; r < g->places.size(); ++r) {
            CHECK(g->places[r].second.rank == static_cast<int>(r));
            CHECK(g->places[r].second.size == static_cast<int>(g->places.size()));
          }
          if (rules.limits.max_np) CHECK(g->places.size() <= size_t(*rules.limits.max_np));
        } else if (const auto* s = std::get_if<StartWorker>(&a)) {
          CHECK(started.insert(s->worker.id).second);
        } else if (std::holds_alternative<EndJob>(a)) {
          ++ends;
        }
      }
      CHECK(ends <= 1);
      state = std::move(d.state);
      wake = d.wake;
      if (state.phase == JobState::Phase::kEnded) break;
      CheckQuiet(Decision{state, {}, wake}, now, rules);
      // Workers on distinct (host, slot); while a world runs or is held, the placed workers are
      // exactly the last published generation's places.
      std::set<std::pair<std::string, int>> slots;
      std::vector<std::pair<std::string, RankPlacement>> placed;
      for (const Worker& w : state.workers) {
        CHECK(slots.insert({w.host, w.slot}).second);
        if (w.place && !w.released) placed.emplace_back(w.id, *w.place);
      }
      if (!fixed &&
          (state.phase == JobState::Phase::kRunning || state.phase == JobState::Phase::kHolding)) {
        CHECK(placed == last_places);
      }
      // Below --min-np the wait is bounded by the elastic timeout.
      if (state.short_since) {
        if (!short_since) short_since = state.short_since;
        CHECK(wake <= *state.short_since + rules.elastic_timeout + absl::Milliseconds(1));
      } else {
        short_since.reset();
      }
    }
  }
}

}  // namespace
}  // namespace chorus::elastic
