// A small training-like job for the no-progress bound (Note [No-progress bound] in
// runtime/progress/progress_watchdog.h), run under mpirun -np 3 by test/CMakeLists.txt through
// test/mpi/check_job.py, which checks the job's exit status and output:
//
//   no_progress_job stop-between-steps   rank 2 stops itself (SIGSTOP) between two steps, as a
//                                         host that vanished would: its sockets stay open, it
//                                         just never answers. Ranks 0 and 1 must end the job
//                                         from their negotiation within about the bound.
//   no_progress_job stop-in-allreduce    rank 2 stops itself inside the data plane's
//                                         MPI_Allreduce of a large tensor: ranks 0 and 1 are
//                                         stuck in the blocking collective and their watchdog
//                                         threads must end the job.
//   no_progress_job healthy              nothing is lost; the job must end normally although it
//                                         idles for 1.5 bounds, one rank computes for 1.5 bounds
//                                         before submitting, and a large allreduce on a slowed
//                                         link (every piece delayed) takes over 1.5 bounds on
//                                         every rank, and over 2 bounds on a process set that
//                                         leaves rank 2 waiting for it (its wait is allowed more
//                                         than one bound per call of the set's ranks).
//
// The bound is read from CHORUS_NO_PROGRESS_TIMEOUT_SECONDS (the runtime reads it too). The
// faults are injected through MPI's profiling interface: this program's MPI_Allreduce wraps
// PMPI_Allreduce, and the runtime's data plane (linked statically) calls it.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "chorus/chorus.h"

namespace {

// Data-plane calls of at least this many elements are "pieces of the large tensor" (the small
// tensors of the steps, the fusion buffer's agreement and the negotiation stay below).
constexpr int kLargeCallElements = 4096;

std::atomic<bool> g_stop_in_large_allreduce{false};
std::atomic<int> g_delay_large_allreduce_ms{0};

}  // namespace

// The runtime's blocking data-plane allreduce (MpiBackend) comes through here.
extern "C" int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
  if (count >= kLargeCallElements) {
    if (g_stop_in_large_allreduce.load()) {
      std::fprintf(stderr, "no_progress_job: stopping inside MPI_Allreduce (SIGSTOP)\n");
      std::fflush(stderr);
      raise(SIGSTOP);
    }
    const int delay = g_delay_large_allreduce_ms.load();
    if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
  return PMPI_Allreduce(send, recv, count, type, op, comm);
}

namespace {

int g_rank = 0;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "no_progress_job: rank %d: FAILED: %s\n", g_rank, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

void Check(const absl::Status& status, const std::string& what) {
  if (!status.ok()) Fail(what + ": " + status.ToString());
}

// A number from the environment (the runtime reads the same variables).
double Number(const char* name, double fallback) {
  const char* text = std::getenv(name);
  return text != nullptr ? std::atof(text) : fallback;
}

void Sleep(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

// Allreduces (sums) `data` named `name` on `set` and checks every element became `expect`.
void Allreduce(const std::string& name, std::vector<float>& data, float expect,
               int32_t set = chorus::kGlobalProcessSetId) {
  chorus::OpRequest r;
  r.type = chorus::OpType::kAllreduce;
  r.name = name;
  r.process_set_id = set;
  r.input = {data.data(), chorus::DataType::kFloat32, {static_cast<int64_t>(data.size())}};
  absl::StatusOr<chorus::Handle> h = chorus::Enqueue(r);
  Check(h.status(), "enqueue " + name);
  Check(chorus::Wait(*h), "allreduce " + name);
  for (size_t i = 0; i < data.size(); i += 997) {
    if (data[i] != expect) {
      Fail(name + ": element " + std::to_string(i) + " is " + std::to_string(data[i]) +
           ", expected " + std::to_string(expect));
    }
  }
}

// One step: a few small gradients, every rank.
void Step(int step, int size) {
  for (int t = 0; t < 3; ++t) {
    std::vector<float> grad(1024, 1.0f);
    Allreduce("grad." + std::to_string(t), grad, static_cast<float>(size));
  }
  if (g_rank == 0) std::printf("no_progress_job: step %d done\n", step);
  std::fflush(stdout);
}

// Prints how long a phase took; fails unless it outlasted `min_bounds` bounds (else the job
// would not test what it claims; the delays guarantee more than that).
void Report(const char* phase, std::chrono::steady_clock::time_point start, double bound,
            double min_bounds) {
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("no_progress_job: rank %d: %s took %.1f s (bound %g s)\n", g_rank, phase, took,
              bound);
  std::fflush(stdout);
  if (took < min_bounds * bound) Fail(std::string(phase) + " was not slowed as intended");
}

int32_t AddProcessSet(std::vector<int32_t> members) {
  chorus::OpRequest add;
  add.type = chorus::OpType::kAddProcessSet;
  add.name = "no_progress.add_set";
  add.process_set_ranks = std::move(members);
  absl::StatusOr<chorus::Handle> h = chorus::Enqueue(add);
  Check(h.status(), "enqueue add_process_set");
  absl::StatusOr<chorus::OpResult> result = chorus::Release(*h);
  Check(result.status(), "add_process_set");
  Check(result->status, "add_process_set");
  return result->process_set_id;
}

void StopBetweenSteps(int size) {
  for (int step = 0; step < 3; ++step) Step(step, size);
  if (g_rank == 2) {
    std::fprintf(stderr, "no_progress_job: rank 2 stops between steps (SIGSTOP)\n");
    std::fflush(stderr);
    raise(SIGSTOP);
  }
  for (int step = 3; step < 1000; ++step) Step(step, size);
  Fail("the job went on without rank 2");
}

void StopInAllreduce(int size) {
  for (int step = 0; step < 3; ++step) Step(step, size);
  if (g_rank == 2) g_stop_in_large_allreduce = true;
  std::vector<float> big(1 << 20, 1.0f);  // 4 MiB: reduced in place, in pieces
  Allreduce("no_progress.big", big, static_cast<float>(size));
  Fail("the large allreduce completed without rank 2");
}

void Healthy(int size, double bound) {
  for (int step = 0; step < 3; ++step) Step(step, size);

  // Every rank busy elsewhere (or idle) for 1.5 bounds: the loops keep checking in (a wait the
  // idle loops left open would end the job after about one bound).
  Sleep(1.5 * bound);
  Step(3, size);

  // Rank 1 computes for 1.5 bounds before it submits; the others wait for it.
  auto start = std::chrono::steady_clock::now();
  if (g_rank == 1) Sleep(1.5 * bound);
  Step(4, size);
  Report("the step rank 1 was late for", start, bound, 1.25);  // it slept 1.5 bounds

  // A slow link: each piece of the large allreduce is delayed on rank 0, so that the
  // allreduce takes over 1.5 bounds (2 on the process set below) while every piece completes
  // well within one.
  const double piece_bytes = Number("CHORUS_PIPELINE_CHUNK_BYTES", 4 << 20);
  if (piece_bytes < 4 * kLargeCallElements || piece_bytes > (1 << 20)) {
    Fail("run with CHORUS_PIPELINE_CHUNK_BYTES between 16 KiB and 1 MiB");
  }
  const int pieces = 240;
  // Delays of `bounds` bounds over the pieces.
  const auto delay_ms = [&](double bounds) {
    return static_cast<int>(bounds * bound * 1000 / pieces) + 1;
  };
  if (g_rank == 0) g_delay_large_allreduce_ms = delay_ms(1.75);
  std::vector<float> big(static_cast<size_t>(pieces * piece_bytes / 4), 1.0f);
  // The pieces go through MPI_Allreduce (and its delay) on the MPI data plane only.
  absl::StatusOr<std::string> controller = chorus::ControllerName();
  Check(controller.status(), "controller name");
  const bool slowed = *controller == "MPI";
  start = std::chrono::steady_clock::now();
  Allreduce("no_progress.slow", big, static_cast<float>(size));
  Report("slow allreduce", start, bound, slowed ? 1.5 : 0);  // delays of 1.75 bounds

  // The same on a process set without rank 2: rank 2 skips it and waits for ranks 0 and 1 in
  // its next negotiation for as long: over 2 bounds, which a wait allowed the bound for only
  // one call of theirs would not survive.
  const int32_t set = AddProcessSet({0, 1});
  if (g_rank == 0) g_delay_large_allreduce_ms = delay_ms(2.5);
  start = std::chrono::steady_clock::now();
  if (g_rank < 2) {
    std::vector<float> again(big.size(), 1.0f);
    Allreduce("no_progress.slow_set", again, 2.0f, set);
  }
  g_delay_large_allreduce_ms = 0;
  Step(5, size);  // rank 2: waits for ranks 0 and 1 to finish the set's allreduce
  Report("slow allreduce on ranks 0 and 1, and the step after it", start, bound, slowed ? 2 : 0);
  std::printf("no_progress_job: rank %d: PASS\n", g_rank);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (size != 3) Fail("run with 3 ranks");
  const double bound = Number("CHORUS_NO_PROGRESS_TIMEOUT_SECONDS", 30);
  Check(chorus::Init(), "init");
  if (mode == "stop-between-steps") {
    StopBetweenSteps(size);
  } else if (mode == "stop-in-allreduce") {
    StopInAllreduce(size);
  } else if (mode == "healthy") {
    Healthy(size, bound);
  } else {
    Fail("unknown mode '" + mode + "'");
  }
  Check(chorus::Shutdown(), "shutdown");
  MPI_Finalize();
  return 0;
}
