// RunChild (launcher/process/child_process.h): when chorusrun signals its child (StopSchedule,
// pure), and with real processes: a child that ignores SIGTERM is killed after the grace, a signal
// to chorusrun is passed on, and what the child leaves behind does not outlive RunChild.
#include "launcher/process/child_process.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include <catch2/catch.hpp>

namespace chorus::launcher {
namespace {

using Signals = std::vector<int>;

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST_CASE("StopSchedule: nothing until asked", "[launcher][child]") {
  StopSchedule s(absl::Seconds(3));
  CHECK(s.Next() == absl::InfiniteFuture());
  CHECK(s.Due(kT0 + absl::Hours(1)).empty());
}

TEST_CASE("StopSchedule: a signal gives the child the grace, a second one none",
          "[launcher][child]") {
  StopSchedule s(absl::Seconds(3));
  s.OnSignal(kT0);
  CHECK(s.signalled());
  CHECK(s.Next() == kT0 + absl::Seconds(3));
  CHECK(s.Due(kT0 + absl::Seconds(2)).empty());
  CHECK(s.Due(kT0 + absl::Seconds(3)) == Signals{SIGKILL});
  CHECK(s.kill_sent());
  CHECK(s.Due(kT0 + absl::Seconds(9)).empty());
  CHECK(s.Next() == absl::InfiniteFuture());

  StopSchedule twice(absl::Seconds(3));
  twice.OnSignal(kT0);
  twice.OnSignal(kT0 + absl::Seconds(1));
  CHECK(twice.Next() == kT0 + absl::Seconds(1));
  CHECK(twice.Due(kT0 + absl::Seconds(1)) == Signals{SIGKILL});
}

TEST_CASE("StopSchedule: a stop is SIGTERM, then SIGKILL after the grace", "[launcher][child]") {
  StopSchedule s(absl::Seconds(3));
  s.StopAt(kT0 + absl::Seconds(2));
  s.StopAt(kT0 + absl::Seconds(5));  // later: the earlier stop stays
  CHECK(s.Next() == kT0 + absl::Seconds(2));
  CHECK(s.Due(kT0 + absl::Seconds(1)).empty());
  CHECK(s.Due(kT0 + absl::Seconds(2)) == Signals{SIGTERM});
  CHECK(s.term_sent());
  CHECK(s.Next() == kT0 + absl::Seconds(5));
  // A signal meanwhile does not move the SIGKILL later.
  s.OnSignal(kT0 + absl::Seconds(3));
  CHECK(s.Next() == kT0 + absl::Seconds(5));
  CHECK(s.Due(kT0 + absl::Seconds(5)) == Signals{SIGKILL});

  // Woken late: both, in order.
  StopSchedule late(absl::Seconds(3));
  late.StopAt(kT0);
  CHECK(late.Due(kT0 + absl::Seconds(10)) == Signals{SIGTERM, SIGKILL});
}

Environment Env() { return {{"PATH", "/usr/bin:/bin"}}; }

bool Running(pid_t pid) {
  // A zombie is not running: read its state.
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char buffer[512] = {};
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, f);
  std::fclose(f);
  const std::string stat(buffer, n);
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

TEST_CASE("A child that ignores SIGTERM is killed after the grace; its leftovers too",
          "[launcher][child]") {
  std::string output;
  ChildOptions options;
  options.grace = absl::Milliseconds(300);
  std::optional<absl::Time> ready;
  options.stop_at = [&]() -> std::optional<absl::Time> {
    if (!ready) return std::nullopt;
    return *ready + absl::Milliseconds(100);
  };
  Signals sent;
  options.on_stop = [&](int sig) { sent.push_back(sig); };
  const absl::Time start = absl::Now();
  // The background sleep keeps no pipe open; it is left behind when the shell is killed.
  absl::StatusOr<ChildEnd> end = RunChild(
      "/bin/sh",
      {"sh", "-c", "trap '' TERM; sleep 600 >/dev/null 2>&1 & echo \"pid $!\"; exec sleep 600"},
      Env(),
      [&](absl::string_view bytes) {
        output.append(bytes.data(), bytes.size());
        if (output.find('\n') != std::string::npos && !ready) ready = absl::Now();
      },
      options);
  REQUIRE(end.ok());
  // "Killed after 0.4 s" against "ran its 600 s".
  CHECK(absl::Now() - start < absl::Seconds(60));
  CHECK(end->stopped);
  CHECK(end->killed);
  CHECK_FALSE(end->signal);
  CHECK(end->status == 128 + SIGKILL);
  CHECK(sent == Signals{SIGTERM, SIGKILL});
  pid_t leftover = 0;
  REQUIRE(absl::SimpleAtoi(absl::StripAsciiWhitespace(output.substr(4)), &leftover));
  CHECK_FALSE(Running(leftover));
}

TEST_CASE("A signal to chorusrun reaches the child, which gets the grace", "[launcher][child]") {
  ChildOptions options;
  options.grace = absl::Milliseconds(300);
  bool raised = false;
  const absl::Time start = absl::Now();
  absl::StatusOr<ChildEnd> end = RunChild(
      "/bin/sh", {"sh", "-c", "trap 'echo got TERM' TERM; echo ready; while :; do sleep 1; done"},
      Env(),
      [&](absl::string_view bytes) {
        if (!raised && bytes.find("ready") != absl::string_view::npos) {
          raised = true;
          ::kill(::getpid(), SIGTERM);  // as another process would (not a terminal's)
        }
      },
      options);
  REQUIRE(end.ok());
  CHECK(absl::Now() - start < absl::Seconds(60));
  CHECK(end->signal == SIGTERM);
  CHECK(end->killed);
  CHECK_FALSE(end->stopped);
  CHECK(end->status == 128 + SIGKILL);
}

TEST_CASE("A child that ends by itself: its status; nothing is sent", "[launcher][child]") {
  std::string output;
  ChildOptions options;
  options.on_stop = [](int) { FAIL("nothing should be sent"); };
  absl::StatusOr<ChildEnd> end = RunChild(
      "/bin/sh", {"sh", "-c", "echo out; echo err >&2; exit 3"}, Env(),
      [&](absl::string_view bytes) { output.append(bytes.data(), bytes.size()); }, options);
  REQUIRE(end.ok());
  CHECK(end->status == 3);
  CHECK_FALSE(end->stopped);
  CHECK_FALSE(end->killed);
  CHECK(output == "out\nerr\n");
}

}  // namespace
}  // namespace chorus::launcher
