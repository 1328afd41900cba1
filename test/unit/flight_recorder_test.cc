#include "runtime/flight/flight_recorder.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

#include "nlohmann/json.hpp"
#include "runtime/flight/batch_metrics.h"
#include "runtime/message.h"

namespace chorus::runtime {
namespace {

Response Batch(std::vector<std::string> names, int64_t elements_each) {
  Response r;
  r.type = OpType::kAllreduce;
  r.dtype = DataType::kFloat32;
  r.names = std::move(names);
  r.shapes.assign(r.names.size(), {elements_each});
  return r;
}

absl::Time At(int64_t us) { return absl::FromUnixMicros(us); }

TEST_CASE("The flight recorder keeps the last batches, oldest first", "[flight]") {
  FlightRecorder recorder(3);
  REQUIRE(recorder.enabled());
  std::vector<int64_t> tokens;
  for (int b = 0; b < 5; ++b) {
    tokens.push_back(recorder.Begin(Batch({"t" + std::to_string(b)}, 4), 16, b, 10 + b,
                                    /*launched=*/false, At(b)));
  }
  recorder.End(tokens[4], absl::OkStatus(), At(100));
  recorder.End(tokens[3], absl::InternalError("broken"), At(101));
  recorder.End(tokens[0], absl::OkStatus(), At(102));  // overwritten since: nothing happens
  const std::vector<FlightRecord> records = recorder.Records();
  REQUIRE(records.size() == 3);
  CHECK(records[0].batch == 2);
  CHECK(records[0].state == FlightRecord::State::kStarted);
  CHECK(records[0].ended == absl::InfinitePast());
  CHECK(records[1].batch == 3);
  CHECK(records[1].state == FlightRecord::State::kFailed);
  CHECK(records[1].error.view() == "broken");
  CHECK(records[2].batch == 4);
  CHECK(records[2].cycle == 14);
  CHECK(records[2].state == FlightRecord::State::kDone);
  CHECK(records[2].ended == At(100));
  CHECK(records[2].first_name.view() == "t4");
  CHECK(records[2].last_name.view().empty());
  CHECK(records[2].bytes == 16);
}

TEST_CASE("A flight record describes a fused batch in fixed buffers", "[flight]") {
  FlightRecorder recorder(2);
  Response r = Batch({"first", "middle", std::string(200, 'x')}, 1000);
  r.shapes[0] = {2, 3, 4, 5, 6};
  r.device = 0;
  recorder.End(recorder.Begin(r, 10880, 7, 1, /*launched=*/true, At(0)), absl::OkStatus(), At(5));
  const FlightRecord record = recorder.Records().at(0);
  CHECK(record.tensors == 3);
  CHECK(record.bytes == 10880);
  CHECK(record.first_name.view() == "first");
  // Cut to the buffer, ending in "...".
  CHECK(record.last_name.view().size() == 95);
  CHECK(record.last_name.view().substr(92) == "...");
  CHECK(record.first_ndim == 5);
  CHECK(record.first_shape == std::array<int64_t, 4>{2, 3, 4, 5});
  CHECK(record.state == FlightRecord::State::kDone);

  FlightRecorder off(0);
  CHECK_FALSE(off.enabled());
  CHECK(off.Begin(r, 0, 0, 0, false, At(0)) == -1);
  off.End(-1, absl::OkStatus(), At(0));
  CHECK(off.Records().empty());
}

TEST_CASE("Batch metrics: each ended batch by op, its duration in one bucket, failures apart",
          "[flight][metrics]") {
  BatchMetrics metrics;
  FlightRecorder recorder(2, &metrics);
  const Response r = Batch({"a", "b"}, 256);  // 2 float32 tensors
  // Durations 50 us, 5 ms, 50 s and 500 s: buckets (.., 1e-4], (1e-3, 1e-2], (10, 100], > 100.
  for (int64_t us : {50, 5'000, 50'000'000, 500'000'000}) {
    recorder.End(recorder.Begin(r, 2048, 0, 0, false, At(0)), absl::OkStatus(), At(us));
  }
  recorder.End(recorder.Begin(r, 2048, 0, 0, false, At(0)),
               absl::InvalidArgumentError("mismatched shapes"), At(10));
  metrics.AddCycle();
  metrics.AddCycle();
  // A batch whose record the ring has dropped (it ended after two more began) is not counted.
  const int64_t old = recorder.Begin(r, 2048, 0, 0, false, At(0));
  recorder.Begin(r, 2048, 0, 0, false, At(0));
  recorder.Begin(r, 2048, 0, 0, false, At(0));
  recorder.End(old, absl::OkStatus(), At(1));

  const BatchTotals totals = metrics.Read();
  const OpTotals& all = totals.by_op[static_cast<size_t>(OpType::kAllreduce)];
  CHECK(all.batches == 4);
  CHECK(all.failed == 1);
  CHECK(all.tensors == 8);
  CHECK(all.bytes == 4 * 2048);
  CHECK(all.seconds == Approx(550.00505));
  CHECK(all.buckets == std::array<int64_t, 8>{1, 0, 1, 0, 0, 0, 1, 1});
  CHECK(totals.cycles == 2);
  CHECK(totals.by_op[static_cast<size_t>(OpType::kAllgather)].batches == 0);

  const nlohmann::json j = nlohmann::json::parse(FormatBatchTotals(totals, 3, 4, "UCX"));
  CHECK(j["rank"] == 3);
  CHECK(j["size"] == 4);
  CHECK(j["controller"] == "UCX");
  CHECK(j["cycles"] == 2);
  CHECK(j["bucket_bounds"].size() == kBatchSecondsBounds.size());
  REQUIRE(j["ops"].size() == 1);  // only the ops that ran
  CHECK(j["ops"]["allreduce"]["batches"] == 4);
  CHECK(j["ops"]["allreduce"]["failed"] == 1);
  CHECK(j["ops"]["allreduce"]["bytes"] == 8192);
  CHECK(j["ops"]["allreduce"]["buckets"].size() == 8);
}

TEST_CASE("A flight dump is self-describing JSON", "[flight]") {
  FlightRecorder recorder(4);
  Response failed = Batch({"bad"}, 0);
  failed.error_code = absl::StatusCode::kInvalidArgument;
  failed.error_message = "mismatched shape: rank 0 [4], rank 1 [5]";
  recorder.End(recorder.Begin(Batch({"a", "b"}, 2), 16, 0, 0, false, At(10)), absl::OkStatus(),
               At(20));
  recorder.End(recorder.Begin(failed, 0, 1, 1, false, At(30)), failed.status(), At(31));

  FlightDump dump;
  dump.reason = "a test";
  dump.job = "job-1";
  dump.rank = 1;
  dump.size = 3;
  dump.host = "h1";
  dump.pid = 42;
  dump.written = At(1000);
  dump.cycles = 9;
  dump.batches = 2;
  dump.process_sets = {{0, {0, 1, 2}}, {1, {1, 2}}};
  dump.host_names = {"h0", "h1", "h2"};
  dump.records = recorder.Records();
  FlightPendingOp pending;
  pending.name = std::string("bytes\xff", 6);  // not UTF-8: replaced, not refused
  pending.shape = {3, 4};
  pending.submitted = At(500);
  dump.pending.push_back(pending);
  dump.has_coordinator = true;
  StallReport waiting;
  waiting.name = "c";
  waiting.submitted_ranks = {0, 2};
  waiting.missing_ranks = {1};
  waiting.waited = absl::Seconds(2);
  dump.coordinator.push_back(waiting);

  const nlohmann::json j = nlohmann::json::parse(FormatFlightDump(dump));
  CHECK(j["format"] == "chorus-flight-recorder");
  CHECK(j["version"] == kFlightDumpFormat);
  CHECK(j["rank"] == 1);
  CHECK(j["size"] == 3);
  CHECK(j["job"] == "job-1");
  CHECK(j["batches"] == 2);
  CHECK(j["process_sets"][1]["ranks"] == std::vector<int>{1, 2});
  REQUIRE(j["records"].size() == 2);
  CHECK(j["records"][0]["first_tensor"] == "a");
  CHECK(j["records"][0]["last_tensor"] == "b");
  CHECK(j["records"][0]["state"] == "done");
  CHECK(j["records"][0]["started_us"] == 10);
  CHECK(j["records"][0]["ended_us"] == 20);
  CHECK(j["records"][1]["state"] == "failed");
  CHECK(j["records"][1]["error"] == failed.error_message);
  REQUIRE(j["pending"].size() == 1);
  CHECK(j["pending"][0]["shape"] == std::vector<int>{3, 4});
  CHECK(j["pending"][0]["submitted_us"] == 500);
  CHECK(j["coordinator"][0]["missing_ranks"] == std::vector<int>{1});
  CHECK(j["coordinator"][0]["waited_s"] == 2.0);

  // Written whole into the directory, which is created.
  char dir_template[] = "/tmp/chorus_flight_test_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = std::string(dir_template) + "/dumps";
  REQUIRE(WriteFlightDump(dir, dump).ok());
  std::ifstream in(FlightDumpPath(dir, 1));
  std::stringstream text;
  text << in.rdbuf();
  CHECK(nlohmann::json::parse(text.str())["reason"] == "a test");
  std::remove(FlightDumpPath(dir, 1).c_str());
  ::rmdir(dir.c_str());
  ::rmdir(dir_template);
  // A directory that cannot be made: an error naming it.
  const absl::Status refused = WriteFlightDump("/proc/no/such/dir", dump);
  CHECK_FALSE(refused.ok());
  CHECK(refused.message().find("/proc/no/such/dir") != std::string::npos);
}

TEST_CASE("SIGUSR2 asks for a dump where its action was the default, and only there", "[flight]") {
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction saved = {};
  REQUIRE(::sigaction(SIGUSR2, &ignore, &saved) == 0);
  // An application's choice (here SIG_IGN) is left alone.
  CHECK_FALSE(InstallFlightDumpSignal());
  struct sigaction now = {};
  REQUIRE(::sigaction(SIGUSR2, nullptr, &now) == 0);
  CHECK(now.sa_handler == SIG_IGN);

  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  REQUIRE(::sigaction(SIGUSR2, &dfl, nullptr) == 0);
  CHECK(InstallFlightDumpSignal());
  CHECK(InstallFlightDumpSignal());  // once: the second call finds it in place
  const uint64_t before = FlightDumpRequests();
  REQUIRE(::raise(SIGUSR2) == 0);  // handled on this thread before raise returns
  REQUIRE(::raise(SIGUSR2) == 0);
  CHECK(FlightDumpRequests() == before + 2);
  // As the process had it (the handler stays chorus's where no test set another).
  REQUIRE(::sigaction(SIGUSR2, &saved, nullptr) == 0);
}

}  // namespace
}  // namespace chorus::runtime
