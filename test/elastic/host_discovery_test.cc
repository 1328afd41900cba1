#include "elastic/host_discovery.h"

#include <signal.h>

#include <deque>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace chorus::elastic {
namespace {

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST_CASE("ParseDiscoveryOutput reads host and host:slots lines", "[elastic][discovery]") {
  absl::StatusOr<HostSet> hosts = ParseDiscoveryOutput("a\nb:2\nc.example.com:16\n", 3);
  REQUIRE(hosts.ok());
  CHECK(*hosts == HostSet{{"a", 3}, {"b", 2}, {"c.example.com", 16}});
}

TEST_CASE("ParseDiscoveryOutput drops blanks and surrounding whitespace", "[elastic][discovery]") {
  absl::StatusOr<HostSet> hosts =
      ParseDiscoveryOutput("\n\n  a:2  \n\t\n b \r\n10.0.0.7:1\r\n   \nlast", 1);
  REQUIRE(hosts.ok());
  CHECK(*hosts == HostSet{{"10.0.0.7", 1}, {"a", 2}, {"b", 1}, {"last", 1}});
}

TEST_CASE("ParseDiscoveryOutput: empty output is no host", "[elastic][discovery]") {
  for (const char* output : {"", "\n", "  \n\t\n"}) {
    absl::StatusOr<HostSet> hosts = ParseDiscoveryOutput(output, 1);
    REQUIRE(hosts.ok());
    CHECK(hosts->empty());
  }
}

TEST_CASE("ParseDiscoveryOutput merges duplicates with the largest slots", "[elastic][discovery]") {
  absl::StatusOr<HostSet> hosts = ParseDiscoveryOutput("a:2\nb\na:4\na:1\nb:1\n", 3);
  REQUIRE(hosts.ok());
  CHECK(*hosts == HostSet{{"a", 4}, {"b", 3}});  // b: the default 3 beats 1
  // The order of the lines does not matter.
  absl::StatusOr<HostSet> reversed = ParseDiscoveryOutput("b:1\na:1\na:4\nb\na:2\n", 3);
  REQUIRE(reversed.ok());
  CHECK(*reversed == *hosts);
  absl::StatusOr<HostSet> same = ParseDiscoveryOutput("a\na\n", 2);
  REQUIRE(same.ok());
  CHECK(*same == HostSet{{"a", 2}});
}

TEST_CASE("ParseDiscoveryOutput uses the default slots", "[elastic][discovery]") {
  const int slots = GENERATE(1, 4, 1000000);
  absl::StatusOr<HostSet> hosts = ParseDiscoveryOutput("a\nb:7\n", slots);
  REQUIRE(hosts.ok());
  CHECK(*hosts == HostSet{{"a", slots}, {"b", 7}});
}

TEST_CASE("ParseDiscoveryOutput rejects malformed lines, naming them", "[elastic][discovery]") {
  const std::string bad =
      GENERATE(as<std::string>{}, "h:x", "h:0", "h:-1", ":3", "h 2", "h :2", "h: 2", "h:", "h:+2",
               "h:2x", "h:1:2", "h:1000001", "h:99999999999", "ho st", "a,b", "a:1,b:1", ":",
               "h\t:2", "h=2", "h slots=2");
  INFO("line: '" << bad << "'");
  absl::StatusOr<HostSet> hosts = ParseDiscoveryOutput("good:1\n\n" + bad + "\nalso:2\n", 1);
  REQUIRE_FALSE(hosts.ok());
  CHECK(hosts.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(Message(hosts.status()), Catch::StartsWith("line 3: malformed host '" + bad + "'"));
  CHECK(Message(hosts.status()).find('\n') == std::string::npos);
}

TEST_CASE("ParseDiscoveryOutput shortens a very long line in its error", "[elastic][discovery]") {
  const std::string garbage(5000, '#');
  absl::StatusOr<HostSet> hosts = ParseDiscoveryOutput(garbage, 1);
  REQUIRE_FALSE(hosts.ok());
  CHECK(Message(hosts.status()).size() < 400);
  CHECK_THAT(Message(hosts.status()), Catch::Contains("...'"));
}

DiscoveryOptions Options(absl::Duration timeout = absl::Milliseconds(500)) {
  DiscoveryOptions o;
  o.script = "./discover.sh";
  o.default_slots = 2;
  o.timeout = timeout;
  return o;
}

ScriptRun Exited(int code, std::string out = "", std::string err = "") {
  ScriptRun run;
  run.exit = {false, code};
  run.stdout_text = std::move(out);
  run.stderr_tail = std::move(err);
  return run;
}

TEST_CASE("InterpretScriptRun judges each way a run ends", "[elastic][discovery]") {
  const DiscoveryOptions o = Options();

  absl::StatusOr<HostSet> good = InterpretScriptRun(o, Exited(0, "a:1\nb\n"));
  REQUIRE(good.ok());
  CHECK(*good == HostSet{{"a", 1}, {"b", 2}});

  absl::StatusOr<HostSet> exit3 = InterpretScriptRun(o, Exited(3, "a:1\n", "warming up\noops\n\n"));
  REQUIRE_FALSE(exit3.ok());
  CHECK(exit3.status().code() == absl::StatusCode::kUnavailable);
  CHECK(Message(exit3.status()) ==
        "host discovery script './discover.sh' exited with code 3; its last stderr line: 'oops'");

  ScriptRun killed;
  killed.exit = {true, SIGKILL};
  absl::StatusOr<HostSet> signaled = InterpretScriptRun(o, killed);
  REQUIRE_FALSE(signaled.ok());
  CHECK(signaled.status().code() == absl::StatusCode::kUnavailable);
  CHECK(Message(signaled.status()) ==
        "host discovery script './discover.sh' was killed by signal 9 (Killed)");

  ScriptRun late = killed;
  late.exit = {true, SIGTERM};
  late.timed_out = true;
  absl::StatusOr<HostSet> timeout = InterpretScriptRun(o, late);
  REQUIRE_FALSE(timeout.ok());
  CHECK(timeout.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(Message(timeout.status()) ==
        "host discovery script './discover.sh' did not finish within the timeout of 500ms; its "
        "process group was killed");

  ScriptRun stopped = killed;
  stopped.stop_signal = SIGINT;
  absl::StatusOr<HostSet> cancelled = InterpretScriptRun(o, stopped);
  REQUIRE_FALSE(cancelled.ok());
  CHECK(cancelled.status().code() == absl::StatusCode::kCancelled);
  CHECK_THAT(Message(cancelled.status()), Catch::Contains("signal 2 (Interrupt)"));

  absl::StatusOr<HostSet> garbage = InterpretScriptRun(o, Exited(0, "a:1\nhello world\n"));
  REQUIRE_FALSE(garbage.ok());
  CHECK(garbage.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Message(garbage.status()) ==
        "host discovery script './discover.sh' printed line 2: malformed host 'hello world'; "
        "expected 'host' or 'host:slots' with slots in [1, 1000000]");

  ScriptRun big = Exited(0, "a\n");
  big.stdout_overflow = true;
  absl::StatusOr<HostSet> overflow = InterpretScriptRun(o, big);
  REQUIRE_FALSE(overflow.ok());
  CHECK(overflow.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(Message(overflow.status()), Catch::Contains("printed more than 1048576 bytes"));
}

TEST_CASE("Discovery options are validated", "[elastic][discovery]") {
  const auto bad = [](DiscoveryOptions o) {
    CHECK(ValidateDiscoveryOptions(o).code() == absl::StatusCode::kInvalidArgument);
  };
  DiscoveryOptions o = Options();
  o.script = "  ";
  bad(o);
  o = Options();
  o.default_slots = 0;
  bad(o);
  o.default_slots = 1000001;
  bad(o);
  bad(Options(absl::ZeroDuration()));
  o = Options();
  o.grace = absl::Seconds(-1);
  bad(o);
  CHECK(ValidateDiscoveryOptions(Options()).ok());
  CHECK(DiscoveryOptions{}.timeout == absl::Seconds(30));
}

TEST_CASE("DiscoveryJudge: a failure before any success is an error", "[elastic][discovery]") {
  DiscoveryJudge d(Options());
  absl::StatusOr<DiscoveryJudge::Result> first = d.Judge(Exited(3));
  REQUIRE_FALSE(first.ok());
  CHECK(first.status().code() == absl::StatusCode::kUnavailable);
  CHECK_FALSE(d.last_good().has_value());
  REQUIRE(d.Judge(Exited(0, "bad:x\n")).status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(d.Judge(absl::InternalError("fork: out of memory")).status().code() ==
          absl::StatusCode::kInternal);
}

TEST_CASE("DiscoveryJudge keeps the last good host set after a success", "[elastic][discovery]") {
  DiscoveryJudge d(Options());
  absl::StatusOr<DiscoveryJudge::Result> r = d.Judge(Exited(0, "a:1\nb\n"));
  REQUIRE(r.ok());
  CHECK(r->hosts == HostSet{{"a", 1}, {"b", 2}});
  CHECK(r->warning.empty());

  ScriptRun late;
  late.exit = {true, SIGTERM};
  late.timed_out = true;
  const std::vector<absl::StatusOr<ScriptRun>> failures = {
      late, Exited(3, "", "boom\n"), Exited(0, "garbage here\n"),
      absl::InternalError("pipe: too many open files")};
  const std::vector<const char*> expected = {"did not finish within the timeout of 500ms",
                                             "exited with code 3; its last stderr line: 'boom'",
                                             "line 1: malformed host 'garbage here'",
                                             "pipe: too many open"};
  for (size_t i = 0; i < failures.size(); ++i) {
    INFO(expected[i]);
    r = d.Judge(failures[i]);
    REQUIRE(r.ok());
    CHECK(r->hosts == HostSet{{"a", 1}, {"b", 2}});
    CHECK_THAT(r->warning, Catch::Contains(expected[i]));
    CHECK_THAT(r->warning, Catch::EndsWith("; keeping the last discovered hosts"));
  }

  // A new good answer replaces the old one, even an empty one.
  r = d.Judge(Exited(0, "c:4\n"));
  REQUIRE(r.ok());
  CHECK(r->hosts == HostSet{{"c", 4}});
  CHECK(r->warning.empty());
  r = d.Judge(Exited(0, ""));
  REQUIRE(r.ok());
  CHECK(r->hosts.empty());
  CHECK(d.last_good() == HostSet{});
  r = d.Judge(Exited(1));
  REQUIRE(r.ok());
  CHECK(r->hosts.empty());
  CHECK_FALSE(r->warning.empty());
}

TEST_CASE("DiscoveryJudge does not mask a signal to chorusrun", "[elastic][discovery]") {
  DiscoveryJudge d(Options());
  REQUIRE(d.Judge(Exited(0, "a\n")).ok());
  ScriptRun stopped;
  stopped.exit = {true, SIGTERM};
  stopped.stop_signal = SIGTERM;
  absl::StatusOr<DiscoveryJudge::Result> r = d.Judge(stopped);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kCancelled);
  CHECK(d.last_good() == HostSet{{"a", 2}});
}

TEST_CASE("AppendScriptOutput keeps stdout up to the limit and the stderr tail",
          "[elastic][discovery]") {
  ScriptRun run;
  AppendScriptOutput(run, /*is_stdout=*/true, "a:1\n");
  AppendScriptOutput(run, /*is_stdout=*/false, "oops\n");
  CHECK(run.stdout_text == "a:1\n");
  CHECK(run.stderr_tail == "oops\n");
  CHECK_FALSE(run.stdout_overflow);
  AppendScriptOutput(run, /*is_stdout=*/true, std::string(kMaxDiscoveryOutputBytes, 'x'));
  CHECK(run.stdout_overflow);
  CHECK(run.stdout_text.size() == kMaxDiscoveryOutputBytes);
  AppendScriptOutput(run, /*is_stdout=*/false, std::string(10000, 'e'));
  CHECK(run.stderr_tail.size() == 4096);
}

}  // namespace
}  // namespace chorus::elastic
