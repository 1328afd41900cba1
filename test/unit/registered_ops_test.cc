// Registered ops (Note [Registered ops] in runtime/submit/op_slots.h) across simulated ranks:
// results equal to the general path's, the cache fast path taken through the slots, the rules of a
// slot (one op at a time, its name shared with Enqueue), and failures delivered to them.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

#include "runtime/runtime.h"
#include "runtime/submit/op_slots.h"
#include "test/support/fast_cycle_config.h"
#include "test/support/rank_failures.h"
#include "test/support/runtime_ranks.h"
#include "test/support/sanitized.h"

namespace chorus::runtime {
namespace {

using testing::Failures;

using testing::AllreduceOf;

// An unnamed barrier (every rank's k-th gets the same name).
void Barrier(Runtime& rt, Failures& f, int rank) {
  OpRequest r;
  r.type = OpType::kBarrier;
  absl::StatusOr<Handle> b = rt.Enqueue(r);
  f.Check(b.ok() && rt.Wait(*b).ok(), rank, "barrier");
}

// The value rank `rank` holds at element `i` of tensor `t` in step `step`.
float Value(int rank, int t, int step, size_t i) {
  return static_cast<float>((rank + 1) * 1000 + t * 10 + step + static_cast<int>(i % 7));
}

// The average of Value over `n` ranks.
float Average(int n, int t, int step, size_t i) {
  float sum = 0;
  for (int r = 0; r < n; ++r) sum += Value(r, t, step, i);
  return sum / static_cast<float>(n);
}

TEST_CASE("registered allreduces over many steps: every rank gets the average, from the cache",
          "[runtime][registered]") {
  const int n = GENERATE(1, 2, 3);
  constexpr int kTensors = 50;
  constexpr int kSteps = 12;
  Failures f;
  auto errors = testing::RunRuntimeRanks(n, [&](int rank, Runtime& rt) {
    std::vector<std::vector<float>> data(kTensors);
    std::vector<OpSlot> slots(kTensors);
    for (int t = 0; t < kTensors; ++t) {
      // Sizes from a few elements (packed) to in-place pieces.
      data[t].resize(static_cast<size_t>(1 + t * t * 29));
      absl::StatusOr<OpSlot> slot =
          rt.RegisterOp(AllreduceOf(absl::StrCat("grad.", t), data[t], ReduceOp::kAverage));
      f.Check(slot.ok(), rank, slot.status().ToString());
      slots[t] = slot.ok() ? *slot : -1;
    }
    std::vector<int> order(kTensors);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 shuffle(static_cast<unsigned>(rank * 31 + 7));
    int64_t hits_after_first = 0;
    for (int step = 0; step < kSteps; ++step) {
      for (int t = 0; t < kTensors; ++t) {
        for (size_t i = 0; i < data[t].size(); ++i) data[t][i] = Value(rank, t, step, i);
      }
      // Every rank submits in its own order.
      std::shuffle(order.begin(), order.end(), shuffle);
      std::vector<Handle> handles(kTensors);
      for (int t : order) {
        absl::StatusOr<Handle> h = rt.Submit(slots[t], SubmitArgs{data[t].data()});
        f.Check(h.ok(), rank, h.status().ToString());
        f.Check(!h.ok() || IsSlotHandle(*h), rank, "not a registered op's handle");
        handles[t] = h.ok() ? *h : 0;
      }
      const int64_t hits_before = rt.TEST_counters().cache_hits.load();
      for (int t = 0; t < kTensors; ++t) {
        absl::StatusOr<OpResult> r = rt.Release(handles[t]);
        f.Check(r.ok() && r->status.ok(), rank,
                absl::StrCat("step ", step, " tensor ", t, ": ",
                             r.ok() ? r->status.ToString() : r.status().ToString()));
      }
      if (step > 0) hits_after_first += rt.TEST_counters().cache_hits.load() - hits_before;
      for (int t = 0; t < kTensors; ++t) {
        for (size_t i = 0; i < data[t].size(); ++i) {
          if (data[t][i] != Average(n, t, step, i)) {
            f.Check(false, rank,
                    absl::StrCat("step ", step, " grad.", t, "[", i, "] = ", data[t][i],
                                 ", expected ", Average(n, t, step, i)));
            break;
          }
        }
      }
    }
    // After the first step every op is answered by the cache (hits counted after the step's
    // releases began may belong to the next step on another rank: at least all but one
    // step's worth).
    f.Check(hits_after_first >= static_cast<int64_t>(kTensors) * (kSteps - 2), rank,
            absl::StrCat(hits_after_first, " cache hits after the first step"));
    for (OpSlot s : slots) f.Check(rt.UnregisterOp(s).ok(), rank, "unregister");
  });
  for (const std::string& e : errors) CHECK(e.empty());
  f.Report();
}

TEST_CASE("registered and enqueued ops in one step, in any order, agree with each other",
          "[runtime][registered]") {
  const int n = GENERATE(2, 3);
  constexpr int kTensors = 30;
  Failures f;
  auto errors = testing::RunRuntimeRanks(n, [&](int rank, Runtime& rt) {
    std::vector<std::vector<float>> data(kTensors);
    std::vector<OpSlot> slots(kTensors, -1);
    for (int t = 0; t < kTensors; ++t) {
      data[t].resize(static_cast<size_t>(3 + t));
      // Half of the tensors are registered on this rank, a different half on each rank: the
      // coordinator and the cache see the same requests either way.
      if ((t + rank) % 2 == 0) {
        absl::StatusOr<OpSlot> slot =
            rt.RegisterOp(AllreduceOf(absl::StrCat("mixed.", t), data[t], ReduceOp::kSum));
        f.Check(slot.ok(), rank, slot.status().ToString());
        if (slot.ok()) slots[t] = *slot;
      }
    }
    std::mt19937 shuffle(static_cast<unsigned>(rank + 100));
    std::vector<int> order(kTensors);
    std::iota(order.begin(), order.end(), 0);
    for (int step = 0; step < 6; ++step) {
      for (int t = 0; t < kTensors; ++t) {
        for (size_t i = 0; i < data[t].size(); ++i) data[t][i] = Value(rank, t, step, i);
      }
      std::shuffle(order.begin(), order.end(), shuffle);
      std::vector<Handle> handles(kTensors);
      for (int t : order) {
        absl::StatusOr<Handle> h =
            slots[t] >= 0
                ? rt.Submit(slots[t], SubmitArgs{data[t].data()})
                : rt.Enqueue(AllreduceOf(absl::StrCat("mixed.", t), data[t], ReduceOp::kSum));
        f.Check(h.ok(), rank, h.status().ToString());
        handles[t] = h.ok() ? *h : 0;
      }
      for (int t = 0; t < kTensors; ++t) {
        absl::Status st = rt.Wait(handles[t]);
        f.Check(st.ok(), rank, st.ToString());
        f.Check(rt.Release(handles[t]).ok(), rank, "release");
        const float want = Average(n, t, step, 0) * static_cast<float>(n);
        f.Check(data[t][0] == want, rank,
                absl::StrCat("mixed.", t, " = ", data[t][0], ", expected ", want));
      }
    }
  });
  for (const std::string& e : errors) CHECK(e.empty());
  f.Report();
}

TEST_CASE("a slot holds one op at a time and shares its name with Enqueue",
          "[runtime][registered]") {
  Failures f;
  auto errors = testing::RunRuntimeRanks(2, [&](int rank, Runtime& rt) {
    std::vector<float> a(8, 1.0f), out(8, 0.0f);
    absl::StatusOr<OpSlot> slot = rt.RegisterOp(AllreduceOf("rules.a", a, ReduceOp::kSum));
    f.Check(slot.ok(), rank, slot.status().ToString());
    if (!slot.ok()) return;

    // Registration is refused for a second op of the name and for other op types.
    absl::StatusOr<OpSlot> again = rt.RegisterOp(AllreduceOf("rules.a", a, ReduceOp::kSum));
    f.Check(absl::IsInvalidArgument(again.status()), rank, again.status().ToString());
    OpRequest bcast = AllreduceOf("rules.b", a, ReduceOp::kSum);
    bcast.type = OpType::kBroadcast;
    absl::StatusOr<OpSlot> other = rt.RegisterOp(bcast);
    f.Check(absl::IsInvalidArgument(other.status()) &&
                absl::StrContains(other.status().message(), "only allreduces"),
            rank, other.status().ToString());
    // Bad tensors at submission.
    absl::StatusOr<Handle> null_input = rt.Submit(*slot, SubmitArgs{nullptr});
    f.Check(absl::IsInvalidArgument(null_input.status()), rank, null_input.status().ToString());
    absl::StatusOr<Handle> with_output = rt.Submit(*slot, SubmitArgs{a.data(), out.data()});
    f.Check(absl::IsInvalidArgument(with_output.status()) &&
                absl::StrContains(with_output.status().message(), "registered in place"),
            rank, with_output.status().ToString());
    absl::StatusOr<Handle> unknown = rt.Submit(12345, SubmitArgs{a.data()});
    f.Check(absl::IsNotFound(unknown.status()), rank, unknown.status().ToString());

    if (rank == 1) {
      // Rank 1: the op is in flight (rank 0 has not submitted yet) ...
      absl::StatusOr<Handle> h = rt.Submit(*slot, SubmitArgs{a.data()});
      f.Check(h.ok(), rank, h.status().ToString());
      absl::StatusOr<Handle> twice = rt.Submit(*slot, SubmitArgs{a.data()});
      f.Check(absl::IsInvalidArgument(twice.status()) &&
                  absl::StrContains(twice.status().message(), "already in flight"),
              rank, twice.status().ToString());
      absl::StatusOr<Handle> by_name = rt.Enqueue(AllreduceOf("rules.a", a, ReduceOp::kSum));
      f.Check(absl::IsInvalidArgument(by_name.status()), rank, by_name.status().ToString());
      absl::Status busy = rt.UnregisterOp(*slot);
      f.Check(absl::IsFailedPrecondition(busy), rank, busy.ToString());
      // ... a barrier lets rank 0 submit; then the op completes but is not released yet.
      Barrier(rt, f, rank);
      f.Check(rt.Wait(*h).ok(), rank, "wait");
      f.Check(rt.Poll(*h).value_or(false), rank, "poll after wait");
      absl::StatusOr<Handle> unreleased = rt.Submit(*slot, SubmitArgs{a.data()});
      f.Check(absl::IsAlreadyExists(unreleased.status()), rank, unreleased.status().ToString());
      absl::Status still = rt.UnregisterOp(*slot);
      f.Check(absl::IsFailedPrecondition(still), rank, still.ToString());
      // Its name is free, though: an Enqueue of it runs (and the slot waits meanwhile).
      absl::StatusOr<Handle> e = rt.Enqueue(AllreduceOf("rules.a", a, ReduceOp::kSum));
      f.Check(e.ok(), rank, e.status().ToString());
      if (e.ok()) f.Check(rt.Wait(*e).ok(), rank, "enqueued op of the registered name");
      f.Check(rt.Release(*h).ok(), rank, "release");
      absl::StatusOr<OpResult> stale = rt.Release(*h);
      f.Check(absl::IsNotFound(stale.status()), rank, "a released handle is forgotten");
      f.Check(a[0] == 4.0f, rank, absl::StrCat("a[0] = ", a[0], ", expected 4"));
    } else {
      Barrier(rt, f, rank);
      absl::StatusOr<Handle> h = rt.Submit(*slot, SubmitArgs{a.data()});
      f.Check(h.ok() && rt.Release(*h).ok(), rank, "submit and release");
      absl::StatusOr<Handle> e = rt.Enqueue(AllreduceOf("rules.a", a, ReduceOp::kSum));
      f.Check(e.ok() && rt.Wait(*e).ok(), rank, "enqueue of the registered name");
    }
    f.Check(rt.UnregisterOp(*slot).ok(), rank, "unregister");
    absl::StatusOr<Handle> gone = rt.Submit(*slot, SubmitArgs{a.data()});
    f.Check(absl::IsNotFound(gone.status()), rank, gone.status().ToString());
  });
  for (const std::string& e : errors) CHECK(e.empty());
  f.Report();
}

TEST_CASE("a re-registered name with another shape replaces its cached response everywhere",
          "[runtime][registered]") {
  Failures f;
  auto errors = testing::RunRuntimeRanks(2, [&](int rank, Runtime& rt) {
    for (size_t size : {4, 9, 4}) {
      std::vector<float> data(size);
      absl::StatusOr<OpSlot> slot = rt.RegisterOp(AllreduceOf("reshaped", data, ReduceOp::kSum));
      f.Check(slot.ok(), rank, slot.status().ToString());
      if (!slot.ok()) return;
      for (int step = 0; step < 3; ++step) {
        std::fill(data.begin(), data.end(), static_cast<float>(rank + step));
        absl::StatusOr<Handle> h = rt.Submit(*slot, SubmitArgs{data.data()});
        absl::StatusOr<OpResult> r = h.ok() ? rt.Release(*h) : h.status();
        f.Check(r.ok() && r->status.ok(), rank, "submit");
        f.Check(data.back() == static_cast<float>(1 + 2 * step), rank,
                absl::StrCat("size ", size, " step ", step, ": ", data.back()));
      }
      f.Check(rt.UnregisterOp(*slot).ok(), rank, "unregister");
    }
  });
  for (const std::string& e : errors) CHECK(e.empty());
  f.Report();
}

TEST_CASE("a registered op left waiting for a peer fails at shutdown, and its callback runs",
          "[runtime][registered]") {
  Failures f;
  std::atomic<int> callbacks{0};
  auto errors = testing::RunRuntimeRanks(2, [&](int rank, Runtime& rt) {
    std::vector<float> data(16, 1.0f);
    absl::StatusOr<OpSlot> slot = rt.RegisterOp(AllreduceOf("lonely", data, ReduceOp::kSum));
    f.Check(slot.ok(), rank, slot.status().ToString());
    if (!slot.ok() || rank != 0) return;
    SubmitArgs args{data.data()};
    args.done = [&](const OpResult& r) {
      if (absl::IsAborted(r.status)) callbacks.fetch_add(1);
    };
    absl::StatusOr<Handle> h = rt.Submit(*slot, args);
    f.Check(h.ok(), rank, h.status().ToString());
    f.Check(!rt.Poll(*h).value_or(true), rank, "completed without its peer");
    // Shut down while it waits: the handle must complete (Aborted), not hang.
    rt.Shutdown();
    absl::StatusOr<OpResult> r = rt.Release(*h);
    f.Check(r.ok() && absl::IsAborted(r->status), rank,
            r.ok() ? r->status.ToString() : r.status().ToString());
    absl::StatusOr<Handle> after = rt.Submit(*slot, SubmitArgs{data.data()});
    f.Check(absl::IsFailedPrecondition(after.status()), rank, after.status().ToString());
  });
  for (const std::string& e : errors) CHECK(e.empty());
  f.Report();
  CHECK(callbacks.load() == 1);
}

TEST_CASE("a registered op on a process set is checked again when the sets change",
          "[runtime][registered]") {
  Failures f;
  auto errors = testing::RunRuntimeRanks(
      3,
      [&](int rank, Runtime& rt) {
        std::vector<float> data(5, static_cast<float>(rank));
        OpRequest req = AllreduceOf("in_set", data, ReduceOp::kSum);
        req.process_set_id = 1;
        if (rank == 1) {
          absl::StatusOr<OpSlot> refused = rt.RegisterOp(req);
          f.Check(absl::IsInvalidArgument(refused.status()), rank, refused.status().ToString());
        }
        absl::StatusOr<OpSlot> slot = rank == 1 ? absl::StatusOr<OpSlot>(-1) : rt.RegisterOp(req);
        f.Check(slot.ok(), rank, slot.status().ToString());
        if (rank != 1 && slot.ok()) {
          for (int step = 0; step < 3; ++step) {
            std::fill(data.begin(), data.end(), static_cast<float>(rank));
            absl::StatusOr<Handle> h = rt.Submit(*slot, SubmitArgs{data.data()});
            f.Check(h.ok() && rt.Release(*h).ok(), rank, "submit in the set");
            f.Check(data[0] == 2.0f, rank, absl::StrCat("sum over {0, 2} = ", data[0]));
          }
        }
        // Every rank removes set 1 (collective), then the slot's next submission is refused.
        OpRequest remove;
        remove.type = OpType::kRemoveProcessSet;
        remove.process_set_id = 1;
        absl::StatusOr<Handle> removed = rt.Enqueue(remove);
        f.Check(removed.ok() && rt.Wait(*removed).ok(), rank, "remove_process_set");
        if (rank != 1 && slot.ok()) {
          absl::StatusOr<Handle> h = rt.Submit(*slot, SubmitArgs{data.data()});
          f.Check(absl::IsInvalidArgument(h.status()) &&
                      absl::StrContains(h.status().message(), "does not exist"),
                  rank, h.status().ToString());
        }
      },
      testing::FastCycleConfig(), {{0, 2}});
  for (const std::string& e : errors) CHECK(e.empty());
  f.Report();
}

}  // namespace
}  // namespace chorus::runtime

namespace chorus::runtime {
namespace {

// Runs `steps` steps of `sizes.size()` Average allreduces of the given sizes on `n` simulated
// ranks, submitted in reverse order, with the gradients either slices of one buffer laid out
// in that order (`bucket`) or one allocation each; returns rank 0's results of the last step
// and the windows the executor reduced in place (summed over ranks).
struct LayoutRun {
  std::vector<std::vector<float>> results;
  int64_t zero_copy_windows = 0;
  int64_t copied_windows = 0;
};

LayoutRun RunLayout(int n, const std::vector<int64_t>& sizes, bool bucket, int steps,
                    double prescale, Failures& f) {
  LayoutRun run;
  run.results.resize(sizes.size());
  std::mutex mu;
  auto errors = testing::RunRuntimeRanks(n, [&](int rank, Runtime& rt) {
    int64_t total = 0;
    for (int64_t s : sizes) total += s;
    std::vector<float> storage(static_cast<size_t>(bucket ? total : 0));
    std::vector<std::vector<float>> separate(sizes.size());
    std::vector<float*> grads(sizes.size());
    float* next = storage.data();
    for (size_t k = sizes.size(); k-- > 0;) {
      if (bucket) {
        grads[k] = next;
        next += sizes[k];
      } else {
        separate[k].resize(static_cast<size_t>(sizes[k]));
        grads[k] = separate[k].data();
      }
    }
    std::vector<OpSlot> slots(sizes.size());
    for (size_t k = 0; k < sizes.size(); ++k) {
      OpRequest r;
      r.type = OpType::kAllreduce;
      r.name = absl::StrCat("layout.", k);
      r.input = {grads[k], DataType::kFloat32, {sizes[k]}};
      r.reduce_op = ReduceOp::kAverage;
      r.prescale_factor = prescale;
      absl::StatusOr<OpSlot> slot = rt.RegisterOp(r);
      f.Check(slot.ok(), rank, slot.status().ToString());
      slots[k] = slot.ok() ? *slot : -1;
    }
    for (int step = 0; step < steps; ++step) {
      std::mt19937 values(static_cast<unsigned>(rank * 1000 + step));
      std::uniform_real_distribution<float> value(-1.0f, 1.0f);
      for (size_t k = 0; k < sizes.size(); ++k) {
        for (int64_t i = 0; i < sizes[k]; ++i) grads[k][i] = value(values);
      }
      std::vector<Handle> handles;
      for (size_t k = sizes.size(); k-- > 0;) {
        absl::StatusOr<Handle> h = rt.Submit(slots[k], SubmitArgs{grads[k]});
        f.Check(h.ok(), rank, h.status().ToString());
        if (h.ok()) handles.push_back(*h);
      }
      for (Handle h : handles) f.Check(rt.Release(h).ok(), rank, "release");
    }
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0) {
      for (size_t k = 0; k < sizes.size(); ++k) {
        run.results[k].assign(grads[k], grads[k] + sizes[k]);
      }
    }
    run.zero_copy_windows += rt.TEST_counters().zero_copy_windows.load();
    run.copied_windows += rt.TEST_counters().copied_windows.load();
  });
  for (const std::string& e : errors) f.Check(e.empty(), -1, e);
  return run;
}

TEST_CASE("gradients back to back in one buffer are reduced in place, bit-equal to copies",
          "[runtime][registered][zero_copy][large]") {
  const int n = GENERATE(from_range(chorus::testing::FullOrSanitized<int>({2, 3}, {3})));
  const double prescale =
      GENERATE(from_range(chorus::testing::FullOrSanitized<double>({1.0, 0.25}, {0.25})));
  // Small tensors (packed: below the in-place minimum) over more than one pipeline chunk (4 MiB
  // by default), and a set with large ones between them (reduced in place on their own: a
  // window of small ones around them is not contiguous and goes through the fusion buffer).
  const bool mixed = GENERATE(false, true);
  std::vector<int64_t> sizes = {3, 1000, 60000, 17, 5, 50000, 64, 1, 333, 9000};
  for (int k = 0; k < 40; ++k) sizes.push_back(20000 + k);
  if (mixed) sizes[2] = sizes[5] = 700000;
  Failures f;
  LayoutRun copied = RunLayout(n, sizes, /*bucket=*/false, 4, prescale, f);
  LayoutRun viewed = RunLayout(n, sizes, /*bucket=*/true, 4, prescale, f);
  f.Report();
  CHECK(copied.zero_copy_windows == 0);
  CHECK(copied.copied_windows > 0);
  if (!mixed) {
    // After the first step (negotiated, whose order the bucket follows) windows lie in place.
    CHECK(viewed.zero_copy_windows >= 3 * (copied.copied_windows / 4) / 2);
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    INFO("tensor " << k);
    CHECK(std::memcmp(copied.results[k].data(), viewed.results[k].data(),
                      copied.results[k].size() * sizeof(float)) == 0);
  }
}

}  // namespace
}  // namespace chorus::runtime
