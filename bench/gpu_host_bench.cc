// chorus_gpu_host_bench: the runtime's host cost on its GPU path, with no GPU. One rank's
// training steps over a model's tensor set, every tensor "on GPU 0" of a platform whose device
// work takes no time (NullGpuPlatform below: streams and events are tokens, every event is done
// once recorded, copies and collectives do nothing, device memory is host memory). A step is
// what chorus_gpu_steps_bench times on a real GPU, minus the device work: one submission per
// tensor (in-place float32 Average allreduce, its fixed name, ready on a framework stream), in
// reverse definition order, then Release of every handle. Each set runs twice: registered ops
// submitted by slot (chorus::Submit, the fast path) and Enqueue by name. So the step time IS the
// step minus the device work: submission, ready events, negotiation, the fusion plan and its copy
// plans, the NCCL calls' host side, the completion thread and the callbacks.
//
//   chorus_gpu_host_bench [--sets resnet50,tiny1000] [--submit registered,enqueue]
//                         [--steps 200] [--warmup 20]
//
// The baseline, in the same run and process: the same set as CPU tensors through the same kind
// of runtime (a one-rank allreduce moves nothing there either: Executor::AllreduceAlone), so
// the ratio is the GPU path's host cost over the CPU path's. Medians and p90 over the timed
// steps (bench/measure.h's Summarize); every op must succeed (exit 1 otherwise, 2 on bad
// arguments).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "base/status_macros.h"
#include "bench/measure.h"
#include "bench/tensor_sets.h"
#include "chorus/chorus.h"
#include "chorus/types.h"
#include "ops/gpu_platform.h"
#include "runtime/config.h"
#include "runtime/runtime.h"
#include "test/support/in_process_fabric.h"
#include <CLI/CLI.hpp>

namespace chorus::bench {
namespace {

using ops::gpu::BatchedCopyPlan;
using ops::gpu::EventHandle;
using ops::gpu::GpuCommunicator;
using ops::gpu::GpuPlatform;
using ops::gpu::StreamHandle;

constexpr int kDevice = 0;

class NullCommunicator final : public GpuCommunicator {
 public:
  explicit NullCommunicator(int device) : device_(device) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int device() const override { return device_; }
  absl::Status Allreduce(const void*, void*, int64_t, DataType, ReduceOp, StreamHandle) override {
    return absl::OkStatus();
  }
  absl::Status Allgatherv(const void*, void*, absl::Span<const int64_t>, StreamHandle) override {
    return absl::OkStatus();
  }
  absl::Status Broadcast(void*, int64_t, int, StreamHandle) override { return absl::OkStatus(); }
  absl::Status Alltoallv(const void*, absl::Span<const int64_t>, absl::Span<const int64_t>, void*,
                         absl::Span<const int64_t>, absl::Span<const int64_t>,
                         StreamHandle) override {
    return absl::OkStatus();
  }
  absl::Status ReduceScatter(const void*, void*, absl::Span<const int64_t>, DataType, ReduceOp,
                             StreamHandle) override {
    return absl::OkStatus();
  }
  absl::Status AsyncError() override { return absl::OkStatus(); }
  void Abort() override {}

 private:
  const int device_;
};

// Device work that takes no time; one device, one-rank communicators.
class NullGpuPlatform final : public GpuPlatform {
 public:
  std::string name() const override { return "null"; }
  absl::Status CheckDevice(int device) override {
    return device == kDevice ? absl::OkStatus()
                             : absl::FailedPreconditionError("the null platform has GPU 0 only");
  }
  absl::StatusOr<StreamHandle> CreateStream(int) override { return new char; }
  void DestroyStream(int, StreamHandle stream) override { delete static_cast<char*>(stream); }
  absl::StatusOr<EventHandle> CreateEvent(int) override { return new char; }
  void DestroyEvent(int, EventHandle event) override { delete static_cast<char*>(event); }
  absl::Status RecordEvent(int, EventHandle, StreamHandle) override { return absl::OkStatus(); }
  absl::Status StreamWaitEvent(int, StreamHandle, EventHandle) override { return absl::OkStatus(); }
  absl::StatusOr<bool> EventDone(int, EventHandle) override { return true; }
  absl::Status EnqueueHostCallback(int, StreamHandle, void (*fn)(void*), void* arg) override {
    fn(arg);  // the stream's work is done as soon as it is queued
    return absl::OkStatus();
  }
  absl::StatusOr<void*> Allocate(int, int64_t bytes) override {
    void* p = std::aligned_alloc(
        256, static_cast<size_t>((std::max<int64_t>(bytes, 1) + 255) / 256 * 256));
    if (p == nullptr) return absl::ResourceExhaustedError("null platform: out of host memory");
    return p;
  }
  void Free(int, void* ptr) override { std::free(ptr); }
  absl::Status EnqueueCopy(int, const BatchedCopyPlan&, StreamHandle) override {
    return absl::OkStatus();
  }
  absl::Status EnqueueFillIdentity(int, void*, int64_t, DataType, ReduceOp, StreamHandle) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> NewCommunicatorId() override { return std::string("null"); }
  absl::StatusOr<std::unique_ptr<GpuCommunicator>> CreateCommunicator(const std::string&, int size,
                                                                      int, int device) override {
    if (size != 1) return absl::FailedPreconditionError("the null platform has one rank");
    return std::unique_ptr<GpuCommunicator>(std::make_unique<NullCommunicator>(device));
  }
};

// How a step submits its ops: registered once and submitted by slot (chorus::Submit, the fast
// path), or by name through Enqueue every step.
enum class Submission { kRegistered, kEnqueue };

// Steps of `specs` on `device` (-1: CPU) through a fresh one-rank runtime, submitted `how`; the
// step times in microseconds.
absl::StatusOr<Summary> RunSteps(const std::vector<TensorSpec>& specs, int device, Submission how,
                                 int steps, int warmup, const std::string& prefix) {
  runtime::Config config;
  testing::InProcessFabric fabric(1);
  CHORUS_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Runtime> rt,
                          runtime::Runtime::Create(config, fabric.CreateController(0), {},
                                                   std::make_shared<NullGpuPlatform>()));
  std::vector<std::vector<float>> tensors;
  tensors.reserve(specs.size());
  for (const TensorSpec& s : specs) tensors.emplace_back(s.num_elements(), 1.0f);
  StreamHandle framework = nullptr;
  std::unique_ptr<char> framework_token;
  if (device >= 0) {
    framework_token = std::make_unique<char>();
    framework = framework_token.get();
  }
  auto request = [&](size_t i) {
    OpRequest r;
    r.type = OpType::kAllreduce;
    r.name = prefix + specs[i].name;
    r.input = TensorView{tensors[i].data(), DataType::kFloat32, specs[i].shape, device};
    r.reduce_op = ReduceOp::kAverage;
    r.stream = framework;
    return r;
  };
  std::vector<OpSlot> slots(specs.size(), -1);
  if (how == Submission::kRegistered) {
    for (size_t i = 0; i < specs.size(); ++i) {
      CHORUS_ASSIGN_OR_RETURN(slots[i], rt->RegisterOp(request(i)));
    }
  }
  std::vector<Handle> handles;
  handles.reserve(specs.size());
  std::vector<double> samples;
  absl::Status first;
  for (int step = 0; step < warmup + steps && first.ok(); ++step) {
    handles.clear();
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t k = 0; k < specs.size(); ++k) {
      const size_t i = specs.size() - 1 - k;
      absl::StatusOr<Handle> h;
      if (how == Submission::kRegistered) {
        SubmitArgs args(tensors[i].data());
        args.stream = framework;
        h = rt->Submit(slots[i], args);
      } else {
        h = rt->Enqueue(request(i));
      }
      if (!h.ok()) {
        first = h.status();
        break;
      }
      handles.push_back(*h);
    }
    for (const Handle h : handles) {
      absl::StatusOr<OpResult> result = rt->Release(h);
      const absl::Status st = result.ok() ? result->status : result.status();
      if (!st.ok() && first.ok()) first = st;
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (step >= warmup) {
      samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  rt->Shutdown();
  if (!first.ok()) return first;
  return Summarize(std::move(samples));
}

int Main(int argc, char** argv) {
  std::vector<std::string> sets = {"resnet50", "tiny1000"};
  int steps = 200;
  int warmup = 20;
  CLI::App app{
      "The runtime's host cost on its GPU path: steps on a platform whose device work "
      "takes no time, against the CPU path"};
  app.add_option("--sets", sets, "Tensor sets (bench/tensor_sets.h)")->delimiter(',');
  std::vector<std::string> ways = {"registered", "enqueue"};
  app.add_option("--submit", ways, "How steps submit: registered (by slot), enqueue (by name)")
      ->delimiter(',')
      ->check(CLI::IsMember({"registered", "enqueue"}));
  app.add_option("--steps", steps, "Timed steps per set and path")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "Untimed steps first")->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  std::printf("one rank (InProcessFabric(1)); %d timed steps after %d warmup; runtime defaults\n",
              steps, warmup);
  std::printf("%-10s %7s %-10s  %-34s %-34s %s\n", "set", "tensors", "submitted",
              "GPU path (null device): median/p90", "CPU path: median/p90", "GPU/CPU");
  for (const std::string& name : sets) {
    absl::StatusOr<std::vector<TensorSpec>> specs = GetTensorSet(name);
    if (!specs.ok()) {
      std::fprintf(stderr, "%s\n", std::string(specs.status().message()).c_str());
      return 2;
    }
    for (const std::string& way : ways) {
      const Submission how = way == "registered" ? Submission::kRegistered : Submission::kEnqueue;
      absl::StatusOr<Summary> gpu = RunSteps(*specs, kDevice, how, steps, warmup, "gpu.");
      absl::StatusOr<Summary> cpu = RunSteps(*specs, -1, how, steps, warmup, "cpu.");
      if (!gpu.ok() || !cpu.ok()) {
        std::fprintf(stderr, "chorus_gpu_host_bench: %s (%s): %s\n", name.c_str(), way.c_str(),
                     std::string((gpu.ok() ? cpu.status() : gpu.status()).message()).c_str());
        return 1;
      }
      const double n = static_cast<double>(specs->size());
      std::printf(
          "%-10s %7zu %-10s  %8.1f / %8.1f us (%5.2f us/t)  %8.1f / %8.1f us (%5.2f us/t)  "
          "%.2f\n",
          name.c_str(), specs->size(), way.c_str(), gpu->median, gpu->p90, gpu->median / n,
          cpu->median, cpu->p90, cpu->median / n, gpu->median / cpu->median);
    }
  }
  return 0;
}

}  // namespace
}  // namespace chorus::bench

int main(int argc, char** argv) { return chorus::bench::Main(argc, argv); }
