// Host discovery running real scripts (/bin/sh) written to a temporary directory. Every run is
// bounded by its timeout; no assertion depends on how fast the machine is.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "launcher/engine/discovery_runner.h"
#include "test/support/catch_session.h"

namespace chorus::launcher {
namespace {

using elastic::DiscoveryJudge;
using elastic::DiscoveryOptions;
using elastic::HostSet;
using elastic::InterpretScriptRun;
using elastic::ScriptRun;

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "chorus_elastic_XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

  // Writes an executable script `name` (atomically: a new file renamed over the old one).
  std::string WriteScript(const std::string& name, const std::string& body) const {
    const fs::path target = path_ / name;
    const fs::path staged = path_ / (name + ".new");
    {
      std::ofstream out(staged);
      out << "#!/bin/sh\n" << body << "\n";
      REQUIRE(out.good());
    }
    fs::permissions(staged, fs::perms::owner_all);
    fs::rename(staged, target);
    return target.string();
  }

  std::optional<int> ReadPid(const std::string& name) const {
    std::ifstream in(path_ / name);
    int pid = 0;
    if (in >> pid && pid > 0) return pid;
    return std::nullopt;
  }

 private:
  fs::path path_;
};

// True once `pid` is gone or a zombie (killed, not yet reaped by whoever adopted it). Polls up
// to `limit`: a bound on the wait, not on the speed of the kill.
bool EventuallyDead(int pid, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (true) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z') {
      return true;
    }
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

DiscoveryOptions Options(const std::string& script, absl::Duration timeout = absl::Seconds(30)) {
  DiscoveryOptions o;
  o.script = script;
  o.default_slots = 2;
  o.timeout = timeout;
  o.grace = absl::Milliseconds(200);
  return o;
}

const Environment kEnv = {{"PATH", "/usr/bin:/bin"}, {"LC_ALL", "C"}};

absl::StatusOr<HostSet> DiscoverOnce(const DiscoveryOptions& o) {
  absl::StatusOr<ScriptRun> run = RunDiscoveryScript(o, kEnv);
  if (!run.ok()) return run.status();
  return InterpretScriptRun(o, *run);
}

std::string Quoted(const fs::path& p) { return "'" + p.string() + "'"; }

TEST_CASE("discovery script: a good script", "[elastic][discovery][subprocess]") {
  TempDir dir;
  const std::string script =
      dir.WriteScript("good.sh", "printf 'b:4\\n\\n  a  \\nc:1\\nb:3\\n'\necho done >&2");
  absl::StatusOr<HostSet> hosts = DiscoverOnce(Options(script));
  REQUIRE(hosts.ok());
  CHECK(*hosts == HostSet{{"a", 2}, {"b", 4}, {"c", 1}});
  // A command with arguments works too (it runs under /bin/sh -c).
  absl::StatusOr<HostSet> inline_command = DiscoverOnce(Options("echo x:3; echo y"));
  REQUIRE(inline_command.ok());
  CHECK(*inline_command == HostSet{{"x", 3}, {"y", 2}});
}

TEST_CASE("discovery script: garbage output", "[elastic][discovery][subprocess]") {
  TempDir dir;
  const std::string script = dir.WriteScript("garbage.sh", "echo a:1\necho 'hello world'");
  absl::StatusOr<HostSet> hosts = DiscoverOnce(Options(script));
  REQUIRE_FALSE(hosts.ok());
  CHECK(hosts.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(hosts.status().message()),
             Catch::Contains("printed line 2: malformed host 'hello world'"));
}

TEST_CASE("discovery script: exit 3", "[elastic][discovery][subprocess]") {
  TempDir dir;
  const std::string script =
      dir.WriteScript("exit3.sh", "echo a:1\necho 'cannot reach the scheduler' >&2\nexit 3");
  absl::StatusOr<HostSet> hosts = DiscoverOnce(Options(script));
  REQUIRE_FALSE(hosts.ok());
  CHECK(hosts.status().code() == absl::StatusCode::kUnavailable);
  CHECK(std::string(hosts.status().message()) ==
        "host discovery script '" + script +
            "' exited with code 3; its last stderr line: 'cannot reach the scheduler'");
}

TEST_CASE("discovery script: a missing script", "[elastic][discovery][subprocess]") {
  TempDir dir;
  const std::string script = (dir.path() / "missing.sh").string();
  absl::StatusOr<HostSet> hosts = DiscoverOnce(Options(script));
  REQUIRE_FALSE(hosts.ok());
  CHECK(hosts.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(hosts.status().message()), Catch::Contains("exited with code 127"));
}

TEST_CASE("discovery script: a hang is killed at the timeout", "[elastic][discovery][subprocess]") {
  TempDir dir;
  const std::string script =
      dir.WriteScript("hang.sh", "echo $$ > " + Quoted(dir.path() / "sh.pid") +
                                     "\necho a:1\nsleep 60 & echo $! > " +
                                     Quoted(dir.path() / "sleep.pid") + "\nwait");
  absl::StatusOr<ScriptRun> run =
      RunDiscoveryScript(Options(script, absl::Milliseconds(500)), kEnv);
  REQUIRE(run.ok());
  CHECK(run->timed_out);
  absl::StatusOr<HostSet> hosts =
      InterpretScriptRun(Options(script, absl::Milliseconds(500)), *run);
  REQUIRE_FALSE(hosts.ok());
  CHECK(hosts.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(std::string(hosts.status().message()) ==
        "host discovery script '" + script +
            "' did not finish within the timeout of 500ms; its process group was killed");
  // The script and its child are gone (a very slow start may not have written the pids yet).
  for (const char* name : {"sh.pid", "sleep.pid"}) {
    if (std::optional<int> pid = dir.ReadPid(name)) {
      INFO(name << " " << *pid);
      CHECK(EventuallyDead(*pid));
    } else {
      chorus::testing::SkipCase(absl::StrCat(
          "the script had not written ", name,
          " when it was killed (a start slower than its timeout): its end was not checked"));
      return;
    }
  }
}

TEST_CASE("discovery script: SIGTERM ignored, SIGKILL after the grace period",
          "[elastic][discovery][subprocess]") {
  TempDir dir;
  const std::string ignore_term = "trap '' TERM\nsleep 60 & echo $! > " +
                                  Quoted(dir.path() / "sleep.pid") + "\necho $$ > " +
                                  Quoted(dir.path() / "sh.pid") + "\nwhile :; do wait; done";
  SECTION("the shell itself ignores SIGTERM") {
    absl::StatusOr<ScriptRun> run =
        RunDiscoveryScript(Options(ignore_term, absl::Milliseconds(500)), kEnv);
    REQUIRE(run.ok());
    CHECK(run->timed_out);
    CHECK(run->exit.signaled);
    CHECK(run->exit.code == SIGKILL);
  }
  SECTION("a script file that ignores SIGTERM, below the shell") {
    // /bin/sh -c PATH may fork the script as a child: the shell ends on SIGTERM and the script
    // it left behind is killed with the rest of the process group.
    const std::string script = dir.WriteScript("stubborn.sh", ignore_term);
    absl::StatusOr<ScriptRun> run =
        RunDiscoveryScript(Options(script, absl::Milliseconds(500)), kEnv);
    REQUIRE(run.ok());
    CHECK(run->timed_out);
    CHECK_FALSE(run->exit.ok());
  }
  for (const char* name : {"sh.pid", "sleep.pid"}) {
    if (std::optional<int> pid = dir.ReadPid(name)) {
      INFO(name << " " << *pid);
      CHECK(EventuallyDead(*pid));
    } else {
      chorus::testing::SkipCase(absl::StrCat(
          "the script had not written ", name,
          " when it was killed (a start slower than its timeout): its end was not checked"));
      return;
    }
  }
}

TEST_CASE("discovery script: a background child left behind does not hold it up",
          "[elastic][discovery][subprocess]") {
  TempDir dir;
  const std::string script =
      dir.WriteScript("leaves_child.sh",
                      "sleep 60 &\necho $! > " + Quoted(dir.path() / "sleep.pid") + "\necho a:3");
  absl::StatusOr<HostSet> hosts = DiscoverOnce(Options(script));  // 30 s timeout: not reached
  REQUIRE(hosts.ok());
  CHECK(*hosts == HostSet{{"a", 3}});
  std::optional<int> pid = dir.ReadPid("sleep.pid");
  REQUIRE(pid.has_value());
  CHECK(EventuallyDead(*pid));
}

TEST_CASE("discovery script: a signal to chorusrun cancels it",
          "[elastic][discovery][subprocess]") {
  // The script signals its parent (this process), as a user's Ctrl-C or a scheduler would;
  // the Supervisor owns SIGTERM while the script runs and stops it.
  absl::StatusOr<ScriptRun> run = RunDiscoveryScript(Options("kill -TERM $PPID; sleep 60"), kEnv);
  REQUIRE(run.ok());
  REQUIRE(run->stop_signal == SIGTERM);
  absl::StatusOr<HostSet> hosts = InterpretScriptRun(Options("x"), *run);
  CHECK(hosts.status().code() == absl::StatusCode::kCancelled);
}

// The engine's production path: a DiscoveryRunner under a Supervisor, run after run.
class RunnerHarness {
 public:
  explicit RunnerHarness(const DiscoveryOptions& o) {
    auto supervisor = Supervisor::Create({absl::Milliseconds(200)});
    REQUIRE(supervisor.ok());
    supervisor_ = *std::move(supervisor);
    auto runner = DiscoveryRunner::ForScript(o, kEnv, absl::ZeroDuration());
    REQUIRE(runner.ok());
    runner_ = *std::move(runner);
  }
  ~RunnerHarness() { runner_->Stop(*supervisor_); }

  // The answer of the next run (each call waits in poll for its run to end).
  DiscoveryAnswer Next() {
    while (true) {
      const absl::Time until = runner_->Tick(*supervisor_, absl::Now());
      Supervisor::Events events = supervisor_->Poll(until);
      if (std::optional<DiscoveryAnswer> a = runner_->Take(events, absl::Now())) return *a;
    }
  }

 private:
  std::unique_ptr<DiscoveryRunner> runner_;
  std::unique_ptr<Supervisor> supervisor_;
};

TEST_CASE("DiscoveryRunner with a real script keeps the last good set",
          "[elastic][discovery][subprocess]") {
  TempDir dir;
  const std::string script = dir.WriteScript("discover.sh", "exit 3");
  RunnerHarness runner(Options(script, absl::Milliseconds(500)));

  // The very first run fails: an error.
  DiscoveryAnswer r = runner.Next();
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kUnavailable);

  dir.WriteScript("discover.sh", "echo a:1\necho b");
  r = runner.Next();
  REQUIRE(r.ok());
  CHECK(r->hosts == HostSet{{"a", 1}, {"b", 2}});
  CHECK(r->warning.empty());

  struct Case {
    const char* body;
    const char* warning;
  };
  for (const Case& c : {Case{"echo garbage:x", "malformed host 'garbage:x'"},
                        Case{"echo c:1\nexit 3", "exited with code 3"},
                        Case{"echo c:1\nsleep 60", "did not finish within the timeout of 500ms"}}) {
    INFO(c.body);
    dir.WriteScript("discover.sh", c.body);
    r = runner.Next();
    REQUIRE(r.ok());
    CHECK(r->hosts == HostSet{{"a", 1}, {"b", 2}});
    CHECK_THAT(r->warning, Catch::Contains(c.warning));
  }

  dir.WriteScript("discover.sh", "echo c:4");
  r = runner.Next();
  REQUIRE(r.ok());
  CHECK(r->hosts == HostSet{{"c", 4}});
  CHECK(r->warning.empty());
}

TEST_CASE("DiscoveryRunner for a fixed pool answers every interval",
          "[elastic][discovery][subprocess]") {
  auto supervisor = Supervisor::Create({absl::Milliseconds(200)});
  REQUIRE(supervisor.ok());
  std::unique_ptr<DiscoveryRunner> runner =
      DiscoveryRunner::ForPool({{"a", 2}}, absl::Milliseconds(100));
  const absl::Time t0 = absl::Now();
  Supervisor::Events none;
  CHECK(runner->Tick(**supervisor, t0) == t0);
  std::optional<DiscoveryAnswer> a = runner->Take(none, t0);
  REQUIRE(a.has_value());
  REQUIRE(a->ok());
  CHECK((*a)->hosts == HostSet{{"a", 2}});
  CHECK_FALSE(runner->Take(none, t0).has_value());
  CHECK(runner->Tick(**supervisor, t0 + absl::Milliseconds(50)) == t0 + absl::Milliseconds(100));
  CHECK_FALSE(runner->Take(none, t0 + absl::Milliseconds(50)).has_value());
  runner->Tick(**supervisor, t0 + absl::Milliseconds(100));
  CHECK(runner->Take(none, t0 + absl::Milliseconds(100)).has_value());
}

}  // namespace
}  // namespace chorus::launcher
