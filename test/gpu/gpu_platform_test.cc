// GPU tests of CudaPlatform (ops/cuda/cuda_platform.h) and its NCCL communicators: stream and
// event ordering, device memory, the batched copy against the host reference executor, the
// identity fill against ops::FillIdentity, and every collective of a one-rank communicator
// (one rank: the output must equal the input, and the tests check that the output buffer was
// written, not left alone), then Abort.
//
// Work that must not be done yet is held behind a Gate (a host function that blocks its stream
// until the test opens it), so "not done" is observed deterministically, never by timing.
//
// Without a CUDA device the binary checks the no-device contract instead (every call fails
// with FailedPrecondition, nothing crashes, no CUDA error is left behind), then exits 77
// (ctest: skipped) with the reason; it exits 1 if that contract is broken.
#include "ops/gpu_platform.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include "chorus/types.h"
#include "ops/cpu/reduce_kernels.h"
#include "ops/cuda/batched_copy.h"
#include "ops/cuda/batched_copy_plan.h"
#include "ops/cuda/batched_copy_reference.h"
#include "ops/cuda/cuda_platform.h"
#include "test/support/catch_session.h"
#include "test/support/random_copy_batch.h"

namespace chorus::ops::gpu {
namespace {

using testing::ArenaBatch;
using testing::CountMismatches;
using testing::NanRanges;
using testing::RandomArenaBatch;

constexpr int kDevice = 0;

#define CUDA_REQUIRE(call)                                                                      \
  do {                                                                                          \
    const cudaError_t cuda_err_ = (call);                                                       \
    INFO(#call << ": " << cudaGetErrorName(cuda_err_) << " " << cudaGetErrorString(cuda_err_)); \
    REQUIRE(cuda_err_ == cudaSuccess);                                                          \
  } while (0)

#define REQUIRE_OK(expr)                       \
  do {                                         \
    const absl::Status req_st_ = (expr);       \
    INFO(#expr << ": " << req_st_.ToString()); \
    REQUIRE(req_st_.ok());                     \
  } while (0)

GpuPlatform& Platform() {
  static const std::shared_ptr<GpuPlatform> platform = NewCudaPlatform();
  return *platform;
}

// Device memory from the platform.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    absl::StatusOr<void*> p = Platform().Allocate(kDevice, static_cast<int64_t>(bytes));
    INFO(p.status().ToString());
    REQUIRE(p.ok());
    ptr_ = *p;
  }
  ~DeviceBuffer() { Platform().Free(kDevice, ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uint8_t* get() const { return static_cast<uint8_t*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

class Stream {
 public:
  Stream() {
    absl::StatusOr<StreamHandle> s = Platform().CreateStream(kDevice);
    INFO(s.status().ToString());
    REQUIRE(s.ok());
    s_ = *s;
  }
  ~Stream() { Platform().DestroyStream(kDevice, s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  StreamHandle handle() const { return s_; }
  cudaStream_t get() const { return static_cast<cudaStream_t>(s_); }
  void Sync() const { CUDA_REQUIRE(cudaStreamSynchronize(get())); }

 private:
  StreamHandle s_ = nullptr;
};

class Event {
 public:
  Event() {
    absl::StatusOr<EventHandle> e = Platform().CreateEvent(kDevice);
    INFO(e.status().ToString());
    REQUIRE(e.ok());
    e_ = *e;
  }
  ~Event() { Platform().DestroyEvent(kDevice, e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  EventHandle handle() const { return e_; }

  bool Done() const {
    absl::StatusOr<bool> done = Platform().EventDone(kDevice, e_);
    INFO(done.status().ToString());
    REQUIRE(done.ok());
    return *done;
  }

 private:
  EventHandle e_ = nullptr;
};

// Holds `stream` (work queued on it after the gate waits) until Open(). Destruction opens the
// gate and waits for the stream, so the host function never outlives the gate.
class Gate {
 public:
  explicit Gate(const Stream& stream) : stream_(stream.get()) {
    CUDA_REQUIRE(cudaLaunchHostFunc(stream_, &Gate::Wait, this));
  }
  ~Gate() {
    Open();
    (void)cudaStreamSynchronize(stream_);
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  void Open() { open_.store(true, std::memory_order_release); }

 private:
  static void CUDART_CB Wait(void* self) {
    const auto* gate = static_cast<const Gate*>(self);
    while (!gate->open_.load(std::memory_order_acquire)) std::this_thread::yield();
  }

  cudaStream_t stream_;
  std::atomic<bool> open_{false};
};

// Uploads and memsets run on the legacy default stream, which the platform's non-blocking
// streams do not wait for: both wait for the device before returning.
void Upload(const DeviceBuffer& d, const std::vector<uint8_t>& h) {
  REQUIRE(h.size() <= d.size());
  CUDA_REQUIRE(cudaMemcpy(d.get(), h.data(), h.size(), cudaMemcpyHostToDevice));
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

void SetBytes(void* p, int value, size_t bytes) {
  CUDA_REQUIRE(cudaMemset(p, value, bytes));
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

std::vector<uint8_t> Download(const DeviceBuffer& d) {
  std::vector<uint8_t> h(d.size());
  CUDA_REQUIRE(cudaMemcpy(h.data(), d.get(), d.size(), cudaMemcpyDeviceToHost));
  return h;
}

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

BatchedCopyPlan BytePlan(const void* src, void* dst, int64_t bytes) {
  absl::StatusOr<BatchedCopyPlan> plan = PlanBatchedCopy(
      {CopyEntry{src, dst, bytes, DataType::kUint8, DataType::kUint8}}, 1.0, {4096, true});
  REQUIRE(plan.ok());
  return *std::move(plan);
}

// ---------------------------------------------------------------------------------------------
// Devices, streams, events, memory.

TEST_CASE("Device checks", "[gpu][platform]") {
  CHECK(Platform().name() == "CUDA");
  int count = 0;
  CUDA_REQUIRE(cudaGetDeviceCount(&count));
  for (int d = 0; d < count; ++d) CHECK(Platform().CheckDevice(d).ok());
  for (int d : {-1, count, count + 5}) {
    const absl::Status st = Platform().CheckDevice(d);
    CHECK(absl::IsFailedPrecondition(st));
    CHECK_THAT(std::string(st.message()),
               Catch::Contains("GPU " + std::to_string(d) +
                               " is not visible: " + std::to_string(count) + " CUDA device(s)"));
    CHECK(absl::IsFailedPrecondition(Platform().CreateStream(d).status()));
    CHECK(absl::IsFailedPrecondition(Platform().Allocate(d, 16).status()));
  }
  // The failed cudaSetDevice calls left no error behind.
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("An event orders a copy on one stream after a copy on another", "[gpu][platform]") {
  constexpr int64_t kBytes = int64_t{3} << 20;  // 768 chunks of 4 KiB: the device table path
  const std::vector<uint8_t> data = RandomBytes(kBytes, 7);
  DeviceBuffer src(kBytes), mid(kBytes), dst(kBytes);
  Upload(src, data);
  SetBytes(mid.get(), 0, kBytes);
  SetBytes(dst.get(), 0, kBytes);
  Stream a, b;
  Event copied_in, copied_out;
  {
    Gate gate(a);
    REQUIRE_OK(Platform().EnqueueCopy(kDevice, BytePlan(src.get(), mid.get(), kBytes), a.handle()));
    REQUIRE_OK(Platform().RecordEvent(kDevice, copied_in.handle(), a.handle()));
    REQUIRE_OK(Platform().StreamWaitEvent(kDevice, b.handle(), copied_in.handle()));
    REQUIRE_OK(Platform().EnqueueCopy(kDevice, BytePlan(mid.get(), dst.get(), kBytes), b.handle()));
    REQUIRE_OK(Platform().RecordEvent(kDevice, copied_out.handle(), b.handle()));
    // Stream a is held by the gate, and b waits for a.
    CHECK_FALSE(copied_in.Done());
    CHECK_FALSE(copied_out.Done());
    gate.Open();
    b.Sync();
  }
  CHECK(copied_in.Done());
  CHECK(copied_out.Done());
  CHECK(Download(dst) == data);
}

TEST_CASE("A fresh event is done; an event on the legacy default stream works", "[gpu][platform]") {
  Event e;
  CHECK(e.Done());
  DeviceBuffer buf(4096);
  SetBytes(buf.get(), 0, 4096);
  REQUIRE_OK(Platform().EnqueueFillIdentity(kDevice, buf.get(), 1024, DataType::kFloat32,
                                            ReduceOp::kProduct, nullptr));
  REQUIRE_OK(Platform().RecordEvent(kDevice, e.handle(), nullptr));
  CUDA_REQUIRE(cudaEventSynchronize(static_cast<cudaEvent_t>(e.handle())));
  CHECK(e.Done());
  std::vector<float> out(1024);
  CUDA_REQUIRE(cudaMemcpy(out.data(), buf.get(), 4096, cudaMemcpyDeviceToHost));
  CHECK(out == std::vector<float>(1024, 1.0f));
}

TEST_CASE("Allocate and Free", "[gpu][platform]") {
  {
    DeviceBuffer buf(size_t{1} << 20);
    const std::vector<uint8_t> data = RandomBytes(buf.size(), 3);
    Upload(buf, data);
    CHECK(Download(buf) == data);
  }
  absl::StatusOr<void*> empty = Platform().Allocate(kDevice, 0);
  REQUIRE(empty.ok());
  CHECK(*empty != nullptr);
  Platform().Free(kDevice, *empty);
  Platform().Free(kDevice, nullptr);  // no-op
  CHECK(absl::IsInvalidArgument(Platform().Allocate(kDevice, -1).status()));
  // 4 PiB: more than any device has.
  const absl::Status huge = Platform().Allocate(kDevice, int64_t{1} << 52).status();
  INFO(huge.ToString());
  CHECK(absl::IsResourceExhausted(huge));
  CHECK(cudaGetLastError() == cudaSuccess);
}

// ---------------------------------------------------------------------------------------------
// The batched copy.

std::vector<CopyEntry> Rebase(const std::vector<CopyEntry>& entries, const uint8_t* from,
                              uint8_t* to) {
  std::vector<CopyEntry> out = entries;
  for (CopyEntry& e : out) {
    if (e.num_elements == 0) continue;
    e.src = to + (static_cast<const uint8_t*>(e.src) - from);
    e.dst = to + (static_cast<uint8_t*>(e.dst) - from);
  }
  return out;
}

int64_t BatchCount(std::mt19937_64& rng) {
  static constexpr int64_t kCounts[] = {0, 1, 3, 8, 17, 64, 65, 1000, 4099};
  return rng() % 5 == 0 ? static_cast<int64_t>(rng() % 200'000)
                        : kCounts[rng() % (sizeof(kCounts) / sizeof(kCounts[0]))];
}

TEST_CASE("EnqueueCopy of random batches matches the host reference", "[gpu][platform]") {
  Stream stream;
  const int64_t chunk_bytes = GENERATE(int64_t{256}, int64_t{65536});
  size_t inline_plans = 0, table_plans = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    INFO("seed " << seed << ", chunk_bytes " << chunk_bytes);
    const ArenaBatch b = RandomArenaBatch(seed * 104729 + static_cast<uint64_t>(chunk_bytes),
                                          {seed % 4 == 0 ? 3 : 30, BatchCount});
    DeviceBuffer d(b.arena.size());
    Upload(d, b.arena);
    std::vector<uint8_t> want = b.arena;
    const std::vector<CopyEntry> host_entries = Rebase(b.entries, b.arena.data(), want.data());
    absl::StatusOr<BatchedCopyPlan> host_plan =
        PlanBatchedCopy(host_entries, b.scale, {chunk_bytes, true});
    REQUIRE(host_plan.ok());
    RunBatchedCopyOnHost(*host_plan);
    absl::StatusOr<BatchedCopyPlan> dev_plan =
        PlanBatchedCopy(Rebase(b.entries, b.arena.data(), d.get()), b.scale, {chunk_bytes, true});
    REQUIRE(dev_plan.ok());
    REQUIRE_OK(Platform().EnqueueCopy(kDevice, *dev_plan, stream.handle()));
    stream.Sync();
    CHECK(CountMismatches(Download(d), want, NanRanges(host_entries, b.scale, want.data())) == 0);
    (dev_plan->chunks.size() > kMaxInlineChunks ? table_plans : inline_plans) += 1;
  }
  if (chunk_bytes == 256) CHECK(table_plans > 0);
  if (chunk_bytes == 65536) CHECK(inline_plans > 0);
  // An empty plan enqueues nothing.
  CHECK(Platform().EnqueueCopy(kDevice, BatchedCopyPlan{}, stream.handle()).ok());
}

// ---------------------------------------------------------------------------------------------
// The identity fill.

constexpr DataType kReducible[] = {DataType::kUint8,    DataType::kInt8,    DataType::kInt16,
                                   DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                                   DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64};

TEST_CASE("EnqueueFillIdentity writes ops::FillIdentity's bytes and nothing else",
          "[gpu][platform]") {
  const DataType dtype = GENERATE(from_range(std::begin(kReducible), std::end(kReducible)));
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                               ReduceOp::kProduct);
  const int64_t count = GENERATE(int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000},
                                 int64_t{4096 * 256 + 3}, int64_t{3'000'001});
  INFO(DataTypeName(dtype) << " " << ReduceOpName(op) << " x " << count);
  const auto size = static_cast<int64_t>(DataTypeSize(dtype));
  constexpr int64_t kLead = 3, kTail = 5;  // guard elements around the filled range
  const auto bytes = static_cast<size_t>((kLead + count + kTail) * size);
  DeviceBuffer buf(bytes);
  std::vector<uint8_t> want(bytes, 0xA5);
  Upload(buf, want);
  FillIdentity(want.data() + kLead * size, count, dtype, op);
  Stream stream;
  REQUIRE_OK(Platform().EnqueueFillIdentity(kDevice, buf.get() + kLead * size, count, dtype, op,
                                            stream.handle()));
  stream.Sync();
  CHECK(CountMismatches(Download(buf), want, {}) == 0);
}

TEST_CASE("EnqueueFillIdentity rejects what has no identity", "[gpu][platform]") {
  DeviceBuffer buf(64);
  Stream stream;
  const auto fill = [&](void* p, int64_t n, DataType t, ReduceOp op) {
    return Platform().EnqueueFillIdentity(kDevice, p, n, t, op, stream.handle());
  };
  CHECK(absl::IsInvalidArgument(fill(buf.get(), 4, DataType::kBool, ReduceOp::kSum)));
  CHECK(absl::IsInvalidArgument(fill(buf.get(), 4, DataType::kFloat32, ReduceOp::kAdasum)));
  CHECK(absl::IsInvalidArgument(fill(buf.get(), -1, DataType::kFloat32, ReduceOp::kSum)));
  CHECK(absl::IsInvalidArgument(fill(buf.get() + 2, 4, DataType::kFloat32, ReduceOp::kMax)));
  CHECK(absl::IsInvalidArgument(fill(nullptr, 4, DataType::kInt64, ReduceOp::kMin)));
  CHECK(fill(nullptr, 0, DataType::kInt64, ReduceOp::kMin).ok());
}

// ---------------------------------------------------------------------------------------------
// A one-rank NCCL communicator.

std::unique_ptr<GpuCommunicator> SingleRankCommunicator() {
  absl::StatusOr<std::string> id = Platform().NewCommunicatorId();
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  CHECK(id->size() == 128);
  absl::StatusOr<std::unique_ptr<GpuCommunicator>> comm =
      Platform().CreateCommunicator(*id, 1, 0, kDevice);
  INFO(comm.status().ToString());
  REQUIRE(comm.ok());
  REQUIRE(*comm != nullptr);
  return *std::move(comm);
}

// `n` elements of `dtype` with small finite values (exact under every op of one rank).
std::vector<uint8_t> Values(DataType dtype, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(static_cast<size_t>(n) * DataTypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<int64_t>(rng() % 2001) - 1000;
    if (dtype == DataType::kFloat32) {
      const float f = static_cast<float>(v) * 0.25f;
      std::memcpy(out.data() + i * 4, &f, 4);
    } else {
      std::memcpy(out.data() + i * 8, &v, 8);
    }
  }
  return out;
}

TEST_CASE("A one-rank communicator: Allreduce writes the input to the output",
          "[gpu][platform][nccl]") {
  std::unique_ptr<GpuCommunicator> comm = SingleRankCommunicator();
  CHECK(comm->rank() == 0);
  CHECK(comm->size() == 1);
  CHECK(comm->device() == kDevice);
  Stream stream;
  for (DataType dtype : {DataType::kFloat32, DataType::kInt64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{1} << 20}) {
        INFO(DataTypeName(dtype) << " " << ReduceOpName(op) << " x " << count);
        const std::vector<uint8_t> in = Values(dtype, count, static_cast<uint64_t>(count) + 1);
        DeviceBuffer send(in.size()), recv(in.size());
        Upload(send, in);
        SetBytes(recv.get(), 0xA5, in.size());
        REQUIRE_OK(comm->Allreduce(send.get(), recv.get(), count, dtype, op, stream.handle()));
        stream.Sync();
        CHECK(Download(recv) == in);
        // In place.
        REQUIRE_OK(comm->Allreduce(recv.get(), recv.get(), count, dtype, op, stream.handle()));
        stream.Sync();
        CHECK(Download(recv) == in);
      }
    }
  }
  DeviceBuffer buf(64);
  CHECK(
      comm->Allreduce(buf.get(), buf.get(), 0, DataType::kFloat32, ReduceOp::kSum, stream.handle())
          .ok());
  const absl::Status int16 =
      comm->Allreduce(buf.get(), buf.get(), 4, DataType::kInt16, ReduceOp::kSum, stream.handle());
  CHECK(absl::IsInvalidArgument(int16));
  CHECK_THAT(std::string(int16.message()), Catch::Contains("int16"));
  CHECK(absl::IsInvalidArgument(
      comm->Allreduce(buf.get(), buf.get(), 4, DataType::kBool, ReduceOp::kSum, stream.handle())));
  CHECK(absl::IsInvalidArgument(comm->Allreduce(buf.get(), buf.get(), 4, DataType::kFloat32,
                                                ReduceOp::kAverage, stream.handle())));
  CHECK(absl::IsInvalidArgument(comm->Allreduce(buf.get(), buf.get(), -1, DataType::kFloat32,
                                                ReduceOp::kSum, stream.handle())));
  CHECK(comm->AsyncError().ok());
}

TEST_CASE("A one-rank communicator: Allgatherv, Broadcast, Alltoallv, ReduceScatter",
          "[gpu][platform][nccl]") {
  std::unique_ptr<GpuCommunicator> comm = SingleRankCommunicator();
  Stream stream;
  constexpr size_t kBytes = 8192;
  const std::vector<uint8_t> data = RandomBytes(kBytes, 11);
  DeviceBuffer send(kBytes), recv(kBytes);
  Upload(send, data);

  SECTION("Allgatherv") {
    for (int64_t n : {int64_t{1}, int64_t{1001}, int64_t{8192}}) {
      INFO(n << " bytes");
      SetBytes(recv.get(), 0xA5, kBytes);
      const std::vector<int64_t> recv_bytes = {n};
      REQUIRE_OK(comm->Allgatherv(send.get(), recv.get(), recv_bytes, stream.handle()));
      stream.Sync();
      std::vector<uint8_t> want(kBytes, 0xA5);
      std::memcpy(want.data(), data.data(), static_cast<size_t>(n));
      CHECK(Download(recv) == want);
    }
    const std::vector<int64_t> zero = {0}, two = {1, 1};
    CHECK(comm->Allgatherv(send.get(), recv.get(), zero, stream.handle()).ok());
    CHECK(absl::IsInvalidArgument(comm->Allgatherv(send.get(), recv.get(), two, stream.handle())));
  }
  SECTION("Broadcast") {
    Upload(recv, data);
    REQUIRE_OK(comm->Broadcast(recv.get(), 5000, 0, stream.handle()));
    stream.Sync();
    CHECK(Download(recv) == data);
    CHECK(comm->Broadcast(recv.get(), 0, 0, stream.handle()).ok());
    CHECK(absl::IsInvalidArgument(comm->Broadcast(recv.get(), 16, 1, stream.handle())));
    CHECK(absl::IsInvalidArgument(comm->Broadcast(recv.get(), -1, 0, stream.handle())));
  }
  SECTION("Alltoallv with offsets") {
    SetBytes(recv.get(), 0xA5, kBytes);
    const std::vector<int64_t> send_bytes = {1000}, send_offsets = {123};
    const std::vector<int64_t> recv_bytes = {1000}, recv_offsets = {777};
    REQUIRE_OK(comm->Alltoallv(send.get(), send_bytes, send_offsets, recv.get(), recv_bytes,
                               recv_offsets, stream.handle()));
    stream.Sync();
    std::vector<uint8_t> want(kBytes, 0xA5);
    std::memcpy(want.data() + 777, data.data() + 123, 1000);
    CHECK(Download(recv) == want);
    const std::vector<int64_t> zero = {0};
    CHECK(comm->Alltoallv(send.get(), zero, zero, recv.get(), zero, zero, stream.handle()).ok());
    const std::vector<int64_t> negative = {-1};
    CHECK(absl::IsInvalidArgument(
        comm->Alltoallv(send.get(), negative, zero, recv.get(), zero, zero, stream.handle())));
  }
  SECTION("ReduceScatter") {
    for (DataType dtype : {DataType::kFloat32, DataType::kInt64}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        INFO(DataTypeName(dtype) << " " << ReduceOpName(op));
        const std::vector<uint8_t> in = Values(dtype, 513, 5);
        DeviceBuffer rs_send(in.size()), rs_recv(in.size());
        Upload(rs_send, in);
        SetBytes(rs_recv.get(), 0xA5, in.size());
        const std::vector<int64_t> counts = {513};
        REQUIRE_OK(
            comm->ReduceScatter(rs_send.get(), rs_recv.get(), counts, dtype, op, stream.handle()));
        stream.Sync();
        CHECK(Download(rs_recv) == in);
        const std::vector<int64_t> two = {1, 1};
        CHECK(absl::IsInvalidArgument(
            comm->ReduceScatter(rs_send.get(), rs_recv.get(), two, dtype, op, stream.handle())));
        CHECK(absl::IsInvalidArgument(comm->ReduceScatter(rs_send.get(), rs_recv.get(), counts,
                                                          DataType::kInt16, op, stream.handle())));
      }
    }
  }
  CHECK(comm->AsyncError().ok());
}

TEST_CASE("Abort is idempotent and later calls fail", "[gpu][platform][nccl]") {
  std::unique_ptr<GpuCommunicator> comm = SingleRankCommunicator();
  Stream stream;
  DeviceBuffer buf(4096);
  SetBytes(buf.get(), 0, 4096);
  REQUIRE_OK(comm->Allreduce(buf.get(), buf.get(), 1024, DataType::kFloat32, ReduceOp::kSum,
                             stream.handle()));
  stream.Sync();
  REQUIRE_OK(comm->AsyncError());
  comm->Abort();
  comm->Abort();
  // Aborting from several threads at once is as good as once.
  std::thread other([&] { comm->Abort(); });
  comm->Abort();
  other.join();
  const absl::Status async = comm->AsyncError();
  CHECK(absl::IsUnavailable(async));
  CHECK_THAT(std::string(async.message()), Catch::Contains("aborted"));
  CHECK(absl::IsUnavailable(comm->Allreduce(buf.get(), buf.get(), 1024, DataType::kFloat32,
                                            ReduceOp::kSum, stream.handle())));
  const std::vector<int64_t> one = {16};
  CHECK(absl::IsUnavailable(comm->Allgatherv(buf.get(), buf.get(), one, stream.handle())));
  CHECK(absl::IsUnavailable(comm->Broadcast(buf.get(), 16, 0, stream.handle())));
  CHECK(absl::IsUnavailable(
      comm->Alltoallv(buf.get(), one, {0}, buf.get() + 1024, one, {0}, stream.handle())));
  CHECK(absl::IsUnavailable(comm->ReduceScatter(
      buf.get(), buf.get() + 1024, one, DataType::kFloat32, ReduceOp::kSum, stream.handle())));
  comm.reset();  // no ncclCommDestroy after an abort
  // The platform still works.
  CHECK(Platform().CheckDevice(kDevice).ok());
}

TEST_CASE("CreateCommunicator rejects bad arguments", "[gpu][platform][nccl]") {
  CHECK(absl::IsInvalidArgument(Platform().CreateCommunicator("short", 1, 0, kDevice).status()));
  const std::string id(128, '\0');
  CHECK(absl::IsInvalidArgument(Platform().CreateCommunicator(id, 1, 1, kDevice).status()));
  CHECK(absl::IsInvalidArgument(Platform().CreateCommunicator(id, 0, 0, kDevice).status()));
  CHECK(absl::IsFailedPrecondition(Platform().CreateCommunicator(id, 1, 0, -1).status()));
}

// ---------------------------------------------------------------------------------------------
// Without a device.

// "" when every call of `platform` behaves as the no-device contract says, else what broke.
std::string NoDeviceViolation(GpuPlatform& platform, const absl::Status& check) {
  if (!absl::IsFailedPrecondition(check) ||
      std::string(check.message()).find("no CUDA device visible") == std::string::npos) {
    return "CheckDevice(0): " + check.ToString();
  }
  // Without a driver the runtime's initialisation error is permanent (cudaGetLastError keeps
  // returning it); otherwise no call below may leave an error behind.
  (void)cudaGetLastError();
  const bool clearable = cudaGetLastError() == cudaSuccess;
  const auto refused = [](const absl::Status& st, const char* what) -> std::string {
    return absl::IsFailedPrecondition(st) ? "" : std::string(what) + ": " + st.ToString();
  };
  std::string out;
  out += refused(platform.CheckDevice(1), "CheckDevice(1)");
  out += refused(platform.CreateStream(0).status(), "CreateStream");
  out += refused(platform.CreateEvent(0).status(), "CreateEvent");
  out += refused(platform.RecordEvent(0, nullptr, nullptr), "RecordEvent");
  out += refused(platform.StreamWaitEvent(0, nullptr, nullptr), "StreamWaitEvent");
  out += refused(platform.EventDone(0, nullptr).status(), "EventDone");
  out += refused(platform.Allocate(0, 16).status(), "Allocate");
  out += refused(platform.EnqueueCopy(0, BatchedCopyPlan{}, nullptr), "EnqueueCopy");
  out += refused(
      platform.EnqueueFillIdentity(0, nullptr, 0, DataType::kFloat32, ReduceOp::kSum, nullptr),
      "EnqueueFillIdentity");
  out += refused(platform.NewCommunicatorId().status(), "NewCommunicatorId");
  out += refused(platform.CreateCommunicator(std::string(128, '\0'), 1, 0, 0).status(),
                 "CreateCommunicator");
  int dummy = 0;
  platform.Free(0, &dummy);  // must not reach cudaFree
  platform.DestroyStream(0, &dummy);
  platform.DestroyEvent(0, &dummy);
  if (const cudaError_t left = cudaGetLastError(); clearable && left != cudaSuccess) {
    out += std::string("an error was left behind: ") + cudaGetErrorName(left);
  }
  return out;
}

}  // namespace
}  // namespace chorus::ops::gpu

int main(int argc, char** argv) {
  chorus::ops::gpu::GpuPlatform& platform = chorus::ops::gpu::Platform();
  const absl::Status available = platform.CheckDevice(chorus::ops::gpu::kDevice);
  if (!available.ok()) {
    const std::string violation = chorus::ops::gpu::NoDeviceViolation(platform, available);
    if (!violation.empty()) {
      std::fprintf(stderr, "FAILED: the no-device contract is broken: %s\n", violation.c_str());
      return 1;
    }
    std::printf("SKIPPED: %s\n", std::string(available.message()).c_str());
    return 77;
  }
  return chorus::testing::RunCatch(argc, argv);
}
