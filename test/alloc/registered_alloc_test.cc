// The steady state of registered ops allocates nothing (Note [Registered ops] in
// runtime/submit/op_slots.h): after a few warm-up steps, a step of registered allreduces makes no
// heap allocation on the submitting thread (Submit), and none in the whole process (the background
// loop's cycle, the cache bit vector's exchange, the fusion plan, the collectives, the
// completions and Release included) on one rank and on chorus's own data plane
// (CHORUS_CONTROLLER=ucx). Open MPI's collectives allocate per call (its non-blocking and
// large-message allreduces): with several ranks on MPI the process-wide count is printed, not
// checked. Counts allocations (bench/alloc_counter.h), not time. Run under mpirun.
// Every other step pauses partway through its submissions, so the loop takes it in two cycles
// split at a different tensor each time: a plan never seen before must reuse the kept buffers
// too. A rare step may still allocate in the process: UCX grows its own request pool once in a
// while (ucs_mpool_grow under ucp_worker_progress, one allocation), so the process-wide check
// allows kMaxAllocatingSteps of the timed steps to allocate, and prints which, with the stacks
// of the first allocating steps' first allocations. Allocating every step (what a regression
// does) fails; the submitting thread must never allocate.
//
// Prints "PASS" on every rank, or what allocated and exits 1.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include <mpi.h>

#include "base/status_macros.h"
#include "bench/alloc_counter.h"
#include "chorus/chorus.h"

namespace {

constexpr int kTensors = 200;
constexpr int kWarmup = 20;
constexpr int kSteps = 50;
constexpr int kMaxAllocatingSteps = 3;

struct Counts {
  int64_t submitter = 0;     // on this thread, inside Submit
  int64_t process = 0;       // anywhere, during the whole step
  int allocating_steps = 0;  // timed steps that allocated anywhere in the process
  std::string which;         // "step: count" of those
};

absl::Status Run(int rank, int ranks) {
  CHORUS_RETURN_IF_ERROR(chorus::Init());
  std::vector<std::vector<float>> grads(kTensors);
  std::vector<chorus::OpSlot> slots;
  for (int k = 0; k < kTensors; ++k) {
    // 64 B .. 64 KiB: packed in the fusion buffer.
    grads[k].assign(static_cast<size_t>(16 << (k % 11)), 0.0f);
    chorus::OpRequest req;
    req.type = chorus::OpType::kAllreduce;
    req.name = absl::StrCat("alloc_test.grad.", k);
    req.input = {
        grads[k].data(), chorus::DataType::kFloat32, {static_cast<int64_t>(grads[k].size())}};
    req.reduce_op = chorus::ReduceOp::kAverage;
    CHORUS_ASSIGN_OR_RETURN(chorus::OpSlot slot, chorus::RegisterOp(std::move(req)));
    slots.push_back(slot);
  }
  std::vector<chorus::Handle> handles;
  handles.reserve(kTensors);
  Counts worst;
  for (int step = 0; step < kWarmup + kSteps; ++step) {
    for (auto& g : grads) g.assign(g.size(), static_cast<float>(rank + step));
    handles.clear();
    if (step >= kWarmup) chorus::bench::StartCapture();
    const int64_t process0 = chorus::bench::ProcessAllocations();
    const int64_t thread0 = chorus::bench::ThreadAllocations();
    // Every other step pauses partway, as a backward pass does, so that the background loop
    // takes the step in two cycles split at a different tensor each time (the cycle time is
    // 1 ms by default): the plans of new splits reuse the kept buffers.
    const int pause_at = step % 2 == 1 ? (step * 37) % kTensors : -1;
    for (int k = kTensors; k-- > 0;) {
      if (k == pause_at) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      CHORUS_ASSIGN_OR_RETURN(chorus::Handle h,
                              chorus::Submit(slots[k], chorus::SubmitArgs{grads[k].data()}));
      handles.push_back(h);
    }
    const int64_t submitter = chorus::bench::ThreadAllocations() - thread0;
    for (chorus::Handle h : handles) {
      CHORUS_ASSIGN_OR_RETURN(chorus::OpResult result, chorus::Release(h));
      CHORUS_RETURN_IF_ERROR(result.status);
    }
    const int64_t process = chorus::bench::ProcessAllocations() - process0;
    chorus::bench::StopCapture();
    // The results are right, too: the average of rank + step over the ranks.
    const float want = static_cast<float>(step) + static_cast<float>(ranks - 1) / 2.0f;
    for (int k = 0; k < kTensors; ++k) {
      if (grads[k].front() != want || grads[k].back() != want) {
        return absl::DataLossError(absl::StrCat("step ", step, ": grad ", k, " holds ",
                                                grads[k].front(), ", expected ", want));
      }
    }
    if (step >= kWarmup) {
      worst.submitter = std::max(worst.submitter, submitter);
      worst.process = std::max(worst.process, process);
      if (process != 0) {
        // Where the first allocating steps allocated, for whoever reads a failure.
        if (worst.allocating_steps < 2) {
          std::fprintf(stderr, "rank %d, step %d: %lld allocations\n", rank, step,
                       static_cast<long long>(process));
          chorus::bench::WriteCapturedStacks(2);
        }
        ++worst.allocating_steps;
        absl::StrAppend(&worst.which, worst.which.empty() ? "" : ", ", step, ": ", process);
      }
    }
  }
  for (chorus::OpSlot slot : slots) CHORUS_RETURN_IF_ERROR(chorus::UnregisterOp(slot));
  CHORUS_RETURN_IF_ERROR(chorus::Shutdown());
  std::printf(
      "rank %d: %d steps of %d registered allreduces after %d warm-up steps: at most %lld "
      "allocations per step on the submitting thread, %lld in the process (%d steps "
      "allocated%s%s)\n",
      rank, kSteps, kTensors, kWarmup, static_cast<long long>(worst.submitter),
      static_cast<long long>(worst.process), worst.allocating_steps,
      worst.which.empty() ? "" : ": ", worst.which.c_str());
  if (worst.submitter != 0) {
    return absl::InternalError("Submit allocated in the steady state");
  }
  const char* controller = std::getenv("CHORUS_CONTROLLER");
  const bool own_data_plane = controller != nullptr && std::string(controller) == "ucx";
  if ((ranks == 1 || own_data_plane) && worst.allocating_steps > kMaxAllocatingSteps) {
    return absl::InternalError(absl::StrCat("the steady state of registered ops allocated in ",
                                            worst.allocating_steps, " of ", kSteps,
                                            " steps (at most ", kMaxAllocatingSteps, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const absl::Status status = Run(rank, ranks);
  if (status.ok()) {
    std::printf("rank %d: PASS\n", rank);
  } else {
    std::printf("rank %d: FAILED: %s\n", rank, status.ToString().c_str());
  }
  std::fflush(stdout);
  MPI_Finalize();
  return status.ok() ? 0 : 1;
}
