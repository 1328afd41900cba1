// MPI-tier tests of the runtime's features beyond single collectives, through the public API
// (chorus/chorus.h): join with uneven step counts, process sets (negotiated and created at
// init), Shutdown and re-Init, the topology, and the response cache across steps.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>
#include <mpi.h>

#include "chorus/chorus.h"
#include "chorus/types.h"
#include "test/mpi/test_util.h"

namespace chorus::mpitest {
namespace {

// The members {0, size-1} of the small process set the tests create (ascending, no duplicate).
std::vector<int32_t> EndRanks(const Topology& topo) {
  if (topo.size == 1) return {0};
  return {0, topo.size - 1};
}

bool Contains(const std::vector<int32_t>& ranks, int32_t rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// One long-lived thread that runs what it is given, in order: calls made from it keep that
// thread's own reference to the runtime (Note [Per-thread runtime reference] in
// runtime/api.cc) across the main thread's Shutdown and Init.
class OtherThread {
 public:
  OtherThread() : thread_([this] { Loop(); }) {}
  ~OtherThread() {
    Post(nullptr);
    thread_.join();
  }
  // Runs `f` there and returns its result.
  template <typename F>
  auto Run(F f) -> decltype(f()) {
    auto task = std::make_shared<std::packaged_task<decltype(f())()>>(std::move(f));
    auto result = task->get_future();
    Post([task] { (*task)(); });
    return result.get();
  }

 private:
  void Post(std::function<void()> work) {
    std::lock_guard<std::mutex> lock(mu_);
    work_.push_back(std::move(work));
    cv_.notify_one();
  }
  void Loop() {
    while (true) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !work_.empty(); });
        work = std::move(work_.front());
        work_.pop_front();
      }
      if (!work) return;
      work();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  std::thread thread_;
};

// The status of an int32 sum allreduce of `name` run from the calling thread, or a mismatch.
std::string SumFromThisThread(const std::string& name, const Topology& topo) {
  Tensor t(DataType::kInt32, {5});
  t.Fill([&](int64_t i) { return SumValue(DataType::kInt32, topo.rank, i); });
  const OpResult r = RunOp(AllreduceRequest(name, t));
  if (!r.status.ok()) return r.status.ToString();
  return t.Mismatch([&](int64_t i) {
    double s = 0;
    for (int q = 0; q < topo.size; ++q) s += SumValue(DataType::kInt32, q, i);
    return s;
  });
}

TEST_CASE("topology matches MPI on one host", "[mpi][topology]") {
  const Topology topo = InitAndTopology();
  int rank = -1;
  int size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(topo.rank == rank);
  CHECK(topo.size == size);
  CHECK(topo.local_rank == rank);
  CHECK(topo.local_size == size);
  CHECK(topo.cross_rank == 0);
  CHECK(topo.cross_size == 1);
  CHECK(topo.is_homogeneous);
  CHECK(IsInitialized());
  CHECK(Init().ok());  // a second Init is a no-op
  absl::StatusOr<Topology> again = GetTopology();
  REQUIRE(again.ok());
  CHECK(again->rank == rank);
  CHECK(again->size == size);
}

TEST_CASE("join: rank r runs r+1 steps, joined ranks contribute zeros", "[mpi][join]") {
  const Topology topo = InitAndTopology();
  // Step k is run by ranks k..size-1; ranks below k have joined by then.
  auto expected = [&](DataType dtype, int step, int64_t i) {
    double s = 0;
    for (int r = step; r < topo.size; ++r) s += SumValue(dtype, r, i) + step;
    return s;
  };
  for (int step = 0; step <= topo.rank; ++step) {
    INFO("rank " << topo.rank << " step " << step);
    Tensor a(DataType::kInt32, {6});
    Tensor b(DataType::kFloat32, {3, 2});
    a.Fill([&](int64_t i) { return SumValue(DataType::kInt32, topo.rank, i) + step; });
    b.Fill([&](int64_t i) { return SumValue(DataType::kFloat32, topo.rank, i) + step; });
    std::vector<OpRequest> requests;
    requests.push_back(AllreduceRequest("features.join.int." + std::to_string(step), a));
    requests.push_back(AllreduceRequest("features.join.float." + std::to_string(step), b));
    const std::vector<OpResult> results =
        ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/100 + step));
    for (const OpResult& r : results) {
      INFO(r.status.ToString());
      CHECK(r.status.ok());
    }
    CHECK(a.Mismatch([&](int64_t i) { return expected(DataType::kInt32, step, i); }) == "");
    CHECK(b.Mismatch([&](int64_t i) { return expected(DataType::kFloat32, step, i); }) == "");
  }

  OpRequest join;
  join.type = OpType::kJoin;
  join.name = "features.join";
  const OpResult r = RunOp(std::move(join));
  INFO(r.status.ToString());
  CHECK(r.status.ok());
  // The last rank cannot join before its last step, which waits for every other rank to join.
  CHECK(r.last_joined_rank == topo.size - 1);

  CheckRuntimeStillWorks("features.join.after", topo);
}

TEST_CASE("process sets: add, use, remove", "[mpi][process_set]") {
  const Topology topo = InitAndTopology();
  const std::vector<int32_t> members = EndRanks(topo);
  const bool member = Contains(members, topo.rank);

  OpRequest add;
  add.type = OpType::kAddProcessSet;
  add.name = "features.pset.add.1";
  add.process_set_ranks = members;
  const OpResult added = RunOp(std::move(add));
  INFO("add: " << added.status.ToString());
  CHECK(added.status.ok());
  const int32_t id = added.process_set_id;
  CHECK(id > kGlobalProcessSetId);

  // Every rank got the same id.
  Tensor ids_min(DataType::kInt32, {1});
  Tensor ids_max(DataType::kInt32, {1});
  ids_min.Fill([&](int64_t) { return id; });
  ids_max.Fill([&](int64_t) { return id; });
  std::vector<OpRequest> agree;
  agree.push_back(AllreduceRequest("features.pset.id.min", ids_min, ReduceOp::kMin));
  agree.push_back(AllreduceRequest("features.pset.id.max", ids_max, ReduceOp::kMax));
  for (const OpResult& r : ReleaseAll(EnqueueShuffled(std::move(agree), topo.rank, 200))) {
    CHECK(r.status.ok());
  }
  CHECK(ids_min.Get(0) == id);
  CHECK(ids_max.Get(0) == id);

  if (member) {
    const int set_rank =
        static_cast<int>(std::find(members.begin(), members.end(), topo.rank) - members.begin());
    const int set_size = static_cast<int>(members.size());
    Tensor sum(DataType::kFloat64, {9});
    sum.Fill([&](int64_t i) { return SumValue(DataType::kFloat64, topo.rank, i); });
    Tensor bcast(DataType::kInt8, {4});  // root: world rank size-1 (the set's last rank)
    bcast.Fill([&](int64_t i) { return MoveValue(DataType::kInt8, topo.rank, i); });
    Tensor gather(DataType::kInt32, {set_rank + 1});
    gather.Fill([&](int64_t i) { return MoveValue(DataType::kInt32, topo.rank, i); });

    std::vector<OpRequest> requests;
    requests.push_back(AllreduceRequest("features.pset.sum", sum));
    requests.push_back(MakeRequest(OpType::kBroadcast, "features.pset.bcast", bcast.view()));
    requests.back().root_rank = members.back();  // a world rank, as in Horovod
    requests.push_back(MakeRequest(OpType::kAllgather, "features.pset.gather", gather.view()));
    for (OpRequest& req : requests) req.process_set_id = id;
    // A root outside the set is refused by every member before anything is negotiated.
    Tensor stray(DataType::kInt8, {4});
    OpRequest outside =
        MakeRequest(OpType::kBroadcast, "features.pset.bcast.outside", stray.view());
    outside.process_set_id = id;
    outside.root_rank = topo.size > 2 ? 1 : topo.size;  // rank 1 is outside {0, size-1}
    ExpectRejected(std::move(outside), absl::StatusCode::kInvalidArgument);
    const std::vector<OpResult> results =
        ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/201));
    for (const OpResult& r : results) {
      INFO(r.status.ToString());
      CHECK(r.status.ok());
    }
    CHECK(sum.Mismatch([&](int64_t i) {
      double s = 0;
      for (int32_t m : members) s += SumValue(DataType::kFloat64, m, i);
      return s;
    }) == "");
    CHECK(bcast.Mismatch(
              [&](int64_t i) { return MoveValue(DataType::kInt8, members.back(), i); }) == "");
    std::vector<std::pair<int, int64_t>> source;
    for (int q = 0; q < set_size; ++q) {
      for (int64_t i = 0; i < q + 1; ++i) source.emplace_back(members[q], i);
    }
    CHECK(results[2].output_shape == std::vector<int64_t>{static_cast<int64_t>(source.size())});
    CHECK(Mismatch(OutputData(results[2]), DataType::kInt32, static_cast<int64_t>(source.size()),
                   [&](int64_t i) {
                     return MoveValue(DataType::kInt32, source[i].first, source[i].second);
                   }) == "");
  }

  // Removal is collective over every rank, like the addition.
  OpRequest remove;
  remove.type = OpType::kRemoveProcessSet;
  remove.name = "features.pset.remove.1";
  remove.process_set_id = id;
  const OpResult removed = RunOp(std::move(remove));
  INFO("remove: " << removed.status.ToString());
  CHECK(removed.status.ok());

  // The removed set is gone.
  Tensor t(DataType::kInt32, {2});
  OpRequest stale = AllreduceRequest("features.pset.stale", t);
  stale.process_set_id = id;
  ExpectRejected(std::move(stale), absl::StatusCode::kOk);
  CheckRuntimeStillWorks("features.pset.after", topo);
}

TEST_CASE("shutdown and re-init: pending ops abort, FailedPrecondition in between, init sets",
          "[mpi][shutdown]") {
  const Topology topo = InitAndTopology();
  CheckRuntimeStillWorks("features.reinit.before", topo);
  OtherThread other;  // uses the runtime before the Shutdown, then again after the re-Init
  CHECK(other.Run([&] { return SumFromThisThread("features.reinit.other.before", topo); }) == "");

  // An op only rank 0 submits cannot complete: Shutdown must abort it.
  auto seen = std::make_shared<Seen>();
  Handle orphan = kNoHandle;
  Tensor orphan_data(DataType::kFloat32, {3});
  if (topo.rank == 0) {
    absl::StatusOr<Handle> h =
        Enqueue(AllreduceRequest("features.reinit.orphan", orphan_data), [seen](const OpResult& r) {
          seen->status = r.status;
          seen->calls.fetch_add(1, std::memory_order_release);
        });
    INFO(h.status().ToString());
    CHECK(h.ok());
    if (h.ok()) orphan = *h;
  }
  // Any rank's Shutdown stops every rank: the others wait until rank 0's orphan is queued,
  // or their shutdown could close rank 0's queue before it enqueues.
  MPI_Barrier(MPI_COMM_WORLD);
  CHORUS_CHECK_OK(Shutdown());
  if (orphan != kNoHandle) {
    CHECK(seen->calls.load(std::memory_order_acquire) == 1);
    INFO("orphan: " << seen->status.ToString());
    CHECK(seen->status.code() == absl::StatusCode::kAborted);
  }

  // Not initialised: every entry point says so, and Shutdown is a no-op.
  CHECK_FALSE(IsInitialized());
  CHECK(GetTopology().status().code() == absl::StatusCode::kFailedPrecondition);
  Tensor t(DataType::kInt32, {2});
  CHECK(Enqueue(AllreduceRequest("features.reinit.down", t)).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  std::vector<OpRequest> group;
  group.push_back(AllreduceRequest("features.reinit.down.group", t));
  CHECK(EnqueueGroup(std::move(group)).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(other.Run([] { return GetTopology().status().code(); }) ==
        absl::StatusCode::kFailedPrecondition);
  CHORUS_CHECK_OK(Shutdown());

  // Init again, with a process set created at init (id 1).
  InitOptions options;
  options.process_sets = {EndRanks(topo)};
  CHORUS_CHECK_OK(Init(options));
  REQUIRE(IsInitialized());
  absl::StatusOr<Topology> topo2 = GetTopology();
  REQUIRE(topo2.ok());
  CHECK(topo2->rank == topo.rank);
  CHECK(topo2->size == topo.size);
  CheckRuntimeStillWorks("features.reinit.after", topo);
  CHECK(other.Run([&] { return SumFromThisThread("features.reinit.other.after", topo); }) == "");
  if (Contains(EndRanks(topo), topo.rank)) {
    Tensor s(DataType::kInt64, {5});
    s.Fill([&](int64_t i) { return SumValue(DataType::kInt64, topo.rank, i); });
    OpRequest req = AllreduceRequest("features.reinit.set1", s);
    req.process_set_id = 1;
    const OpResult r = RunOp(std::move(req));
    INFO(r.status.ToString());
    CHECK(r.status.ok());
    CHECK(s.Mismatch([&](int64_t i) {
      double sum = 0;
      for (int32_t m : EndRanks(topo)) sum += SumValue(DataType::kInt64, m, i);
      return sum;
    }) == "");
  }
  // Shutdown on any rank stops every rank (as in Horovod): the ranks outside the set must not
  // shut down before the members are done, so everyone meets once more.
  CheckRuntimeStillWorks("features.reinit.after_set", topo);

  // Back to the default configuration: the init-time set is gone.
  CHORUS_CHECK_OK(Shutdown());
  CHORUS_CHECK_OK(Init());
  REQUIRE(IsInitialized());
  OpRequest stale = AllreduceRequest("features.reinit.stale", t);
  stale.process_set_id = 1;
  ExpectRejected(std::move(stale), absl::StatusCode::kOk);
  CheckRuntimeStillWorks("features.reinit.final", topo);
}

TEST_CASE("response cache: the same names over many steps, then changed parameters",
          "[mpi][cache]") {
  const Topology topo = InitAndTopology();
  struct Spec {
    DataType dtype;
    std::vector<int64_t> shape;
    ReduceOp op;
    bool out_of_place;
  };
  const std::vector<Spec> steady = {
      {DataType::kFloat32, {5}, ReduceOp::kSum, false},
      {DataType::kInt32, {3, 2}, ReduceOp::kSum, false},
      {DataType::kFloat64, {7}, ReduceOp::kMax, false},
      {DataType::kInt64, {1}, ReduceOp::kSum, false},
  };
  // The same names with a new shape, dtype, op and output placement.
  const std::vector<Spec> changed = {
      {DataType::kFloat32, {9}, ReduceOp::kSum, false},
      {DataType::kFloat32, {3, 2}, ReduceOp::kSum, false},
      {DataType::kFloat64, {7}, ReduceOp::kMin, false},
      {DataType::kInt64, {1}, ReduceOp::kSum, true},
  };
  constexpr int kSteadySteps = 50;
  constexpr int kChangedSteps = 3;
  constexpr int kBackSteps = 2;

  int failures = 0;
  std::string first;
  for (int step = 0; step < kSteadySteps + kChangedSteps + kBackSteps; ++step) {
    const bool is_changed = step >= kSteadySteps && step < kSteadySteps + kChangedSteps;
    const std::vector<Spec>& specs = is_changed ? changed : steady;
    auto value = [&](const Spec& s, int r, int64_t i) {
      return SumValue(s.dtype, r, i) * (s.op == ReduceOp::kSum ? 1 : r - 1) + step % 5;
    };
    std::vector<std::unique_ptr<Tensor>> ins, outs;
    std::vector<OpRequest> requests;
    for (size_t k = 0; k < specs.size(); ++k) {
      ins.push_back(std::make_unique<Tensor>(specs[k].dtype, specs[k].shape));
      ins[k]->Fill([&](int64_t i) { return value(specs[k], topo.rank, i); });
      requests.push_back(
          AllreduceRequest("features.cache.t" + std::to_string(k), *ins[k], specs[k].op));
      outs.push_back(specs[k].out_of_place
                         ? std::make_unique<Tensor>(specs[k].dtype, specs[k].shape)
                         : nullptr);
      if (outs[k]) requests.back().output = outs[k]->view();
    }
    const std::vector<OpResult> results =
        ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/300 + step));
    for (size_t k = 0; k < specs.size(); ++k) {
      const Tensor& res = outs[k] ? *outs[k] : *ins[k];
      std::string m = results[k].status.ok() ? "" : results[k].status.ToString();
      if (m.empty()) {
        m = res.Mismatch([&](int64_t i) {
          double acc = value(specs[k], 0, i);
          for (int r = 1; r < topo.size; ++r) {
            const double v = value(specs[k], r, i);
            acc = specs[k].op == ReduceOp::kSum   ? acc + v
                  : specs[k].op == ReduceOp::kMax ? std::max(acc, v)
                                                  : std::min(acc, v);
          }
          return acc;
        });
      }
      if (!m.empty() && failures++ == 0) {
        first = "step " + std::to_string(step) + " tensor " + std::to_string(k) + ": " + m;
      }
    }
  }
  INFO(first);
  CHECK(failures == 0);
}

}  // namespace
}  // namespace chorus::mpitest
