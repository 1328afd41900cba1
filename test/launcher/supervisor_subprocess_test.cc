#include <signal.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/process/supervisor.h"

namespace chorus::launcher {
namespace {

// Collects each worker's output.
class StringSink : public OutputSink {
 public:
  void Write(int index, OutputStream stream, absl::string_view bytes) override {
    text[{index, stream}].append(bytes.data(), bytes.size());
  }
  void Close(int index, OutputStream stream) override { closed[{index, stream}] = true; }

  std::map<std::pair<int, OutputStream>, std::string> text;
  std::map<std::pair<int, OutputStream>, bool> closed;
};

WorkerSpec Shell(const std::string& script) {
  WorkerSpec spec;
  spec.program = "/bin/sh";
  spec.argv = {"sh", "-c", script};
  return spec;
}

// Polls until `id` has ended; fails the test after 20 s.
Supervisor::Exit WaitExit(Supervisor& s, int id, std::vector<int>* signals = nullptr) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    Supervisor::Events ev = s.Poll(deadline);
    if (signals != nullptr) signals->insert(signals->end(), ev.signals.begin(), ev.signals.end());
    for (const Supervisor::Exit& e : ev.exits) {
      if (e.id == id) return e;
    }
  }
  FAIL("worker " << id << " did not end within 20 s");
  return {};
}

TEST_CASE("Supervisor: one worker's end leaves the others running", "[elastic][subprocess]") {
  StringSink sink;  // outlives the supervisor, which closes its streams
  auto s = Supervisor::Create({absl::Seconds(2)});
  REQUIRE(s.ok());
  auto quick = (*s)->Start(Shell("echo hello; exit 3"), &sink, 0);
  auto slow = (*s)->Start(Shell("exec sleep 30"), &sink, 1);
  REQUIRE(quick.ok());
  REQUIRE(slow.ok());
  const Supervisor::Exit e = WaitExit(**s, *quick);
  CHECK(e.exit.code == 3);
  CHECK_FALSE(e.exit.signaled);
  CHECK_FALSE(e.stop_signal.has_value());
  CHECK((*s)->is_running(*slow));

  (*s)->Stop(*slow, SIGTERM);
  const Supervisor::Exit stopped = WaitExit(**s, *slow);
  CHECK(stopped.exit.signaled);
  CHECK(stopped.exit.code == SIGTERM);
  CHECK(stopped.stop_signal == SIGTERM);
  CHECK((*s)->running() == 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while ((*s)->output_open() && absl::Now() < deadline) (*s)->Poll(deadline, true);
  CHECK(sink.text[{0, OutputStream::kStdout}] == "hello\n");
}

TEST_CASE("Supervisor: SIGKILL after the grace period, background children killed",
          "[elastic][subprocess]") {
  StringSink sink;  // outlives the supervisor, which closes its streams
  auto s = Supervisor::Create({absl::Milliseconds(200)});
  REQUIRE(s.ok());
  // Ignores SIGTERM; its background child holds the output pipe open.
  auto id = (*s)->Start(Shell("trap '' TERM; sleep 30 & echo started; while :; do sleep 1; done"),
                        &sink, 0);
  REQUIRE(id.ok());
  // Poll() returns on an exit or a signal, not on output: poll in short steps.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (sink.text[{0, OutputStream::kStdout}].empty() && absl::Now() < deadline) {
    (*s)->Poll(absl::Now() + absl::Milliseconds(20));
  }
  REQUIRE(sink.text[{0, OutputStream::kStdout}] == "started\n");
  (*s)->Stop(*id, SIGTERM);
  const Supervisor::Exit e = WaitExit(**s, *id);
  CHECK(e.exit.signaled);
  CHECK(e.exit.code == SIGKILL);
  // The background sleep was killed with the group: the pipe reaches EOF.
  while ((*s)->output_open() && absl::Now() < deadline) (*s)->Poll(deadline, true);
  CHECK_FALSE((*s)->output_open());
}

TEST_CASE("Supervisor: SIGTERM to chorusrun is reported, not acted on", "[elastic][subprocess]") {
  StringSink sink;  // outlives the supervisor, which closes its streams
  auto s = Supervisor::Create({absl::Seconds(2)});
  REQUIRE(s.ok());
  auto id = (*s)->Start(Shell("exec sleep 30"), &sink, 0);
  REQUIRE(id.ok());
  ::raise(SIGTERM);
  std::vector<int> signals;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (signals.empty() && absl::Now() < deadline) {
    Supervisor::Events ev = (*s)->Poll(deadline);
    signals.insert(signals.end(), ev.signals.begin(), ev.signals.end());
  }
  CHECK(signals == std::vector<int>{SIGTERM});
  CHECK((*s)->is_running(*id));
  (*s)->Stop(*id, SIGKILL);
  CHECK(WaitExit(**s, *id).exit.code == SIGKILL);
}

}  // namespace
}  // namespace chorus::launcher
