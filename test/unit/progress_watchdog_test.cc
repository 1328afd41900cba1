// The no-progress bound (Note [No-progress bound] in runtime/progress/progress_watchdog.h): the
// report, the deadlines and their allowance for other process sets' work, the bound on the calls a
// response takes (MaxBlockingCalls, against the calls the executor really makes), and the
// watchdog's thread with a recording terminator. The real MPI paths are in
// test/mpi/no_progress_controller_test.cc and test/mpi/no_progress_job.cc.
#include "runtime/progress/progress_watchdog.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

#include "base/mutex.h"
#include "ops/hierarchical/hierarchical_backend.h"
#include "runtime/execute/executor.h"
#include "runtime/progress/watched_backend.h"
#include "runtime/submit/tensor_entry.h"

namespace chorus::runtime {
namespace {

using absl::StrContains;

TEST_CASE("The no-progress report names the rank, the call, the work, the peers and the variable",
          "[no_progress]") {
  NoProgressReport r;
  r.rank = 1;
  r.bound = absl::Seconds(3);
  r.call = "MPI_Iallreduce (the cycle's bit vector)";
  r.work = "the cycle's negotiation, 1 op pending on this rank: allreduce 'grad'";
  r.peers = {0, 2};
  const std::string text = DescribeNoProgress(r);
  INFO(text);
  CHECK(absl::StartsWith(text,
                         "rank 1: no progress for 3s: MPI_Iallreduce (the cycle's bit "
                         "vector) has not completed, running the cycle's negotiation"));
  CHECK(StrContains(text, "it waits on ranks 0, 2 (the transport does not say which"));
  CHECK(StrContains(text, "raise CHORUS_NO_PROGRESS_TIMEOUT_SECONDS (0 disables this check)"));
  CHECK_FALSE(StrContains(text, "allowed for"));

  r.peers = {2};
  CHECK(StrContains(DescribeNoProgress(r), "; it waits on rank 2. "));
  r.peers.clear();
  CHECK(StrContains(DescribeNoProgress(r), "it cannot tell which ranks it waits on"));
  r.allowance = absl::Seconds(12);
  CHECK(StrContains(DescribeNoProgress(r),
                    "no progress for 3s (+12s allowed for the work of process sets this rank is "
                    "not in)"));
}

TEST_CASE("A response's work names its op, its first tensors and its process set",
          "[no_progress]") {
  Response response;
  response.type = OpType::kAllreduce;
  response.process_set_id = 2;
  response.names = {"a"};
  CHECK(DescribeResponseWork(response) == "allreduce of tensor 'a' (process set 2)");
  response.names = {"a", "b", "c", "d", "e"};
  response.type = OpType::kBroadcast;
  CHECK(DescribeResponseWork(response) ==
        "broadcast of tensors 'a', 'b', 'c' and 2 more (process set 2)");
  CHECK(DescribeResponseWork(response, 5) ==
        "broadcast of tensors 'a', 'b', 'c', 'd', 'e' (process set 2)");
}

TEST_CASE("A call's deadline is the bound, plus the bound per call of other sets' members",
          "[no_progress]") {
  const absl::Time t = absl::FromUnixSeconds(1000);
  CHECK(NoProgressDeadline(t, absl::Seconds(30), 0) == t + absl::Seconds(30));
  CHECK(NoProgressDeadline(t, absl::Seconds(30), 3) == t + absl::Seconds(120));
  CHECK(NoProgressDeadline(t, absl::Seconds(30), -5) == t + absl::Seconds(30));
  // Far beyond any clock: never, rather than an overflow into the past.
  CHECK(NoProgressDeadline(t, absl::Seconds(30), INT64_MAX) == absl::InfiniteFuture());
}

// A data plane that counts its calls: with one rank it does what a one-rank set does; as rank
// `rank` of `size` it moves nothing (the calls are what counts), adding to `*shared`.
class CountingBackend : public ops::CollectiveBackend {
 public:
  CountingBackend() = default;
  CountingBackend(int rank, int size, int64_t* shared)
      : rank_(rank), size_(size), counter_(shared) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "counting"; }
  absl::Status Run(const ops::CollectiveCall& call) override { return ops::RunOn(*this, call); }
  absl::Status Allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp) {
    ++*counter_;
    if (size_ == 1 && send != recv) std::memcpy(recv, send, count * DataTypeSize(dtype));
    return absl::OkStatus();
  }
  absl::Status Allgatherv(const void* send, void* recv, absl::Span<const int64_t> bytes) {
    ++*counter_;
    if (size_ == 1 && send != recv) std::memcpy(recv, send, bytes[0]);
    return absl::OkStatus();
  }
  absl::Status Broadcast(void*, int64_t, int) {
    ++*counter_;
    return absl::OkStatus();
  }
  absl::Status Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                         absl::Span<const int64_t> send_offsets, void* recv,
                         absl::Span<const int64_t>, absl::Span<const int64_t> recv_offsets) {
    ++*counter_;
    if (size_ == 1) {
      std::memcpy(static_cast<char*>(recv) + recv_offsets[0],
                  static_cast<const char*>(send) + send_offsets[0], send_bytes[0]);
    }
    return absl::OkStatus();
  }
  absl::Status ReduceScatter(const void* send, void* recv, absl::Span<const int64_t> counts,
                             DataType dtype, ReduceOp) {
    ++*counter_;
    if (size_ == 1 && send != recv) std::memcpy(recv, send, counts[0] * DataTypeSize(dtype));
    return absl::OkStatus();
  }
  absl::Status Barrier() {
    ++*counter_;
    return absl::OkStatus();
  }
  int64_t calls = 0;

 private:
  int rank_ = 0;
  int size_ = 1;
  int64_t* counter_ = &calls;
};

// Runs `response` over float32 tensors of its shapes on one rank (`held[i]` false: a joined
// rank without that tensor) over `backend` and returns the calls `*counter` counted.
int64_t CallsOver(const Response& response, const SharedConfig& config,
                  const std::vector<bool>& held, ops::CollectiveBackend& backend,
                  const int64_t* counter) {
  std::vector<std::vector<float>> data;
  std::vector<std::unique_ptr<TensorEntry>> owned;
  std::vector<TensorEntry*> entries;
  for (size_t i = 0; i < response.names.size(); ++i) {
    if (!held[i]) {
      entries.push_back(nullptr);
      continue;
    }
    data.emplace_back(static_cast<size_t>(NumElements(response.shapes[i])), 1.0f);
    auto entry = std::make_unique<TensorEntry>();
    entry->op.type = response.type;
    entry->op.name = response.names[i];
    entry->op.input = {data.back().data(), DataType::kFloat32, response.shapes[i]};
    entry->request.name = response.names[i];
    entries.push_back(entry.get());
    owned.push_back(std::move(entry));
  }
  Executor executor(config);
  std::vector<OpResult> results;
  const absl::Status status = executor.Execute(response, entries, backend, &results);
  INFO(status.ToString());
  CHECK(status.ok());
  return *counter;
}

// As CallsOver, on a one-rank set; allreduces on a set of two ranks whose calls return at once
// (one rank alone reduces without any call: Executor::AllreduceAlone).
int64_t CallsOf(const Response& response, const SharedConfig& config,
                const std::vector<bool>& held) {
  int64_t calls = 0;
  CountingBackend backend(0, response.type == OpType::kAllreduce ? 2 : 1, &calls);
  return CallsOver(response, config, held, backend, &calls);
}

TEST_CASE("MaxBlockingCalls bounds the calls the executor makes for a response", "[no_progress]") {
  SharedConfig config;
  config.fusion_threshold_bytes = int64_t{64} << 20;
  config.pipeline_chunk_bytes = 4096;  // 1024 floats a piece
  config.inplace_min_bytes = 16384;    // 4096 floats and more: reduced in place

  struct Case {
    const char* what;
    OpType type;
    std::vector<int64_t> counts;
  };
  const std::vector<Case> cases = {
      {"one small allreduce", OpType::kAllreduce, {7}},
      {"packed small tensors", OpType::kAllreduce, {1000, 1000, 1000, 50, 0, 2000}},
      {"in place, many pieces", OpType::kAllreduce, {100000}},
      {"packed and in place", OpType::kAllreduce, {3000, 8000, 1025, 4096, 1, 20000}},
      {"one empty tensor", OpType::kAllreduce, {0}},
      {"broadcasts", OpType::kBroadcast, {100000, 3, 0}},
      {"allgathers", OpType::kAllgather, {10, 20000, 5}},
      {"one allgather", OpType::kAllgather, {30000}},
      {"alltoall", OpType::kAlltoall, {4000}},
      {"reducescatter", OpType::kReducescatter, {4000}},
      {"barrier", OpType::kBarrier, {}},
  };
  for (const Case& c : cases) {
    for (const bool joined : {false, true}) {
      if (joined && c.type != OpType::kAllreduce) continue;
      DYNAMIC_SECTION(c.what << (joined ? ", a joined rank" : "")) {
        Response response;
        response.type = c.type;
        response.dtype = DataType::kFloat32;
        std::vector<bool> held;
        for (size_t i = 0; i < c.counts.size(); ++i) {
          response.names.push_back("t" + std::to_string(i));
          response.shapes.push_back({c.counts[i]});
          response.first_dims.push_back(c.counts[i]);  // one rank
          held.push_back(!joined || i % 2 == 1);
        }
        if (c.type == OpType::kReducescatter) response.prescale_factor = 0.5;  // a scratch copy
        const int64_t bound = MaxBlockingCalls(response, config.pipeline_chunk_bytes);
        const int64_t made = CallsOf(response, config, held);
        INFO("made " << made << " calls, bound " << bound);
        CHECK(made <= bound);
        CHECK(bound <= made + 4 + static_cast<int64_t>(c.counts.size()) + 1);
      }
    }
  }
}

TEST_CASE("MaxBlockingCalls bounds the calls of a set running hierarchical collectives",
          "[no_progress][hierarchical]") {
  SharedConfig config;
  config.fusion_threshold_bytes = int64_t{64} << 20;
  config.pipeline_chunk_bytes = 4096;
  config.inplace_min_bytes = 16384;
  // Rank 0 of a 2 x 2 set, every call of its flat, host and cross backends counted.
  const std::vector<std::vector<int64_t>> batches = {
      {7}, {1000, 1000, 1000, 50, 0, 2000}, {100000}, {3000, 8000, 1025, 4096, 1, 20000}};
  for (const OpType type : {OpType::kAllreduce, OpType::kAllgather}) {
    for (const std::vector<int64_t>& counts : batches) {
      int64_t calls = 0;
      auto backend =
          ops::HierarchicalBackend::Create(std::make_unique<CountingBackend>(0, 4, &calls),
                                           std::make_unique<CountingBackend>(0, 2, &calls),
                                           std::make_unique<CountingBackend>(0, 2, &calls),
                                           ops::PlanHierarchy(std::vector<int32_t>{0, 0, 1, 1}));
      REQUIRE(backend.ok());
      (*backend)->set_modes({true, true});
      Response response;
      response.type = type;
      response.dtype = DataType::kFloat32;
      for (size_t i = 0; i < counts.size(); ++i) {
        response.names.push_back("t" + std::to_string(i));
        response.shapes.push_back({counts[i]});
      }
      for (size_t i = 0; i < counts.size(); ++i) {
        for (int r = 0; r < 4; ++r) response.first_dims.push_back(counts[i]);
      }
      const int64_t bound =
          MaxBlockingCalls(response, config.pipeline_chunk_bytes, /*hierarchical=*/true);
      const int64_t made =
          CallsOver(response, config, std::vector<bool>(counts.size(), true), **backend, &calls);
      INFO(OpTypeName(type) << " of " << counts.size() << " tensors: made " << made
                            << " calls, bound " << bound);
      CHECK(made <= bound);
      const ops::HierarchicalBackend::Counters& ran = (*backend)->counters();
      CHECK(ran.hierarchical_allreduces + ran.hierarchical_allgathers > 0);
    }
  }
}

// Records what a terminator is given; returns instead of ending the process.
struct Recorder {
  Mutex mu;
  std::vector<std::string> reports ABSL_GUARDED_BY(mu);
  absl::Notification first;
  std::function<void(const std::string&)> Terminator() {
    return [this](const std::string& report) {
      {
        MutexLock lock(&mu);
        reports.push_back(report);
      }
      if (!first.HasBeenNotified()) first.Notify();
    };
  }
  size_t count() {
    MutexLock lock(&mu);
    return reports.size();
  }
  std::string report(size_t i) {
    MutexLock lock(&mu);
    return reports.at(i);
  }
};

ProgressWatchdog::Options WatchOptions(Recorder& recorder, absl::Duration bound) {
  ProgressWatchdog::Options options;
  options.bound = bound;
  options.rank = 4;
  options.terminate = recorder.Terminator();
  options.check_every = absl::Milliseconds(10);
  return options;
}

TEST_CASE("Before Arm and after Disarm nothing is bounded", "[no_progress]") {
  Recorder recorder;
  ProgressWatchdog watchdog(WatchOptions(recorder, absl::Milliseconds(20)));
  CHECK(watchdog.WaitDeadline() == absl::InfiniteFuture());
  {
    ProgressWatchdog::BlockingCall call(&watchdog, "MPI_Barrier", {});
    absl::SleepFor(absl::Milliseconds(200));
  }
  watchdog.Arm([] { return std::string("work"); });
  watchdog.Disarm();
  CHECK(watchdog.WaitDeadline() == absl::InfiniteFuture());
  {
    ProgressWatchdog::BlockingCall call(&watchdog, "MPI_Barrier", {});
    absl::SleepFor(absl::Milliseconds(200));
  }
  CHECK(recorder.count() == 0);
}

TEST_CASE("An armed watchdog's wait deadline is the bound, longer after skipped work",
          "[no_progress]") {
  Recorder recorder;
  ProgressWatchdog watchdog(WatchOptions(recorder, absl::Seconds(30)));
  watchdog.Arm([] { return std::string("work"); });
  absl::Time before = absl::Now();
  absl::Time deadline = watchdog.WaitDeadline();
  CHECK(deadline >= before + absl::Seconds(30));
  CHECK(deadline <= absl::Now() + absl::Seconds(30));

  watchdog.AllowForeignCalls(3);
  watchdog.AllowForeignCalls(2);  // skipped responses add up until a call completes
  before = absl::Now();
  deadline = watchdog.WaitDeadline();
  CHECK(deadline >= before + absl::Seconds(180));
  CHECK(deadline <= absl::Now() + absl::Seconds(180));

  watchdog.Progressed();
  deadline = watchdog.WaitDeadline();
  CHECK(deadline <= absl::Now() + absl::Seconds(30));
  CHECK(recorder.count() == 0);
}

TEST_CASE("GiveUp reports the loop's work once and returns DeadlineExceeded", "[no_progress]") {
  Recorder recorder;
  ProgressWatchdog watchdog(WatchOptions(recorder, absl::Seconds(3)));
  watchdog.Arm([] { return std::string("allreduce of tensor 'x' (process set 0)"); });
  const std::vector<int32_t> peers = {0, 1, 2, 3};
  const absl::Status status = watchdog.GiveUp("MPI_Iallreduce", peers);
  CHECK(absl::IsDeadlineExceeded(status));
  REQUIRE(recorder.count() == 1);
  const std::string report = recorder.report(0);
  INFO(report);
  CHECK(absl::StartsWith(report,
                         "rank 4: no progress for 3s: MPI_Iallreduce has not "
                         "completed, running allreduce of tensor 'x' (process set 0); "
                         "it waits on ranks 0, 1, 2, 3"));
  CHECK(status.message() == report);
  // The job ends once: a second wait that gives up does not terminate again.
  CHECK(absl::IsDeadlineExceeded(watchdog.GiveUp("MPI_Ibcast", peers)));
  CHECK(recorder.count() == 1);
}

TEST_CASE("The loop's account is left before the job ends, with the same report", "[no_progress]") {
  Recorder recorder;
  // Bound 50 ms, checks every 10 ms: the wait between the account and the end is 50 ms.
  ProgressWatchdog watchdog(WatchOptions(recorder, absl::Milliseconds(50)));
  std::string account;
  size_t ended_before_account = 99;
  absl::Time accounted_at;
  watchdog.Arm([] { return std::string("work"); },
               [&](const std::string& report) {
                 account = report;
                 ended_before_account = recorder.count();
                 accounted_at = absl::Now();
               });
  const std::vector<int32_t> peers = {1};
  CHECK(absl::IsDeadlineExceeded(watchdog.GiveUp("MPI_Iallreduce", peers)));
  REQUIRE(recorder.count() == 1);
  CHECK(ended_before_account == 0);  // the account first
  CHECK(account == recorder.report(0));
  // Not a timing bound on the machine: the sleep happened between the two (at least 50 ms).
  CHECK(absl::Now() - accounted_at >= absl::Milliseconds(50));
}

TEST_CASE("A blocking call still open at its deadline ends the job from the watchdog's thread",
          "[no_progress]") {
  Recorder recorder;
  ProgressWatchdog watchdog(WatchOptions(recorder, absl::Milliseconds(100)));
  std::atomic<bool> in_call{false};
  std::atomic<bool> described_outside_call{false};  // Catch2 checks only on this thread
  watchdog.Arm([&] {
    // The loop thread is inside the call while the report is written.
    if (!in_call.load()) described_outside_call = true;
    return std::string("broadcast of tensor 'w' (process set 1)");
  });
  const std::vector<int32_t> peers = {3, 5};
  {
    ProgressWatchdog::BlockingCall call(&watchdog, "the MPI data plane's Broadcast", peers);
    in_call = true;
    // Stays in the call until the watchdog gave up (no wall-clock assertion: only that it does).
    REQUIRE(recorder.first.WaitForNotificationWithTimeout(absl::Seconds(60)));
    in_call = false;
  }
  CHECK_FALSE(described_outside_call.load());
  REQUIRE(recorder.count() == 1);
  const std::string report = recorder.report(0);
  INFO(report);
  CHECK(absl::StartsWith(report,
                         "rank 4: no progress for 100ms: the MPI data plane's Broadcast "
                         "has not completed, running broadcast of tensor 'w' (process "
                         "set 1); it waits on ranks 3, 5"));
}

TEST_CASE(
    "While the loop is inside a call, the watchdog's thread asks it, naming the call; a "
    "waiting call is never ended by the watchdog",
    "[no_progress]") {
  Recorder recorder;
  // Bound 50 ms: the waiting call below lasts many bounds (its own wait keeps its deadline).
  ProgressWatchdog watchdog(WatchOptions(recorder, absl::Milliseconds(50)));
  Mutex mu;
  std::vector<std::string> asked;  // the calls while_inside was told of, on the watchdog's thread
  std::atomic<bool> in_call{false};
  std::atomic<bool> asked_outside_call{false};
  std::atomic<bool> open_for_grows{true};  // a call's open time only grows from check to check
  absl::Duration last_open_for = absl::ZeroDuration();
  watchdog.Arm([] { return std::string("work"); }, nullptr,
               [&](absl::string_view call, absl::Duration open_for) {
                 if (!in_call.load()) asked_outside_call = true;
                 MutexLock lock(&mu);
                 if (!asked.empty() && asked.back() == call && open_for < last_open_for) {
                   open_for_grows = false;
                 }
                 last_open_for = open_for;
                 asked.emplace_back(call);
               });
  const auto count = [&] {
    MutexLock lock(&mu);
    return asked.size();
  };
  in_call = true;  // before the bracket opens and after it closes: it covers the whole call
  {
    ProgressWatchdog::WaitingCall wait(&watchdog, "MPI_Iallreduce (the cycle's bit vector)");
    // Several checks (every 10 ms) and several bounds pass inside the wait.
    while (count() < 5) absl::SleepFor(absl::Milliseconds(5));
    absl::SleepFor(absl::Milliseconds(200));
  }
  in_call = false;
  const size_t after_wait = count();
  absl::SleepFor(absl::Milliseconds(100));  // idle: nobody is asked
  CHECK(count() == after_wait);
  in_call = true;
  {
    ProgressWatchdog::BlockingCall call(&watchdog, "the MPI data plane's Allreduce", {});
    while (count() == after_wait) absl::SleepFor(absl::Milliseconds(5));
  }
  in_call = false;
  watchdog.Disarm();
  CHECK_FALSE(asked_outside_call.load());
  CHECK(open_for_grows.load());
  CHECK(recorder.count() <= 1);  // the blocking call may have passed its 50 ms bound
  MutexLock lock(&mu);
  CHECK(asked.front() == "MPI_Iallreduce (the cycle's bit vector)");
  CHECK(asked.back() == "the MPI data plane's Allreduce");
  // The waiting call, open for far longer than the bound, tripped nothing.
  if (recorder.count() == 1) {
    CHECK(absl::StrContains(recorder.report(0), "the MPI data plane's Allreduce"));
  }
}

TEST_CASE("Calls that each complete within the bound never trip it, however long the job idles",
          "[no_progress]") {
  Recorder recorder;
  const absl::Duration bound = absl::Milliseconds(400);
  ProgressWatchdog watchdog(WatchOptions(recorder, bound));
  watchdog.Arm([] { return std::string("work"); });
  const std::vector<int32_t> peers = {1};
  // Short calls, and idle gaps between them (a loop asleep between cycles), for several bounds.
  const absl::Time start = absl::Now();
  while (absl::Now() - start < 3 * bound) {
    {
      ProgressWatchdog::BlockingCall call(&watchdog, "the MPI data plane's Allreduce", peers);
      absl::SleepFor(absl::Milliseconds(2));
    }
    absl::Time deadline = watchdog.WaitDeadline();  // a negotiation wait, completing at once
    CHECK(deadline > absl::Now());
    watchdog.Progressed();
    absl::SleepFor(absl::Milliseconds(60));
  }
  watchdog.Disarm();
  CHECK(recorder.count() == 0);
}

TEST_CASE("A call after skipped work may last the allowance; the allowance is spent by it",
          "[no_progress]") {
  Recorder recorder;
  const absl::Duration bound = absl::Milliseconds(50);
  ProgressWatchdog watchdog(WatchOptions(recorder, bound));
  watchdog.Arm([] { return std::string("work"); });
  const std::vector<int32_t> peers = {0};
  watchdog.AllowForeignCalls(100000);  // members of another set run a long response
  {
    ProgressWatchdog::BlockingCall call(&watchdog, "the MPI data plane's Allreduce", peers);
    absl::SleepFor(10 * bound);
  }
  CHECK(recorder.count() == 0);
  // The allowance is spent: the next call has the plain bound.
  {
    ProgressWatchdog::BlockingCall call(&watchdog, "the MPI data plane's Allreduce", peers);
    REQUIRE(recorder.first.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  INFO(recorder.report(0));
  CHECK(absl::StartsWith(recorder.report(0), "rank 4: no progress for 50ms: "));
}

TEST_CASE("A watched backend brackets every call with the set's other ranks as peers",
          "[no_progress]") {
  // Its barrier returns only once the watchdog gave up: a peer that never arrives.
  struct StuckBarrier : CountingBackend {
    explicit StuckBarrier(absl::Notification* released) : released(released) {}
    absl::Status Run(const ops::CollectiveCall& call) override {
      if (!std::holds_alternative<ops::BarrierCall>(call)) return CountingBackend::Run(call);
      ++calls;
      released->WaitForNotification();
      return absl::OkStatus();
    }
    absl::Notification* released;
  };
  Recorder recorder;
  ProgressWatchdog watchdog(WatchOptions(recorder, absl::Milliseconds(100)));
  watchdog.Arm([] { return std::string("barrier of tensor 'b' (process set 3)"); });
  auto inner = std::make_unique<StuckBarrier>(&recorder.first);
  CountingBackend* counting = inner.get();
  WatchedBackend watched(std::move(inner), &watchdog, {1, 4, 6}, 4);
  CHECK(watched.name() == "counting");
  CHECK(watched.size() == 1);
  float x[4] = {1, 2, 3, 4};
  CHECK(watched.Allreduce(x, x, 4, DataType::kFloat32, ReduceOp::kSum).ok());
  CHECK(watched.Broadcast(x, sizeof(x), 0).ok());
  CHECK(recorder.count() == 0);
  CHECK(watched.Barrier().ok());
  CHECK(counting->calls == 3);
  REQUIRE(recorder.count() == 1);
  INFO(recorder.report(0));
  CHECK(absl::StartsWith(recorder.report(0),
                         "rank 4: no progress for 100ms: the counting data plane's Barrier has not "
                         "completed, running barrier of tensor 'b' (process set 3); it waits on "
                         "ranks 1, 6"));
}

}  // namespace
}  // namespace chorus::runtime
