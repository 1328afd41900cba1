// chorus_gpu_steps_bench: `chorus_bench steps` on GPU tensors, single rank, end to end through
// the runtime: per-step time, and the share of it spent in the fusion copies, in NCCL and in the
// runtime itself, for models' tensor sets (bench/tensor_sets.h).
//
//   chorus_gpu_steps_bench [--sets resnet50,bert-base,tiny1000] [--steps 100] [--warmup 10]
//                          [--iters 50] [--fusion-threshold-mib 128] [--cycle-time-ms 1]
//                          [--nccl-streams 1] [--json FILE]
//
// One Runtime (runtime/runtime.h) over a one-rank InProcessFabric (no MPI) with the build's GPU
// platform (ops::gpu::DefaultGpuPlatform: CUDA + NCCL). Every gradient of a set lives on GPU 0
// (one cudaMalloc arena, tensors on 256-byte boundaries as a caching allocator places them).
// A step, as DistributedOptimizer does it: one Enqueue per tensor (in-place float32 Average
// allreduce, the tensor's fixed name, ready on a "framework" stream), in reverse definition
// order as backward produces them, then Release of every handle. Step time = host wall clock
// from the first Enqueue to the last Release (the callbacks fire once the device is done).
// `warmup` untimed steps, then `steps` timed ones: median and p90.
//
// Breakdown, measured right after on the same device and bytes, on one non-blocking stream,
// each a median over `iters` samples of ONE call timed by CUDA events around it (so a sample
// includes the host's launch latency, as the runtime pays it):
//   copies   copy-in of every tensor into a fusion buffer + copy-out back into the tensors, one
//            batched-copy launch each (ops/cuda/batched_copy.h, planned as the runtime plans:
//            16-byte fusion alignment, default chunks, no overlap check). Planning is host
//            work, counted in the runtime share; its time is shown separately.
//   NCCL     one single-rank communicator (platform->CreateCommunicator(id, 1, 0, 0)), one
//            in-place Allreduce (sum) of the fused bytes.
//   runtime  DERIVED: step - copies - NCCL (negotiation, cycles, fusion planning, events,
//            completion and callbacks, plus the difference between one fused batch and the
//            batches the runtime actually ran).
//   raw      the data movement by hand, no runtime: copy-in + NCCL Allreduce + copy-out on one
//            stream; step/raw is the runtime's cost factor.
// The batches the runtime ran are counted exactly: the runtime gets the platform through a
// forwarding wrapper that counts communicator Allreduce calls (one per batch) and copy launches
// (two per fused batch, none for a batch of one tensor). Its cost is a virtual call and an
// atomic add per device call.
//
// Checks: every op of every step must succeed; after the timed steps and the breakdown every
// tensor must hold its initial values exactly (Average over one rank is the identity); then
// one more runtime step with postscale 2 must double every tensor exactly (so a runtime that
// moved nothing fails).
//
// Exit status: 0 on success, 1 on a CUDA or runtime error or a wrong result, 2 on bad
// arguments, 77 when GPU 0 is not usable (the platform's reason is printed).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include <cuda_runtime_api.h>

#include "bench/cuda_check.h"
#include "bench/tensor_sets.h"
#include "chorus/chorus.h"
#include "chorus/types.h"
#include "ops/cuda/batched_copy.h"
#include "ops/cuda/batched_copy_plan.h"
#include "ops/gpu_platform.h"
#include "runtime/config.h"
#include "runtime/runtime.h"
#include "test/support/in_process_fabric.h"
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace chorus::bench {
namespace {

using ops::gpu::BatchedCopyPlan;
using ops::gpu::BatchedCopyScratch;
using ops::gpu::CopyEntry;
using ops::gpu::DeviceStream;
using ops::gpu::EventHandle;
using ops::gpu::FusionLayout;
using ops::gpu::GpuCommunicator;
using ops::gpu::GpuPlatform;
using ops::gpu::StreamHandle;

constexpr int kDevice = 0;
constexpr int64_t kFusionAlign = 16;   // as runtime/gpu/gpu_data_plane.cc
constexpr int64_t kTensorAlign = 256;  // a caching allocator's granularity

struct Args {
  std::vector<std::string> sets;  // default: resnet50, bert-base, tiny1000 (those that exist)
  int steps = 100;
  int warmup = 10;
  int iters = 50;
  // Runtime knobs; defaults are runtime/config.h's Config defaults (filled in Main).
  double fusion_threshold_mib = 0;
  double cycle_time_ms = 0;
  int nccl_streams = 0;
  std::string json_path;
};

// Percentile `q` in [0, 1] of non-empty `v`, interpolating between neighbours.
double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}
double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

// ---------------------------------------------------------------------------------------------
// Counting what the runtime asks of the device.

struct DeviceCalls {
  std::atomic<int64_t> allreduces{0};
  std::atomic<int64_t> allreduce_bytes{0};
  std::atomic<int64_t> copy_launches{0};
  std::atomic<int64_t> copy_bytes{0};  // read + written
  std::atomic<int64_t> other_collectives{0};
};

void Add(std::atomic<int64_t>& counter, int64_t n) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

class CountingCommunicator final : public GpuCommunicator {
 public:
  CountingCommunicator(std::unique_ptr<GpuCommunicator> inner, DeviceCalls* calls)
      : inner_(std::move(inner)), calls_(calls) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int device() const override { return inner_->device(); }
  absl::Status Allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                         StreamHandle stream) override {
    Add(calls_->allreduces, 1);
    Add(calls_->allreduce_bytes, count * static_cast<int64_t>(DataTypeSize(dtype)));
    return inner_->Allreduce(send, recv, count, dtype, op, stream);
  }
  absl::Status Allgatherv(const void* send, void* recv, absl::Span<const int64_t> recv_bytes,
                          StreamHandle stream) override {
    Add(calls_->other_collectives, 1);
    return inner_->Allgatherv(send, recv, recv_bytes, stream);
  }
  absl::Status Broadcast(void* buffer, int64_t bytes, int root, StreamHandle stream) override {
    Add(calls_->other_collectives, 1);
    return inner_->Broadcast(buffer, bytes, root, stream);
  }
  absl::Status Alltoallv(const void* send, absl::Span<const int64_t> send_bytes,
                         absl::Span<const int64_t> send_offsets, void* recv,
                         absl::Span<const int64_t> recv_bytes,
                         absl::Span<const int64_t> recv_offsets, StreamHandle stream) override {
    Add(calls_->other_collectives, 1);
    return inner_->Alltoallv(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets,
                             stream);
  }
  absl::Status ReduceScatter(const void* send, void* recv, absl::Span<const int64_t> recv_counts,
                             DataType dtype, ReduceOp op, StreamHandle stream) override {
    Add(calls_->other_collectives, 1);
    return inner_->ReduceScatter(send, recv, recv_counts, dtype, op, stream);
  }
  absl::Status AsyncError() override { return inner_->AsyncError(); }
  void Abort() override { inner_->Abort(); }

 private:
  const std::unique_ptr<GpuCommunicator> inner_;
  DeviceCalls* const calls_;
};

// Forwards everything to `inner`, counting copy launches and (through its communicators)
// collectives into `calls`, which must outlive it.
class CountingPlatform final : public GpuPlatform {
 public:
  CountingPlatform(std::shared_ptr<GpuPlatform> inner, DeviceCalls* calls)
      : inner_(std::move(inner)), calls_(calls) {}

  std::string name() const override { return inner_->name(); }
  absl::Status CheckDevice(int device) override { return inner_->CheckDevice(device); }
  absl::StatusOr<StreamHandle> CreateStream(int device) override {
    return inner_->CreateStream(device);
  }
  void DestroyStream(int device, StreamHandle stream) override {
    inner_->DestroyStream(device, stream);
  }
  absl::StatusOr<EventHandle> CreateEvent(int device) override {
    return inner_->CreateEvent(device);
  }
  void DestroyEvent(int device, EventHandle event) override { inner_->DestroyEvent(device, event); }
  absl::Status RecordEvent(int device, EventHandle event, StreamHandle stream) override {
    return inner_->RecordEvent(device, event, stream);
  }
  absl::Status StreamWaitEvent(int device, StreamHandle stream, EventHandle event) override {
    return inner_->StreamWaitEvent(device, stream, event);
  }
  absl::Status EnqueueHostCallback(int device, StreamHandle stream, void (*fn)(void*),
                                   void* arg) override {
    return inner_->EnqueueHostCallback(device, stream, fn, arg);
  }
  absl::StatusOr<bool> EventDone(int device, EventHandle event) override {
    return inner_->EventDone(device, event);
  }
  absl::StatusOr<void*> Allocate(int device, int64_t bytes) override {
    return inner_->Allocate(device, bytes);
  }
  void Free(int device, void* ptr) override { inner_->Free(device, ptr); }
  absl::Status EnqueueCopy(int device, const BatchedCopyPlan& plan, StreamHandle stream) override {
    Add(calls_->copy_launches, 1);
    Add(calls_->copy_bytes, plan.bytes_read + plan.bytes_written);
    return inner_->EnqueueCopy(device, plan, stream);
  }
  absl::Status EnqueueFillIdentity(int device, void* ptr, int64_t count, DataType dtype,
                                   ReduceOp op, StreamHandle stream) override {
    return inner_->EnqueueFillIdentity(device, ptr, count, dtype, op, stream);
  }
  absl::StatusOr<std::string> NewCommunicatorId() override { return inner_->NewCommunicatorId(); }
  absl::StatusOr<std::unique_ptr<GpuCommunicator>> CreateCommunicator(const std::string& id,
                                                                      int size, int rank,
                                                                      int device) override {
    absl::StatusOr<std::unique_ptr<GpuCommunicator>> comm =
        inner_->CreateCommunicator(id, size, rank, device);
    if (!comm.ok()) return comm.status();
    return std::unique_ptr<GpuCommunicator>(
        std::make_unique<CountingCommunicator>(*std::move(comm), calls_));
  }

 private:
  const std::shared_ptr<GpuPlatform> inner_;
  DeviceCalls* const calls_;
};

// ---------------------------------------------------------------------------------------------
// One set's gradients on the device.

struct SetTensors {
  std::vector<TensorSpec> specs;
  std::vector<int64_t> counts;
  std::vector<int64_t> offsets;  // bytes into the arena
  int64_t arena_bytes = 0;
  int64_t payload_bytes = 0;   // sum of the tensors' bytes
  float* arena = nullptr;      // device
  std::vector<float> initial;  // host copy of the arena's initial contents

  float* tensor(size_t i) const { return arena + offsets[i] / static_cast<int64_t>(sizeof(float)); }
};

SetTensors AllocateSet(const std::string& name, int salt) {
  SetTensors s;
  absl::StatusOr<std::vector<TensorSpec>> specs = GetTensorSet(name);
  Check(specs.status(), "tensor set");
  s.specs = *std::move(specs);
  for (const TensorSpec& t : s.specs) {
    s.counts.push_back(t.num_elements());
    s.payload_bytes += t.num_elements() * 4;
  }
  const FusionLayout layout =
      ops::gpu::PackFusionLayout(s.counts, DataType::kFloat32, kTensorAlign);
  s.offsets = layout.offsets;
  s.arena_bytes = (layout.total_bytes + kTensorAlign - 1) / kTensorAlign * kTensorAlign;
  BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&s.arena), static_cast<size_t>(s.arena_bytes)));
  // Small integers as floats: exact through sums over one rank and scaling by 2.
  s.initial.resize(static_cast<size_t>(s.arena_bytes) / sizeof(float));
  for (size_t i = 0; i < s.initial.size(); ++i) {
    s.initial[i] = static_cast<float>((i * 7 + static_cast<size_t>(salt) * 13) % 2001) - 1000.0f;
  }
  BENCH_CUDA(cudaMemcpy(s.arena, s.initial.data(), s.initial.size() * sizeof(float),
                        cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaDeviceSynchronize());
  return s;
}

// True when every tensor holds its initial values times `factor` (exactly); else prints the
// first difference.
bool TensorsAre(const SetTensors& s, float factor, const char* when) {
  std::vector<float> now(s.initial.size());
  BENCH_CUDA(cudaMemcpy(now.data(), s.arena, now.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t t = 0; t < s.specs.size(); ++t) {
    const size_t first = static_cast<size_t>(s.offsets[t]) / sizeof(float);
    for (size_t i = first; i < first + static_cast<size_t>(s.counts[t]); ++i) {
      const float want = s.initial[i] * factor;
      if (now[i] != want) {
        std::fprintf(stderr, "chorus_gpu_steps_bench: %s: tensor '%s' element %zu is %g, want %g\n",
                     when, s.specs[t].name.c_str(), i - first, static_cast<double>(now[i]),
                     static_cast<double>(want));
        return false;
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Runtime steps.

struct StepTimes {
  double enqueue_s = 0;  // first Enqueue .. last Enqueue returned
  double step_s = 0;     // first Enqueue .. last Release returned
};

// One training step: every tensor as an in-place Average allreduce, reverse order, then
// Release of every handle. Returns the first error (an Enqueue's or an op's).
absl::Status RunStep(runtime::Runtime& rt, const SetTensors& s, cudaStream_t framework,
                     double postscale, StepTimes* times) {
  using Clock = std::chrono::steady_clock;
  const size_t n = s.specs.size();
  std::vector<Handle> handles;
  handles.reserve(n);
  absl::Status first;
  const Clock::time_point t0 = Clock::now();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = n - 1 - k;
    OpRequest r;
    r.type = OpType::kAllreduce;
    r.name = s.specs[i].name;
    r.input = TensorView{s.tensor(i), DataType::kFloat32, s.specs[i].shape, kDevice};
    r.reduce_op = ReduceOp::kAverage;
    r.postscale_factor = postscale;
    r.stream = framework;
    absl::StatusOr<Handle> h = rt.Enqueue(std::move(r));
    if (!h.ok()) {
      first = absl::Status(h.status().code(),
                           absl::StrCat("enqueue '", s.specs[i].name, "': ", h.status().message()));
      break;
    }
    handles.push_back(*h);
  }
  const Clock::time_point t1 = Clock::now();
  for (const Handle h : handles) {
    absl::StatusOr<OpResult> result = rt.Release(h);
    absl::Status st = result.ok() ? result->status : result.status();
    if (!st.ok() && first.ok()) first = st;
  }
  const Clock::time_point t2 = Clock::now();
  times->enqueue_s = std::chrono::duration<double>(t1 - t0).count();
  times->step_s = std::chrono::duration<double>(t2 - t0).count();
  return first;
}

// ---------------------------------------------------------------------------------------------
// Device timing without the runtime.

// Seconds of each of `iters` samples of one `fn()` (which enqueues on `stream`), timed by CUDA
// events recorded around it, after `warmup` untimed calls.
std::vector<double> TimeOnStream(int iters, int warmup, cudaStream_t stream,
                                 const std::function<void()>& fn) {
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) fn();
  BENCH_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> samples;
  for (int i = 0; i < iters; ++i) {
    BENCH_CUDA(cudaEventRecord(start, stream));
    fn();
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(static_cast<double>(ms) * 1e-3);
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  return samples;
}

struct Breakdown {
  double copies_s = 0;
  double nccl_s = 0;
  double raw_s = 0;
  double plan_us = 0;  // host time to plan copy-in + copy-out
  size_t chunks = 0;   // chunks (thread blocks) of the copy-in
};

Breakdown MeasureBreakdown(const Args& args, const SetTensors& s, GpuCommunicator& comm,
                           cudaStream_t stream, BatchedCopyScratch* scratch) {
  const FusionLayout layout =
      ops::gpu::PackFusionLayout(s.counts, DataType::kFloat32, kFusionAlign);
  float* fusion = nullptr;
  BENCH_CUDA(
      cudaMalloc(reinterpret_cast<void**>(&fusion), static_cast<size_t>(layout.total_bytes)));
  std::vector<CopyEntry> in, out;
  for (size_t i = 0; i < s.specs.size(); ++i) {
    auto* slot = reinterpret_cast<std::byte*>(fusion) + layout.offsets[i];
    in.push_back(CopyEntry{s.tensor(i), slot, s.counts[i], DataType::kFloat32, DataType::kFloat32});
    out.push_back(
        CopyEntry{slot, s.tensor(i), s.counts[i], DataType::kFloat32, DataType::kFloat32});
  }
  ops::gpu::PlanOptions options;
  options.check_overlap = false;  // as the runtime: fusion-buffer slices and distinct tensors
  BatchedCopyPlan in_plan, out_plan;
  Breakdown b;
  std::vector<double> plan_us;
  for (int rep = 0; rep < 21; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    Check(ops::gpu::PlanBatchedCopy(in, 1.0, options, &in_plan), "plan copy-in");
    Check(ops::gpu::PlanBatchedCopy(out, 1.0, options, &out_plan), "plan copy-out");
    const auto t1 = std::chrono::steady_clock::now();
    plan_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  b.plan_us = Median(std::move(plan_us));
  b.chunks = in_plan.chunks.size();

  const auto dstream = static_cast<DeviceStream>(stream);
  const auto copy_in = [&] {
    Check(ops::gpu::LaunchBatchedCopy(in_plan, scratch, dstream), "launch copy-in");
  };
  const auto copy_out = [&] {
    Check(ops::gpu::LaunchBatchedCopy(out_plan, scratch, dstream), "launch copy-out");
  };
  const int64_t elements = layout.total_bytes / static_cast<int64_t>(sizeof(float));
  const auto allreduce = [&] {
    Check(comm.Allreduce(fusion, fusion, elements, DataType::kFloat32, ReduceOp::kSum,
                         static_cast<StreamHandle>(stream)),
          "NCCL allreduce");
  };
  const int warmup = std::max(3, args.warmup);
  b.copies_s = Median(TimeOnStream(args.iters, warmup, stream, [&] {
    copy_in();
    copy_out();
  }));
  b.nccl_s = Median(TimeOnStream(args.iters, warmup, stream, allreduce));
  b.raw_s = Median(TimeOnStream(args.iters, warmup, stream, [&] {
    copy_in();
    allreduce();
    copy_out();
  }));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  Check(comm.AsyncError(), "NCCL communicator");
  BENCH_CUDA(cudaFree(fusion));
  return b;
}

// ---------------------------------------------------------------------------------------------

struct SetResult {
  std::string name;
  size_t tensors = 0;
  int64_t bytes = 0;
  bool ok = false;
  bool runtime_failed = false;  // an op failed: the runtime may have stopped
  std::string error;
  double step_median_s = 0, step_p90_s = 0, step_min_s = 0, step_mean_s = 0;
  double enqueue_median_s = 0;
  double batches_per_step = 0, copy_launches_per_step = 0, copy_mb_per_step = 0;
  int64_t batches_min = 0, batches_max = 0;
  double cycles_per_step = 0, negotiation_rounds_per_step = 0, cache_hits_per_step = 0;
  Breakdown breakdown;
};

SetResult RunSet(const Args& args, const std::string& name, int salt, runtime::Runtime& rt,
                 DeviceCalls& calls, GpuCommunicator& comm, cudaStream_t stream,
                 cudaStream_t framework, BatchedCopyScratch* scratch) {
  SetResult r;
  r.name = name;
  SetTensors s = AllocateSet(name, salt);
  r.tensors = s.specs.size();
  r.bytes = s.payload_bytes;
  const auto fail = [&](std::string error) {
    r.error = std::move(error);
    std::fprintf(stderr, "chorus_gpu_steps_bench: %s: %s\n", name.c_str(), r.error.c_str());
    // After a failed op the tensors are left allocated: the runtime fails its handles without
    // waiting for the work already queued on its stream, which may still use them.
    if (!r.runtime_failed) BENCH_CUDA(cudaFree(s.arena));
    return r;
  };

  StepTimes t;
  for (int i = 0; i < args.warmup; ++i) {
    absl::Status st = RunStep(rt, s, framework, 1.0, &t);
    if (!st.ok()) {
      r.runtime_failed = true;
      return fail(absl::StrCat("warmup step ", i, ": ", st.ToString()));
    }
  }
  const runtime::BackgroundLoop::Counters& counters = rt.TEST_counters();
  const int64_t cycles0 = counters.cycles.load();
  const int64_t rounds0 = counters.negotiation_rounds.load();
  const int64_t hits0 = counters.cache_hits.load();
  const int64_t launches0 = calls.copy_launches.load();
  const int64_t copy_bytes0 = calls.copy_bytes.load();
  std::vector<double> step_s, enqueue_s;
  std::vector<int64_t> batches;
  for (int i = 0; i < args.steps; ++i) {
    const int64_t before = calls.allreduces.load();
    absl::Status st = RunStep(rt, s, framework, 1.0, &t);
    if (!st.ok()) {
      r.runtime_failed = true;
      return fail(absl::StrCat("timed step ", i, ": ", st.ToString()));
    }
    batches.push_back(calls.allreduces.load() - before);
    step_s.push_back(t.step_s);
    enqueue_s.push_back(t.enqueue_s);
  }
  const double steps = static_cast<double>(args.steps);
  r.cycles_per_step = static_cast<double>(counters.cycles.load() - cycles0) / steps;
  r.negotiation_rounds_per_step =
      static_cast<double>(counters.negotiation_rounds.load() - rounds0) / steps;
  r.cache_hits_per_step = static_cast<double>(counters.cache_hits.load() - hits0) / steps;
  r.copy_launches_per_step = static_cast<double>(calls.copy_launches.load() - launches0) / steps;
  r.copy_mb_per_step = static_cast<double>(calls.copy_bytes.load() - copy_bytes0) / steps / 1e6;
  int64_t total_batches = 0;
  for (const int64_t b : batches) total_batches += b;
  r.batches_per_step = static_cast<double>(total_batches) / steps;
  r.batches_min = *std::min_element(batches.begin(), batches.end());
  r.batches_max = *std::max_element(batches.begin(), batches.end());
  r.step_median_s = Median(step_s);
  r.step_p90_s = Percentile(step_s, 0.9);
  r.step_min_s = *std::min_element(step_s.begin(), step_s.end());
  double sum = 0;
  for (const double x : step_s) sum += x;
  r.step_mean_s = sum / steps;
  r.enqueue_median_s = Median(enqueue_s);
  if (!TensorsAre(s, 1.0f, "after the timed steps")) {
    return fail("wrong values after the timed steps (Average over one rank must not change them)");
  }

  r.breakdown = MeasureBreakdown(args, s, comm, stream, scratch);
  if (!TensorsAre(s, 1.0f, "after the breakdown")) {
    return fail("wrong values after the copies + NCCL breakdown");
  }
  // The runtime must really move the data: one step scaled by 2.
  absl::Status st = RunStep(rt, s, framework, 2.0, &t);
  if (!st.ok()) {
    r.runtime_failed = true;
    return fail(absl::StrCat("check step (postscale 2): ", st.ToString()));
  }
  if (!TensorsAre(s, 2.0f, "after a step with postscale 2")) {
    return fail("wrong values after a step with postscale 2 (want every tensor doubled)");
  }
  BENCH_CUDA(cudaFree(s.arena));
  r.ok = true;
  return r;
}

double Pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

void PrintSet(const SetResult& r) {
  std::printf("\n%s: %zu tensors, %.1f MB float32\n", r.name.c_str(), r.tensors,
              static_cast<double>(r.bytes) / 1e6);
  if (!r.ok) {
    std::printf("  FAILED: %s\n", r.error.c_str());
    return;
  }
  const Breakdown& b = r.breakdown;
  const double step = r.step_median_s;
  const double runtime = step - b.copies_s - b.nccl_s;
  std::printf(
      "  per step: %.2f batches (min %lld, max %lld; = NCCL allreduces), %.2f copy "
      "launches (%.1f MB read + written), %.2f cycles, %.2f negotiation rounds, %.1f cache hits\n",
      r.batches_per_step, static_cast<long long>(r.batches_min),
      static_cast<long long>(r.batches_max), r.copy_launches_per_step, r.copy_mb_per_step,
      r.cycles_per_step, r.negotiation_rounds_per_step, r.cache_hits_per_step);
  std::printf("  %-52s %10s %8s\n", "", "us", "% step");
  std::printf("  %-52s %10.1f %8s   (p90 %.1f, min %.1f, mean %.1f)\n",
              "step (first Enqueue .. last Release), median", step * 1e6, "100.0",
              r.step_p90_s * 1e6, r.step_min_s * 1e6, r.step_mean_s * 1e6);
  std::printf("  %-52s %10.1f %8.1f\n", "  of which enqueueing every tensor (host)",
              r.enqueue_median_s * 1e6, Pct(r.enqueue_median_s, step));
  std::printf("  %-52s %10.1f %8.1f   (%zu chunks; planning %.1f us host)\n",
              "copies: batched copy-in + copy-out, one fused batch", b.copies_s * 1e6,
              Pct(b.copies_s, step), b.chunks, b.plan_us);
  std::printf("  %-52s %10.1f %8.1f\n", "NCCL: one allreduce of the fused bytes", b.nccl_s * 1e6,
              Pct(b.nccl_s, step));
  std::printf("  %-52s %10.1f %8.1f\n", "runtime (derived: step - copies - NCCL)", runtime * 1e6,
              Pct(runtime, step));
  std::printf("  %-52s %10.1f %8.1f   step/raw %.2f\n",
              "raw: copy-in + NCCL + copy-out, one stream, no runtime", b.raw_s * 1e6,
              Pct(b.raw_s, step), b.raw_s > 0 ? step / b.raw_s : 0);
}

void PrintSummary(const std::vector<SetResult>& results) {
  std::printf("\nsummary (us; shares of the median step; runtime share derived)\n");
  std::printf("  %-10s %7s %8s %10s %10s %8s %7s %9s %10s %9s %8s\n", "set", "tensors", "MB",
              "step med", "step p90", "copies%", "NCCL%", "runtime%", "raw", "step/raw", "batches");
  for (const SetResult& r : results) {
    if (!r.ok) {
      std::printf("  %-10s FAILED: %s\n", r.name.c_str(), r.error.c_str());
      continue;
    }
    const Breakdown& b = r.breakdown;
    const double step = r.step_median_s;
    std::printf("  %-10s %7zu %8.1f %10.1f %10.1f %8.1f %7.1f %9.1f %10.1f %9.2f %8.2f\n",
                r.name.c_str(), r.tensors, static_cast<double>(r.bytes) / 1e6, step * 1e6,
                r.step_p90_s * 1e6, Pct(b.copies_s, step), Pct(b.nccl_s, step),
                Pct(step - b.copies_s - b.nccl_s, step), b.raw_s * 1e6,
                b.raw_s > 0 ? step / b.raw_s : 0, r.batches_per_step);
  }
}

nlohmann::json SetJson(const SetResult& r) {
  nlohmann::json j = {{"set", r.name}, {"tensors", r.tensors}, {"bytes", r.bytes}, {"ok", r.ok}};
  if (!r.ok) {
    j["error"] = r.error;
    return j;
  }
  const Breakdown& b = r.breakdown;
  const double step = r.step_median_s;
  const double runtime = step - b.copies_s - b.nccl_s;
  j["step_us"] = {{"median", step * 1e6},
                  {"p90", r.step_p90_s * 1e6},
                  {"min", r.step_min_s * 1e6},
                  {"mean", r.step_mean_s * 1e6}};
  j["enqueue_us_median"] = r.enqueue_median_s * 1e6;
  j["per_step"] = {{"batches", r.batches_per_step},
                   {"batches_min", r.batches_min},
                   {"batches_max", r.batches_max},
                   {"copy_launches", r.copy_launches_per_step},
                   {"copy_mb", r.copy_mb_per_step},
                   {"cycles", r.cycles_per_step},
                   {"negotiation_rounds", r.negotiation_rounds_per_step},
                   {"cache_hits", r.cache_hits_per_step}};
  j["breakdown_us"] = {{"copies", b.copies_s * 1e6},
                       {"nccl", b.nccl_s * 1e6},
                       {"runtime_derived", runtime * 1e6},
                       {"copy_plan_host", b.plan_us}};
  j["share_pct"] = {{"copies", Pct(b.copies_s, step)},
                    {"nccl", Pct(b.nccl_s, step)},
                    {"runtime_derived", Pct(runtime, step)}};
  j["raw_us"] = b.raw_s * 1e6;
  j["step_over_raw"] = b.raw_s > 0 ? step / b.raw_s : 0;
  j["copy_chunks"] = b.chunks;
  return j;
}

int Main(int argc, char** argv) {
  const runtime::Config defaults;
  Args args;
  args.fusion_threshold_mib = static_cast<double>(defaults.fusion_threshold_bytes) / (1 << 20);
  args.cycle_time_ms = absl::ToDoubleMilliseconds(defaults.cycle_time);
  args.nccl_streams = defaults.num_nccl_streams;
  const std::vector<std::string> names = TensorSetNames();
  for (const char* want : {"resnet50", "bert-base", "tiny1000"}) {
    if (std::find(names.begin(), names.end(), want) != names.end()) args.sets.push_back(want);
  }

  CLI::App app{"chorus_gpu_steps_bench: single-rank training steps on GPU tensors"};
  app.add_option("--sets", args.sets, "Tensor sets")->delimiter(',')->check(CLI::IsMember(names));
  app.add_option("--steps", args.steps, "Timed steps per set")->check(CLI::PositiveNumber);
  app.add_option("--warmup", args.warmup, "Untimed steps per set")->check(CLI::NonNegativeNumber);
  app.add_option("--iters", args.iters, "Samples of each breakdown measurement")
      ->check(CLI::PositiveNumber);
  app.add_option("--fusion-threshold-mib", args.fusion_threshold_mib,
                 "Runtime fusion threshold, MiB (default: runtime/config.h's)")
      ->check(CLI::Range(0.0, 65536.0));
  app.add_option("--cycle-time-ms", args.cycle_time_ms,
                 "Runtime cycle time, ms (default: runtime/config.h's)")
      ->check(CLI::Range(0.0, 1000.0));
  app.add_option("--nccl-streams", args.nccl_streams,
                 "Runtime NCCL streams per process set (default: runtime/config.h's)")
      ->check(CLI::Range(1, 16));
  app.add_option("--json", args.json_path, "Also write the results to FILE as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  const std::shared_ptr<GpuPlatform> platform = ops::gpu::DefaultGpuPlatform();
  const absl::Status usable = platform->CheckDevice(kDevice);
  if (!usable.ok()) {
    std::printf("SKIPPED: GPU %d is not usable on platform %s: %s\n", kDevice,
                platform->name().c_str(), std::string(usable.message()).c_str());
    return 77;
  }
  BENCH_CUDA(cudaSetDevice(kDevice));
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, kDevice));

  runtime::Config config = defaults;
  config.fusion_threshold_bytes = static_cast<int64_t>(args.fusion_threshold_mib * (1 << 20));
  config.cycle_time = absl::Microseconds(static_cast<int64_t>(args.cycle_time_ms * 1000.0));
  config.num_nccl_streams = args.nccl_streams;
  std::printf("device %d: %s, %d SMs; platform %s\n", kDevice, prop.name, prop.multiProcessorCount,
              platform->name().c_str());
  std::printf(
      "one rank (InProcessFabric(1), no MPI); %d timed steps after %d warmup per set; "
      "breakdown: median of %d samples\n",
      args.steps, args.warmup, args.iters);
  std::printf(
      "runtime config (runtime/config.h defaults unless overridden): fusion threshold "
      "%.1f MiB, cycle time %s, cache capacity %d, NCCL streams %d, idle cycle %s, "
      "no-progress bound %s\n",
      static_cast<double>(config.fusion_threshold_bytes) / (1 << 20),
      absl::FormatDuration(config.cycle_time).c_str(), config.cache_capacity,
      config.num_nccl_streams, absl::FormatDuration(config.idle_cycle_time).c_str(),
      absl::FormatDuration(config.no_progress_timeout).c_str());

  cudaStream_t stream, framework;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  BENCH_CUDA(cudaStreamCreateWithFlags(&framework, cudaStreamNonBlocking));
  // Slots large enough for every plan here, so no slot grows while timing.
  BatchedCopyScratch::Options scratch_options;
  scratch_options.initial_chunk_capacity = 1 << 16;
  absl::StatusOr<std::unique_ptr<BatchedCopyScratch>> scratch =
      BatchedCopyScratch::Create(scratch_options);
  Check(scratch.status(), "batched copy scratch");
  absl::StatusOr<std::string> id = platform->NewCommunicatorId();
  Check(id.status(), "NCCL communicator id");
  absl::StatusOr<std::unique_ptr<GpuCommunicator>> comm =
      platform->CreateCommunicator(*id, 1, 0, kDevice);
  Check(comm.status(), "single-rank NCCL communicator");
  BENCH_CUDA(cudaSetDevice(kDevice));

  DeviceCalls calls;
  std::vector<SetResult> results;
  {
    testing::InProcessFabric fabric(1);
    absl::StatusOr<std::unique_ptr<runtime::Runtime>> rt =
        runtime::Runtime::Create(config, fabric.CreateController(0), {},
                                 std::make_shared<CountingPlatform>(platform, &calls));
    Check(rt.status(), "runtime");
    for (size_t i = 0; i < args.sets.size(); ++i) {
      results.push_back(RunSet(args, args.sets[i], static_cast<int>(i), **rt, calls, **comm, stream,
                               framework, scratch->get()));
      PrintSet(results.back());
      std::fflush(stdout);
      if (results.back().runtime_failed) break;  // the runtime may have stopped
    }
    (*rt)->Shutdown();
    rt->reset();
  }
  PrintSummary(results);

  comm->reset();
  scratch->reset();
  BENCH_CUDA(cudaStreamDestroy(framework));
  BENCH_CUDA(cudaStreamDestroy(stream));

  bool ok = !results.empty();
  nlohmann::json jsets = nlohmann::json::array();
  for (const SetResult& r : results) {
    ok = ok && r.ok;
    jsets.push_back(SetJson(r));
  }
  if (!args.json_path.empty()) {
    const nlohmann::json result = {
        {"device", prop.name},
        {"steps", args.steps},
        {"warmup", args.warmup},
        {"iters", args.iters},
        {"config",
         {{"fusion_threshold_bytes", config.fusion_threshold_bytes},
          {"cycle_time_ms", absl::ToDoubleMilliseconds(config.cycle_time)},
          {"cache_capacity", config.cache_capacity},
          {"num_nccl_streams", config.num_nccl_streams}}},
        {"sets", jsets}};
    std::ofstream f(args.json_path);
    f << result.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", args.json_path.c_str());
      return 1;
    }
  }
  if (!ok) {
    std::fprintf(stderr, "chorus_gpu_steps_bench: FAILED (see above)\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace chorus::bench

int main(int argc, char** argv) { return chorus::bench::Main(argc, argv); }
