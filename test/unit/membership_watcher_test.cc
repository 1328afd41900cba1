// runtime/elastic/membership_watcher.h against a real rendezvous server on 127.0.0.1: what a
// published generation does on a worker (interrupts, host updates, adopting a place), with the
// watcher's own thread polling as in a job.
#include "runtime/elastic/membership_watcher.h"

#include <stdlib.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

#include "launcher/engine/rendezvous_server.h"

namespace chorus {
namespace {

using runtime::MembershipWatcher;

// Long enough never to pass in a passing run: a missed wake-up fails instead of hanging.
const absl::Duration kLongWait = absl::Seconds(60);

struct Job {
  Job() {
    absl::StatusOr<std::string> s = launcher::GenerateRendezvousSecret();
    REQUIRE(s.ok());
    secret = *s;
    launcher::RendezvousServerOptions options;
    options.host = "127.0.0.1";
    options.secret = secret;
    auto started = launcher::RendezvousServer::Start(options);
    REQUIRE(started.ok());
    server = std::move(*started);
  }

  std::unique_ptr<MembershipWatcher> Worker(const std::string& id, int64_t generation) {
    auto client = runtime::RendezvousClient::Create(absl::StrCat("127.0.0.1:", server->port()),
                                                    secret, absl::Seconds(30), generation);
    REQUIRE(client.ok());
    return MembershipWatcher::Start(*std::move(client), id, generation);
  }

  void Publish(int64_t number, bool aborted, const std::string& worker, int rank) {
    chorus::rendezvous::Generation g;
    g.set_number(number);
    g.set_aborted(aborted);
    g.set_cause("rank 2 on hostB killed by SIGKILL");
    g.add_lost_ranks(2);
    g.set_hosts_added(!aborted);
    g.set_timestamp_us(1000 + number);
    auto* place = g.add_places();
    place->set_worker_id(worker);
    place->set_rank(rank);
    (*place->mutable_env())["CHORUS_TEST_WATCHER_RANK"] = absl::StrCat(rank);
    (*place->mutable_env())["CHORUS_TEST_WATCHER_GENERATION"] = absl::StrCat(number);
    REQUIRE(server->PublishGeneration(g).ok());
  }

  std::string secret;
  std::unique_ptr<launcher::RendezvousServer> server;
};

// Waits (bounded) until `done`.
template <typename F>
bool Eventually(F done) {
  const absl::Time deadline = absl::Now() + kLongWait;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

TEST_CASE("membership watcher: an aborted generation interrupts the worlds before it",
          "[elastic][watcher]") {
  Job job;
  job.Publish(0, false, "w0", 0);
  auto watcher = job.Worker("w0", 0);
  std::shared_ptr<const Interrupt> world0 = watcher->WorldInterrupt(0);
  REQUIRE(Eventually([&] { return watcher->latest() == 0; }));
  CHECK_FALSE(world0->raised());
  job.Publish(1, /*aborted=*/true, "w0", 0);
  REQUIRE(Eventually([&] { return world0->raised(); }));
  CHECK(world0->reason().code() == absl::StatusCode::kAborted);
  CHECK(world0->reason().message() ==
        "generation 1 aborted by chorusrun: rank 2 on hostB killed by SIGKILL (lost "
        "rank 2)");
  // A world of the aborted generation itself is not interrupted; one formed earlier is at once.
  CHECK_FALSE(watcher->WorldInterrupt(1)->raised());
  CHECK(watcher->WorldInterrupt(0)->raised());
  // An aborted generation is not a host update: it is acted on by the failure.
  CHECK(watcher->TakeHostUpdates().empty());
}

TEST_CASE("membership watcher: an abort published just before another change is not missed",
          "[elastic][watcher]") {
  // The server keeps only the newest generation. A worker of generation 0 whose first poll
  // comes after generations 1 (aborted) and 2 (hosts added) were published sees only 2; the
  // abort stamped into 2 must still fail its world of generation 0.
  Job job;
  job.Publish(0, false, "w0", 0);
  job.Publish(1, /*aborted=*/true, "w0", 0);
  job.Publish(2, /*aborted=*/false, "w0", 0);
  auto watcher = job.Worker("w0", 0);
  std::shared_ptr<const Interrupt> world0 = watcher->WorldInterrupt(0);
  REQUIRE(Eventually([&] { return watcher->latest() == 2; }));
  REQUIRE(Eventually([&] { return world0->raised(); }));
  CHECK(world0->reason().message() ==
        "generation 1 aborted by chorusrun: rank 2 on hostB killed by SIGKILL (lost "
        "rank 2)");
  // Worlds of the aborted generation and after it are not interrupted.
  CHECK_FALSE(watcher->WorldInterrupt(1)->raised());
  CHECK_FALSE(watcher->WorldInterrupt(2)->raised());
  // Generation 2 itself is a graceful change: a host update besides the abort.
  auto updates = watcher->TakeHostUpdates();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].generation == 2);
}

TEST_CASE("membership watcher: a graceful change is a host update, taken once",
          "[elastic][watcher]") {
  Job job;
  job.Publish(0, false, "w0", 0);
  auto watcher = job.Worker("w0", 0);
  auto world0 = watcher->WorldInterrupt(0);
  REQUIRE(Eventually([&] { return watcher->latest() == 0; }));
  CHECK(watcher->TakeHostUpdates().empty());  // its own generation is no update
  job.Publish(1, /*aborted=*/false, "w0", 0);
  REQUIRE(Eventually([&] { return watcher->latest() == 1; }));
  auto updates = watcher->TakeHostUpdates();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].generation == 1);
  CHECK(updates[0].timestamp_us == 1001);
  CHECK(updates[0].added);
  CHECK_FALSE(updates[0].removed);
  CHECK(watcher->TakeHostUpdates().empty());
  CHECK_FALSE(world0->raised());
}

TEST_CASE("membership watcher: Adopt takes this worker's variables, or says it was released",
          "[elastic][watcher]") {
  Job job;
  job.Publish(0, false, "w3", 1);
  auto watcher = job.Worker("w3", 0);
  CHECK(watcher->adopted() == 0);
  // Nothing newer yet: a bounded wait.
  CHECK(absl::IsDeadlineExceeded(watcher->Adopt(0, absl::Milliseconds(1)).status()));
  job.Publish(4, true, "w3", 0);
  auto vars = watcher->Adopt(0, kLongWait);
  REQUIRE(vars.ok());
  CHECK(watcher->adopted() == 4);
  CHECK(vars->at("CHORUS_TEST_WATCHER_RANK") == "0");
  CHECK(getenv("CHORUS_TEST_WATCHER_GENERATION") == nullptr);  // the environment is not written
  CHECK(watcher->adopted_variables() == *vars);
  job.Publish(5, false, "someone-else", 0);
  const absl::Status released = watcher->Adopt(4, kLongWait).status();
  CHECK(absl::IsNotFound(released));
  CHECK(std::string(released.message()).find("released") != std::string::npos);
}

TEST_CASE("membership watcher: its polls are heartbeats; a stopped watcher falls silent",
          "[elastic][watcher]") {
  Job job;
  job.Publish(0, false, "w0", 0);
  auto watcher = job.Worker("w0", 0);
  REQUIRE(Eventually([&] { return watcher->latest() == 0; }));
  CHECK(job.server->SilentWorkers(absl::Hours(1)).empty());  // tracked, not silent
  watcher.reset();
  REQUIRE(Eventually([&] { return !job.server->SilentWorkers(absl::Milliseconds(300)).empty(); }));
  CHECK(job.server->SilentWorkers(absl::Milliseconds(300)) == std::vector<std::string>{"w0"});
}

TEST_CASE("PerGenerationPath: later generations record beside generation 0's timeline",
          "[elastic][watcher]") {
  using runtime::PerGenerationPath;
  CHECK(PerGenerationPath("/tmp/t.json", 0) == "/tmp/t.json");
  CHECK(PerGenerationPath("/tmp/t.json", 3) == "/tmp/t.gen3.json");
  CHECK(PerGenerationPath("/tmp/t{rank}.json", 1) == "/tmp/t{rank}.gen1.json");
  CHECK(PerGenerationPath("/tmp/dir.d/timeline", 2) == "/tmp/dir.d/timeline.gen2");
  CHECK(PerGenerationPath("/tmp/.hidden", 2) == "/tmp/.hidden.gen2");
  CHECK(PerGenerationPath("DYNAMIC", 2) == "DYNAMIC");
  CHECK(PerGenerationPath("", 2).empty());
}

}  // namespace
}  // namespace chorus
