// The timeline writer (bounded queue, size cap, valid JSON) and the recorder inside a running
// runtime (simulated ranks over the in-process fabric), parsed with nlohmann::json.
#include "timeline/timeline.h"

#include <unistd.h>

#include <atomic>
#include <barrier>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "runtime/runtime.h"
#include "test/support/in_process_fabric.h"
#include "timeline/trace_writer.h"
#include <nlohmann/json.hpp>

namespace chorus::timeline {
namespace {

namespace fs = std::filesystem;

// A fresh directory per call, removed at exit of the test case.
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           absl::StrCat("chorus_timeline_test_", ::getpid(), "_", counter++);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string File(const std::string& name) const { return (path / name).string(); }
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json Load(const std::string& path) { return nlohmann::json::parse(Slurp(path)); }

TraceWriter::Options WriterOptions(const std::string& path) {
  TraceWriter::Options o;
  o.path = path;
  o.rank = 1;
  o.size = 3;
  o.hostname = "host-a";
  o.start = absl::Now();
  o.clock_offset_us = -12.5;
  return o;
}

std::vector<Event> Spans(int n) {
  std::vector<Event> events;
  for (int i = 0; i < n; ++i) {
    Event e;
    e.name = "QUEUE";
    e.tid = 1;
    e.ts_ns = 1000 * i + 7;
    e.dur_ns = 1500;
    events.push_back(e);
  }
  return events;
}

int Count(const nlohmann::json& events, const std::string& name) {
  int n = 0;
  for (const auto& e : events) n += e["name"] == name ? 1 : 0;
  return n;
}

TEST_CASE("the writer produces valid JSON with header, events and trailer", "[timeline]") {
  TempDir dir;
  auto writer = TraceWriter::Open(WriterOptions(dir.File("t.json")));
  REQUIRE(writer.ok());
  std::vector<Event> events = Spans(5);
  Event name;
  name.kind = Event::Kind::kThreadName;
  name.tid = 1;
  name.args = ThreadNameArgs{"grad \"q\" \\ \x01 caf\xc3\xa9 bad\xff"};
  events.insert(events.begin(), name);
  (*writer)->Submit(&events);
  CHECK(events.empty());
  (*writer)->Close();
  (*writer)->Close();  // idempotent
  const nlohmann::json trace = Load(dir.File("t.json"));
  REQUIRE(trace.is_array());
  const auto& header = trace.front();
  CHECK(header["name"] == "chorus_trace");
  CHECK(header["args"]["rank"] == 1);
  CHECK(header["args"]["size"] == 3);
  CHECK(header["args"]["hostname"] == "host-a");
  CHECK(header["args"]["clock_offset_us"].get<double>() == -12.5);
  CHECK(Count(trace, "QUEUE") == 5);
  for (const auto& e : trace) {
    CHECK(e["pid"] == 1);
    if (e["name"] == "QUEUE") CHECK(e["dur"].get<double>() == 1.5);
  }
  bool found = false;
  for (const auto& e : trace) {
    if (e["name"] == "thread_name" && e["tid"] == 1) {
      found = true;
      CHECK(e["args"]["name"] == "grad \"q\" \\ \x01 caf\xc3\xa9 bad\xc3\xbf");
    }
  }
  CHECK(found);
  CHECK(trace.back()["name"] == "chorus_trace_end");
  CHECK(trace.back()["args"]["events"] == 6);
  CHECK(trace.back()["args"]["dropped_events"] == 0);
}

TEST_CASE("a full writer queue drops events and counts them in the file", "[timeline]") {
  TempDir dir;
  TraceWriter::Options options = WriterOptions(dir.File("t.json"));
  options.queue_events = 3;
  auto writer = TraceWriter::Open(options);
  REQUIRE(writer.ok());
  std::vector<Event> events = Spans(10);
  (*writer)->Submit(&events);  // 3 fit into the empty queue, 7 are dropped
  CHECK((*writer)->dropped_events() == 7);
  (*writer)->Close();
  const nlohmann::json trace = Load(dir.File("t.json"));
  CHECK(Count(trace, "QUEUE") == 3);
  REQUIRE(Count(trace, "DROPPED_EVENTS") == 1);
  for (const auto& e : trace) {
    if (e["name"] == "DROPPED_EVENTS") CHECK(e["args"]["dropped_events"] == 7);
  }
  CHECK(trace.back()["args"]["dropped_events"] == 7);
}

TEST_CASE("the size cap holds and the capped file is still valid JSON", "[timeline]") {
  TempDir dir;
  TraceWriter::Options options = WriterOptions(dir.File("t.json"));
  options.max_bytes = 4096;
  auto writer = TraceWriter::Open(options);
  REQUIRE(writer.ok());
  for (int round = 0; round < 10; ++round) {
    std::vector<Event> events = Spans(100);
    (*writer)->Submit(&events);
  }
  (*writer)->Close();
  CHECK(fs::file_size(dir.File("t.json")) <= 4096);
  const nlohmann::json trace = Load(dir.File("t.json"));
  CHECK(Count(trace, "QUEUE") > 10);
  CHECK(Count(trace, "TRACE_TRUNCATED") == 1);
  CHECK(trace.back()["args"]["truncated"] == true);
}

TEST_CASE("an uncreatable timeline file is an error naming the path", "[timeline]") {
  auto writer = TraceWriter::Open(WriterOptions("/nonexistent-dir/sub/t.json"));
  REQUIRE_FALSE(writer.ok());
  CHECK(writer.status().message().find("/nonexistent-dir/sub/t.json") != std::string::npos);
}

TEST_CASE("which file each rank writes", "[timeline]") {
  Timeline::Settings s;
  s.size = 4;
  s.rank = 0;
  CHECK(Timeline(s).PathFor("/x/t.json") == "/x/t.json");
  s.rank = 2;
  CHECK(Timeline(s).PathFor("/x/t.json").empty());  // rank 0 only by default
  CHECK(Timeline(s).PathFor("/x/t{rank}.json") == "/x/t2.json");
  s.all_ranks = true;
  CHECK(Timeline(s).PathFor("/x/t.json") == "/x/t.rank2.json");
  CHECK(Timeline(s).PathFor("/x.d/trace") == "/x.d/trace.rank2");
}

// ---- inside a runtime ----

using runtime::Config;
using runtime::Runtime;

OpRequest Allreduce(const std::string& name, std::vector<float>& data) {
  OpRequest r;
  r.type = OpType::kAllreduce;
  r.name = name;
  r.input = {data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}};
  return r;
}

// Runs `steps` steps of three allreduces named "<prefix><step>.<i>" on this rank.
bool RunSteps(Runtime& rt, const std::string& prefix, int from, int to) {
  bool ok = true;
  for (int step = from; step < to; ++step) {
    std::vector<std::vector<float>> data(3, std::vector<float>(100, 1.0f));
    std::vector<Handle> handles;
    for (int i = 0; i < 3; ++i) {
      auto h = rt.Enqueue(Allreduce(absl::StrCat(prefix, step, ".", i), data[i]));
      ok = ok && h.ok();
      if (h.ok()) handles.push_back(*h);
    }
    for (Handle h : handles) ok = ok && rt.Release(h).ok();
  }
  return ok;
}

TEST_CASE("a runtime records every rank's ops; start/stop at run time record a window",
          "[timeline][runtime]") {
  TempDir dir;
  constexpr int kRanks = 2;
  Config config;
  config.cycle_time = absl::Microseconds(200);
  config.idle_cycle_time = absl::Milliseconds(2);
  config.timeline = dir.File("init{rank}.json");
  testing::InProcessFabric fabric(kRanks);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  // Start and stop are per rank: a rank still recording also records the requests of a peer
  // that has already moved on. The ranks switch together so that each window holds "b" alone.
  std::barrier switched(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto rt = Runtime::Create(config, fabric.CreateController(r));
      if (!rt.ok()) {
        errors[r] = rt.status().ToString();
        switched.arrive_and_drop();
        return;
      }
      bool ok = RunSteps(**rt, "a", 0, 2);
      // A window at run time: only the "b" steps land in window<rank>.json.
      ok = ok && (*rt)->StartTimeline(dir.File("window{rank}.json"), true).ok();
      switched.arrive_and_wait();
      ok = ok && RunSteps(**rt, "b", 0, 2);
      ok = ok && (*rt)->StopTimeline().ok();
      switched.arrive_and_wait();
      ok = ok && RunSteps(**rt, "c", 0, 1);
      if (!ok) errors[r] = "an op or a timeline call failed";
      (*rt)->Shutdown();
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) CHECK(e.empty());

  for (int r = 0; r < kRanks; ++r) {
    const nlohmann::json init = Load(dir.File(absl::StrCat("init", r, ".json")));
    const nlohmann::json window = Load(dir.File(absl::StrCat("window", r, ".json")));
    CHECK(init.front()["args"]["rank"] == r);
    // The init file covers the "a" steps only (start_timeline switched files).
    CHECK(Count(init, "ALLREDUCE") == 6);
    CHECK(Count(init, "NEGOTIATE_ALLREDUCE") == 6);
    CHECK(Count(window, "ALLREDUCE") == 6);
    CHECK(Count(window, "NEGOTIATE_ALLREDUCE") == 6);
    CHECK(Count(window, "CYCLE_START") > 0);
    std::vector<std::string> names;
    for (const auto& e : window) {
      if (e["name"] == "thread_name" && e["tid"] != 0) names.push_back(e["args"]["name"]);
    }
    CHECK(names.size() == 6);
    for (const std::string& n : names) CHECK(n.rfind("b", 0) == 0);
    CHECK(window.back()["name"] == "chorus_trace_end");
  }
}

TEST_CASE("start_timeline without CHORUS_TIMELINE is refused as in Horovod",
          "[timeline][runtime]") {
  testing::InProcessFabric fabric(1);
  auto rt = Runtime::Create(Config{}, fabric.CreateController(0));
  REQUIRE(rt.ok());
  const absl::Status st = (*rt)->StartTimeline("/tmp/never.json", false);
  CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(st.message().find("CHORUS_TIMELINE=DYNAMIC") != std::string::npos);
  CHECK((*rt)->StopTimeline().ok());
  (*rt)->Shutdown();
}

}  // namespace
}  // namespace chorus::timeline
