// The real background loop with a no-progress bound (Note [No-progress bound] in
// runtime/progress/progress_watchdog.h), N simulated ranks over the in-process fabric. The fabric's
// collectives block, so every controller call and data-plane call is watched by the watchdog's
// thread (as MPI's blocking collectives are); a gate in front of one rank's calls stands for a
// rank that stopped answering. The terminator records the report and returns, and the test then
// opens the gate, so the job completes: what is checked is who reported what, and that a slow
// process set's work does not trip a rank outside the set. The real MPI paths:
// test/mpi/no_progress_controller_test.cc and test/mpi/no_progress_job.cc.
#include <atomic>
#include <barrier>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <catch2/catch.hpp>

#include "base/mutex.h"
#include "ops/no_progress.h"
#include "runtime/progress/progress_watchdog.h"
#include "runtime/progress/watched_backend.h"
#include "runtime/runtime.h"
#include "test/support/fast_cycle_config.h"
#include "test/support/in_process_fabric.h"
#include "test/support/runtime_ranks.h"

namespace chorus::runtime {
namespace {

// Calls wait here while the gate is closed (a rank that stopped answering).
class Gate {
 public:
  void Close() {
    MutexLock lock(&mu_);
    closed_ = true;
  }
  void Open() {
    {
      MutexLock lock(&mu_);
      closed_ = false;
    }
    cv_.notify_all();
  }
  void Pass() {
    MutexLock lock(&mu_);
    lock.Wait(cv_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !closed_; });
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Holds the data plane's large allreduces (at least `min_count` elements) at a gate and/or
// delays them (a slow link).
class GatedBackend : public ops::CollectiveBackend {
 public:
  GatedBackend(std::unique_ptr<ops::CollectiveBackend> inner, Gate* gate, int64_t min_count,
               absl::Duration delay, bool give_up)
      : inner_(std::move(inner)),
        gate_(gate),
        min_count_(min_count),
        delay_(delay),
        give_up_(give_up) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  absl::Status Run(const ops::CollectiveCall& call) override {
    const auto* allreduce = std::get_if<ops::AllreduceCall>(&call);
    if (allreduce != nullptr && allreduce->count >= min_count_) {
      if (gate_ != nullptr) gate_->Pass();
      absl::SleepFor(delay_);
      if (give_up_) {
        // As a transport that bounds its own waits gives up (UCX: ops/no_progress.h).
        ops::NoProgress what{absl::Seconds(3), "a UCX transfer", {}};
        for (int r = 0; r < size(); ++r) {
          if (r != rank()) what.peers.push_back(r);
        }
        return ops::NoProgressError(what, "the transport's own words");
      }
    }
    return inner_->Run(call);
  }

 private:
  std::unique_ptr<ops::CollectiveBackend> inner_;
  Gate* gate_;
  int64_t min_count_;
  absl::Duration delay_;
  bool give_up_;
};

// What one simulated rank's faults are.
struct RankFaults {
  Gate* control_gate = nullptr;  // in front of every control call
  Gate* data_gate = nullptr;     // in front of the data plane's large allreduces
  absl::Duration data_delay;     // added to each of them
  int64_t large = 4096;          // "large": at least this many elements
  bool give_up = false;          // the data plane fails them as a transport that gave up
};

// A controller over the fabric's, watched as an MPI controller is (every call blocks, so every
// call is a BlockingCall), with a terminator that records the report.
class WatchedController : public Controller {
 public:
  WatchedController(std::unique_ptr<Controller> inner, absl::Duration bound, RankFaults faults,
                    std::function<void(const std::string&)> terminate)
      : inner_(std::move(inner)), faults_(faults) {
    for (int r = 0; r < inner_->size(); ++r) {
      if (r != inner_->rank()) peers_.push_back(r);
    }
    ProgressWatchdog::Options options;
    options.bound = bound;
    options.rank = inner_->rank();
    options.terminate = std::move(terminate);
    watchdog_ = std::make_unique<ProgressWatchdog>(std::move(options));
  }
  const Topology& topology() const override { return inner_->topology(); }
  std::string name() const override { return inner_->name(); }
  absl::Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    ProgressWatchdog::BlockingCall watch = Watch("GatherToRoot");
    return inner_->GatherToRoot(mine, all);
  }
  absl::Status BroadcastFromRoot(std::string* data) override {
    ProgressWatchdog::BlockingCall watch = Watch("BroadcastFromRoot");
    return inner_->BroadcastFromRoot(data);
  }
  absl::Status AllreduceBitAnd(absl::Span<uint64_t> bits) override {
    ProgressWatchdog::BlockingCall watch = Watch("AllreduceBitAnd");
    return inner_->AllreduceBitAnd(bits);
  }
  absl::Status Barrier() override {
    ProgressWatchdog::BlockingCall watch = Watch("Barrier");
    return inner_->Barrier();
  }
  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> CreateBackend(
      absl::Span<const int32_t> ranks) override {
    absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> backend;
    {
      ProgressWatchdog::BlockingCall watch = Watch("CreateBackend");
      backend = inner_->CreateBackend(ranks);
    }
    if (!backend.ok() || *backend == nullptr) return backend;
    std::unique_ptr<ops::CollectiveBackend> watched(
        new WatchedBackend(*std::move(backend), watchdog_.get(),
                           std::vector<int32_t>(ranks.begin(), ranks.end()), inner_->rank()));
    // The gate and the delay come before the watched call: a rank held at the gate is not
    // inside a call (it stopped answering altogether), and a delayed piece is slow to start,
    // as on a slow link, on the rank's peers' clocks.
    return std::unique_ptr<ops::CollectiveBackend>(new GatedBackend(
        std::move(watched), faults_.data_gate, faults_.large, faults_.data_delay, faults_.give_up));
  }
  absl::StatusOr<std::unique_ptr<ops::CollectiveBackend>> CreateGroupBackend(
      absl::Span<const int32_t> group_of_rank) override {
    ProgressWatchdog::BlockingCall watch = Watch("CreateGroupBackend");
    return inner_->CreateGroupBackend(group_of_rank);
  }
  ProgressWatchdog* progress_watchdog() override { return watchdog_.get(); }

 private:
  // A rank held at the gate is not inside a call: it stopped answering altogether.
  ProgressWatchdog::BlockingCall Watch(const char* call) {
    if (faults_.control_gate != nullptr) faults_.control_gate->Pass();
    return ProgressWatchdog::BlockingCall(watchdog_.get(), call, peers_);
  }

  std::unique_ptr<Controller> inner_;
  RankFaults faults_;
  std::vector<int32_t> peers_;
  std::unique_ptr<ProgressWatchdog> watchdog_;  // last: stopped before the rest goes
};

// Each rank's reports (terminator calls), and a notification per rank for its first one.
struct Reports {
  explicit Reports(int n) : first(n) {
    for (auto& f : first) f = std::make_unique<absl::Notification>();
  }
  std::function<void(const std::string&)> For(int rank) {
    return [this, rank](const std::string& report) {
      {
        MutexLock lock(&mu);
        by_rank[rank].push_back(report);
      }
      first[rank]->Notify();
    };
  }
  std::vector<std::string> Of(int rank) {
    MutexLock lock(&mu);
    return by_rank[rank];
  }
  Mutex mu;
  std::map<int, std::vector<std::string>> by_rank ABSL_GUARDED_BY(mu);
  std::vector<std::unique_ptr<absl::Notification>> first;
};

using RankFn = testing::RuntimeRankFn;

// Runs `fn` on 3 ranks over watched controllers, then shuts them down. Returns start errors and
// failures seen on the rank threads (Catch2 checks only on this thread).
std::vector<std::string> RunWatched(absl::Duration bound, std::vector<RankFaults> faults,
                                    Reports* reports, const RankFn& fn,
                                    Config config = testing::FastCycleConfig()) {
  constexpr int kRanks = 3;
  return testing::RunRuntimeRanks(
      kRanks, fn, std::move(config), {},
      [&](int r, std::unique_ptr<Controller> controller) -> std::unique_ptr<Controller> {
        return std::make_unique<WatchedController>(std::move(controller), bound, faults[r],
                                                   reports->For(r));
      });
}

// Allreduces (sums) a tensor of `count` ones named `name`; "" when it gave `expect` everywhere.
std::string AllreduceOnes(Runtime& rt, const std::string& name, int64_t count, float expect,
                          int32_t set = kGlobalProcessSetId) {
  std::vector<float> data(static_cast<size_t>(count), 1.0f);
  OpRequest r;
  r.type = OpType::kAllreduce;
  r.name = name;
  r.process_set_id = set;
  r.input = {data.data(), DataType::kFloat32, {count}};
  absl::StatusOr<Handle> h = rt.Enqueue(r);
  if (!h.ok()) return h.status().ToString();
  const absl::Status st = rt.Wait(*h);
  if (!st.ok()) return st.ToString();
  for (float x : data) {
    if (x != expect) return absl::StrCat(name, ": got ", x, ", expected ", expect);
  }
  return "";
}

bool Matches(const std::string& text, const std::string& pattern) {
  return std::regex_search(text, std::regex(pattern));
}

TEST_CASE("A rank whose loop stops answering is reported by the ranks waiting to negotiate",
          "[no_progress]") {
  Gate gate;  // rank 2's loop stops at its next control call
  Reports reports(3);
  std::vector<RankFaults> faults(3);
  faults[2].control_gate = &gate;
  std::vector<std::string> failures(3);
  const auto errors =
      RunWatched(absl::Milliseconds(200), faults, &reports, [&](int rank, Runtime& rt) {
        failures[rank] = AllreduceOnes(rt, "warm", 8, 3.0f);
        if (rank == 2) {
          gate.Close();
          // Ranks 0 and 1 give up on it; then it answers again.
          reports.first[0]->WaitForNotification();
          reports.first[1]->WaitForNotification();
          gate.Open();
        }
        if (failures[rank].empty()) failures[rank] = AllreduceOnes(rt, "y", 8, 3.0f);
      });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(errors[r].empty());
    CHECK(failures[r].empty());
  }
  for (int r = 0; r < 2; ++r) {
    const std::vector<std::string> mine = reports.Of(r);
    REQUIRE(mine.size() == 1);
    INFO(mine[0]);
    CHECK(Matches(mine[0],
                  absl::StrCat("^rank ", r,
                               ": no progress for 200ms: [A-Za-z]+ has not completed, running the "
                               "cycle's negotiation(, no op pending on this rank|, 1 op pending "
                               "on this rank: allreduce 'y'); it waits on ranks ",
                               r == 0 ? "1, 2" : "0, 2", " ")));
  }
  CHECK(reports.Of(2).empty());
}

TEST_CASE("A rank stuck in the data plane is reported with the tensor the others run",
          "[no_progress]") {
  Gate gate;  // rank 2 does not enter the large allreduce
  gate.Close();
  Reports reports(3);
  std::vector<RankFaults> faults(3);
  faults[2].data_gate = &gate;
  std::vector<std::string> failures(3);
  const auto errors =
      RunWatched(absl::Milliseconds(200), faults, &reports, [&](int rank, Runtime& rt) {
        if (rank == 2) {
          std::thread opener([&] {
            reports.first[0]->WaitForNotification();
            reports.first[1]->WaitForNotification();
            gate.Open();
          });
          failures[rank] = AllreduceOnes(rt, "big", 100000, 3.0f);
          opener.join();
        } else {
          failures[rank] = AllreduceOnes(rt, "big", 100000, 3.0f);
        }
      });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(errors[r].empty());
    CHECK(failures[r].empty());
  }
  CHECK(reports.Of(2).empty());
  for (int r = 0; r < 2; ++r) {
    const std::vector<std::string> mine = reports.Of(r);
    REQUIRE(mine.size() == 1);
    INFO(mine[0]);
    CHECK(Matches(mine[0],
                  absl::StrCat("^rank ", r,
                               ": no progress for 200ms: the in-process data plane's Allreduce "
                               "has not completed, running allreduce of tensor 'big' \\(process "
                               "set 0\\); it waits on ranks ",
                               r == 0 ? "1, 2" : "0, 2", " ")));
  }
}

TEST_CASE("A transport that gave up by itself is reported as the watchdog reports",
          "[no_progress]") {
  // Every rank's data plane fails the large allreduce as UCX's does past its bound; the
  // watchdog's own bound is far away. Each rank's op fails with the watchdog's report, naming
  // the tensor it ran and the ranks the transport waited on.
  Reports reports(3);
  std::vector<RankFaults> faults(3);
  for (RankFaults& f : faults) f.give_up = true;
  std::vector<std::string> failures(3);
  const auto errors = RunWatched(absl::Hours(1), faults, &reports, [&](int rank, Runtime& rt) {
    failures[rank] = AllreduceOnes(rt, "big", 100000, 3.0f);
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << failures[r]);
    CHECK(errors[r].empty());
    CHECK(reports.Of(r).empty());
    const std::string others = r == 0 ? "1, 2" : r == 1 ? "0, 2" : "0, 1";
    CHECK(Matches(failures[r],
                  absl::StrCat("^UNAVAILABLE: rank ", r,
                               ": no progress for 3s: a UCX transfer has not completed, running "
                               "allreduce of tensor 'big' \\(process set 0\\); it waits on ranks ",
                               others,
                               " [^\\n]* Stopping chorus on this rank\\. If those ranks "
                               "are only slow, raise CHORUS_NO_PROGRESS_TIMEOUT_SECONDS")));
  }
}

TEST_CASE("A slow process set's work does not trip the rank outside it", "[no_progress]") {
  // Ranks 0 and 1 run an allreduce on their set whose 40 pieces each take 50 ms on rank 0 (2 s
  // in all, 4 bounds); rank 2 waits for them in its next negotiation.
  const absl::Duration bound = absl::Milliseconds(500);
  Config config = testing::FastCycleConfig();
  config.pipeline_chunk_bytes = 65536;
  Reports reports(3);
  std::vector<RankFaults> faults(3);
  faults[0].data_delay = absl::Milliseconds(50);
  faults[0].large = 1024;
  std::vector<std::string> failures(3);
  std::vector<absl::Duration> took(3);
  const auto errors = RunWatched(
      bound, faults, &reports,
      [&](int rank, Runtime& rt) {
        OpRequest add;
        add.type = OpType::kAddProcessSet;
        add.name = "set";
        add.process_set_ranks = {0, 1};
        absl::StatusOr<Handle> h = rt.Enqueue(add);
        if (!h.ok()) {
          failures[rank] = h.status().ToString();
          return;
        }
        absl::StatusOr<OpResult> added = rt.Release(*h);
        if (!added.ok() || !added->status.ok()) {
          failures[rank] = "add_process_set failed";
          return;
        }
        const absl::Time start = absl::Now();
        if (rank < 2) {
          // 40 pieces of 64 KiB.
          failures[rank] = AllreduceOnes(rt, "slow", 40 * 16384, 2.0f, added->process_set_id);
        }
        if (failures[rank].empty()) failures[rank] = AllreduceOnes(rt, "after", 8, 3.0f);
        took[rank] = absl::Now() - start;
      },
      config);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(errors[r].empty());
    CHECK(failures[r].empty());
    CHECK(reports.Of(r).empty());
  }
  // Rank 2 did wait longer than the bound (else this tests nothing): the delays guarantee it.
  CHECK(took[2] > 2 * bound);
}

}  // namespace
}  // namespace chorus::runtime
