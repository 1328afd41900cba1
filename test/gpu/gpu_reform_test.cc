// The runtime's GPU path across a re-form on a real device (Note [Re-forming in place] in
// runtime/runtime.h): one rank over an in-process fabric (no MPI) with the CUDA + NCCL platform
// allreduces a fused group of GPU tensors, is suspended (Shutdown, as chorus::Suspend does), is
// refused while suspended, re-forms in place over a new one-rank world and allreduces again. The
// data plane must drop the old world's NCCL communicator and build one for the new world; the
// platform is wrapped to count the communicators it creates.
//
// One rank only: NCCL refuses two ranks on one device. The fake-platform version with several
// ranks is in test/unit/runtime_gpu_failures_test.cc.
//
// Without a CUDA device the binary exits 77 (ctest: skipped) with the platform's reason.
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include "chorus/types.h"
#include "ops/gpu_platform.h"
#include "runtime/runtime.h"
#include "test/support/catch_session.h"
#include "test/support/fast_cycle_config.h"
#include "test/support/in_process_fabric.h"

namespace chorus::runtime {
namespace {

using ops::gpu::GpuCommunicator;
using ops::gpu::GpuPlatform;

constexpr int kDevice = 0;

#define CUDA_REQUIRE(call)                                                                      \
  do {                                                                                          \
    const cudaError_t cuda_err_ = (call);                                                       \
    INFO(#call << ": " << cudaGetErrorName(cuda_err_) << " " << cudaGetErrorString(cuda_err_)); \
    REQUIRE(cuda_err_ == cudaSuccess);                                                          \
  } while (0)

// Forwards to `inner` and counts the communicators created. Thread-safe as `inner` is.
class CommunicatorCountingPlatform final : public GpuPlatform {
 public:
  explicit CommunicatorCountingPlatform(std::shared_ptr<GpuPlatform> inner)
      : inner_(std::move(inner)) {}
  int communicators_created() const { return created_.load(); }

  std::string name() const override { return inner_->name(); }
  absl::Status CheckDevice(int device) override { return inner_->CheckDevice(device); }
  absl::StatusOr<ops::gpu::StreamHandle> CreateStream(int device) override {
    return inner_->CreateStream(device);
  }
  void DestroyStream(int device, ops::gpu::StreamHandle s) override {
    inner_->DestroyStream(device, s);
  }
  absl::StatusOr<ops::gpu::EventHandle> CreateEvent(int device) override {
    return inner_->CreateEvent(device);
  }
  void DestroyEvent(int device, ops::gpu::EventHandle e) override {
    inner_->DestroyEvent(device, e);
  }
  absl::Status RecordEvent(int device, ops::gpu::EventHandle e, ops::gpu::StreamHandle s) override {
    return inner_->RecordEvent(device, e, s);
  }
  absl::Status StreamWaitEvent(int device, ops::gpu::StreamHandle s,
                               ops::gpu::EventHandle e) override {
    return inner_->StreamWaitEvent(device, s, e);
  }
  absl::Status EnqueueHostCallback(int device, ops::gpu::StreamHandle stream, void (*fn)(void*),
                                   void* arg) override {
    return inner_->EnqueueHostCallback(device, stream, fn, arg);
  }
  absl::StatusOr<bool> EventDone(int device, ops::gpu::EventHandle e) override {
    return inner_->EventDone(device, e);
  }
  absl::StatusOr<void*> Allocate(int device, int64_t bytes) override {
    return inner_->Allocate(device, bytes);
  }
  void Free(int device, void* ptr) override { inner_->Free(device, ptr); }
  absl::Status EnqueueCopy(int device, const ops::gpu::BatchedCopyPlan& plan,
                           ops::gpu::StreamHandle s) override {
    return inner_->EnqueueCopy(device, plan, s);
  }
  absl::Status EnqueueFillIdentity(int device, void* ptr, int64_t count, DataType dtype,
                                   ReduceOp op, ops::gpu::StreamHandle s) override {
    return inner_->EnqueueFillIdentity(device, ptr, count, dtype, op, s);
  }
  absl::StatusOr<std::string> NewCommunicatorId() override { return inner_->NewCommunicatorId(); }
  absl::StatusOr<std::unique_ptr<GpuCommunicator>> CreateCommunicator(const std::string& id,
                                                                      int size, int rank,
                                                                      int device) override {
    created_.fetch_add(1);
    return inner_->CreateCommunicator(id, size, rank, device);
  }

 private:
  const std::shared_ptr<GpuPlatform> inner_;
  std::atomic<int> created_{0};
};

// A float32 tensor in device memory; freed at destruction.
class DeviceTensor {
 public:
  explicit DeviceTensor(const std::vector<float>& values) : n_(values.size()) {
    CUDA_REQUIRE(cudaMalloc(&ptr_, n_ * sizeof(float)));
    CUDA_REQUIRE(cudaMemcpy(ptr_, values.data(), n_ * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~DeviceTensor() { (void)cudaFree(ptr_); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  TensorView view() const {
    return TensorView{ptr_, DataType::kFloat32, {static_cast<int64_t>(n_)}, kDevice};
  }
  std::vector<float> Read() const {
    std::vector<float> out(n_);
    CUDA_REQUIRE(cudaMemcpy(out.data(), ptr_, n_ * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  void* ptr_ = nullptr;
  size_t n_;
};

std::vector<float> Ramp(size_t n, float first) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = first + static_cast<float>(i % 1000);
  return v;
}

std::vector<float> Times(std::vector<float> v, float factor) {
  for (float& x : v) x *= factor;
  return v;
}

OpRequest GpuSum(const std::string& name, const DeviceTensor& t, double postscale) {
  OpRequest r;
  r.type = OpType::kAllreduce;
  r.name = name;
  r.input = t.view();
  r.reduce_op = ReduceOp::kSum;
  r.postscale_factor = postscale;
  return r;
}

// Allreduces the three tensors (fused: one batch) with `postscale`; every op must succeed.
void AllreduceGroup(Runtime& rt, const std::vector<std::unique_ptr<DeviceTensor>>& tensors,
                    double postscale) {
  std::vector<Handle> handles;
  for (size_t i = 0; i < tensors.size(); ++i) {
    absl::StatusOr<Handle> h = rt.Enqueue(GpuSum(absl::StrCat("grad.", i), *tensors[i], postscale));
    INFO("enqueue grad." << i << ": " << h.status().ToString());
    REQUIRE(h.ok());
    handles.push_back(*h);
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    const absl::Status st = rt.Wait(handles[i]);
    INFO("grad." << i << ": " << st.ToString());
    REQUIRE(st.ok());
  }
}

TEST_CASE("one rank suspended and re-formed in place allreduces GPU tensors in the new world",
          "[gpu][runtime][reform]") {
  const auto platform =
      std::make_shared<CommunicatorCountingPlatform>(ops::gpu::DefaultGpuPlatform());
  // Sizes: one below a chunk, one odd, one of several MB (the fused copy's table path).
  const std::vector<std::vector<float>> initial = {Ramp(3, 1), Ramp(100'003, -500),
                                                   Ramp(size_t{3} << 20, 7)};
  std::vector<std::unique_ptr<DeviceTensor>> tensors;
  for (const std::vector<float>& v : initial) tensors.push_back(std::make_unique<DeviceTensor>(v));
  const auto expect_times = [&](float factor) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      INFO("grad." << i);
      CHECK(tensors[i]->Read() == Times(initial[i], factor));
    }
  };

  testing::InProcessFabric world1(1);
  absl::StatusOr<std::unique_ptr<Runtime>> created =
      Runtime::Create(testing::FastCycleConfig(), world1.CreateController(0), {}, platform);
  INFO(created.status().ToString());
  REQUIRE(created.ok());
  Runtime& rt = **created;

  AllreduceGroup(rt, tensors, 2.0);  // sum over one rank, doubled
  expect_times(2.0f);
  CHECK(platform->communicators_created() == 1);

  rt.Shutdown("chorus is suspended until its world is re-formed");
  absl::StatusOr<Handle> refused = rt.Enqueue(GpuSum("grad.0", *tensors[0], 1.0));
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("suspended"));

  testing::InProcessFabric world2(1);
  const absl::Status reformed = rt.Reform(testing::FastCycleConfig(), world2.CreateController(0));
  INFO(reformed.ToString());
  REQUIRE(reformed.ok());
  CHECK(rt.topology().size == 1);

  AllreduceGroup(rt, tensors, 3.0);  // the same names again, in the new world
  expect_times(6.0f);
  // The old world's communicator went with it; the new world built its own.
  CHECK(platform->communicators_created() == 2);
  rt.Shutdown();
}

}  // namespace
}  // namespace chorus::runtime

int main(int argc, char** argv) {
  const absl::Status usable = chorus::ops::gpu::DefaultGpuPlatform()->CheckDevice(0);
  if (!usable.ok()) {
    std::printf("SKIPPED: %s\n", std::string(usable.message()).c_str());
    return 77;
  }
  return chorus::testing::RunCatch(argc, argv);
}
