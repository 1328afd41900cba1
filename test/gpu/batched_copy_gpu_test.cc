// GPU tests of the batched fusion copy (ops/cuda/batched_copy.h): every kernel path (inline
// tables of <= 16 and <= 160 chunks, the device table, every CopyKind, aligned and misaligned
// pointers) against the host reference executor (ops/cuda/batched_copy_reference.h) run on a
// byte-identical host copy of the same layout.
//
// Comparison: bit for bit over whole arenas (so a write outside the planned ranges fails too),
// except that a NaN produced by a scaling or casting kind only has to be a NaN: GPU arithmetic
// returns a canonical NaN where the CPU keeps the payload. Casts are exact (no ulp slack): the
// device rounds with the same rule as the CPU path (see Note [Bit-exact with the CPU path] in
// ops/cuda/batched_copy.cu).
//
// Exits 77 (ctest: skipped) with the reason when no CUDA device is visible.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include "bench/tensor_sets.h"
#include "chorus/types.h"
#include "ops/cuda/batched_copy.h"
#include "ops/cuda/batched_copy_plan.h"
#include "ops/cuda/batched_copy_reference.h"
#include "test/support/catch_session.h"
#include "test/support/random_copy_batch.h"

namespace chorus::ops::gpu {
namespace {

using testing::ArenaBatch;
using testing::CountMismatches;
using testing::DtypePair;
using testing::FillBytes;
using testing::FillRandom;
using testing::kAllDataTypes;
using testing::NanRange;
using testing::NanRanges;
using testing::RandomArenaBatch;
using testing::SupportedCopyPairs;

#define CUDA_REQUIRE(call)                                                                      \
  do {                                                                                          \
    const cudaError_t cuda_err_ = (call);                                                       \
    INFO(#call << ": " << cudaGetErrorName(cuda_err_) << " " << cudaGetErrorString(cuda_err_)); \
    REQUIRE(cuda_err_ == cudaSuccess);                                                          \
  } while (0)

// Owned device memory.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    CUDA_REQUIRE(cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)));
  }
  ~DeviceBuffer() { (void)cudaFree(ptr_); }
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
  Stream() { CUDA_REQUIRE(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { (void)cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  DeviceStream handle() const { return static_cast<DeviceStream>(s_); }

 private:
  cudaStream_t s_ = nullptr;
};

std::unique_ptr<BatchedCopyScratch> MakeScratch(BatchedCopyScratch::Options options = {}) {
  absl::StatusOr<std::unique_ptr<BatchedCopyScratch>> s = BatchedCopyScratch::Create(options);
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  return *std::move(s);
}

void Upload(const DeviceBuffer& d, const std::vector<uint8_t>& h) {
  REQUIRE(h.size() <= d.size());
  CUDA_REQUIRE(cudaMemcpy(d.get(), h.data(), h.size(), cudaMemcpyHostToDevice));
}

std::vector<uint8_t> Download(const DeviceBuffer& d) {
  std::vector<uint8_t> h(d.size());
  CUDA_REQUIRE(cudaMemcpy(h.data(), d.get(), d.size(), cudaMemcpyDeviceToHost));
  return h;
}

// The same entries with every pointer moved from the host arena `from` to the device arena
// `to` (same offsets), for entries whose pointers all lie in [from, from + size).
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

// ---------------------------------------------------------------------------------------------
// Random batches in one arena (test/support/random_copy_batch.h, as in the unit tier), with
// entries large enough to reach the device table.

// Up to 300'000 elements, mostly the edge counts around chunk and vector widths.
int64_t DeviceBatchCount(std::mt19937_64& rng) {
  static constexpr int64_t kCounts[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 1000, 4099};
  return rng() % 6 == 0 ? static_cast<int64_t>(rng() % 300'000)
                        : kCounts[rng() % (sizeof(kCounts) / sizeof(kCounts[0]))];
}

// Runs `b` on the host (reference) and on the device from the same initial bytes and compares
// the whole arenas. Returns the number of chunks of the plan.
size_t CheckOnDevice(const ArenaBatch& b, const PlanOptions& options, BatchedCopyScratch* scratch,
                     const Stream& stream) {
  DeviceBuffer d(b.arena.size());
  Upload(d, b.arena);
  std::vector<uint8_t> want = b.arena;
  const std::vector<CopyEntry> host_entries = Rebase(b.entries, b.arena.data(), want.data());
  absl::StatusOr<BatchedCopyPlan> host_plan = PlanBatchedCopy(host_entries, b.scale, options);
  REQUIRE(host_plan.ok());
  RunBatchedCopyOnHost(*host_plan);

  const std::vector<CopyEntry> dev_entries = Rebase(b.entries, b.arena.data(), d.get());
  absl::StatusOr<BatchedCopyPlan> dev_plan = PlanBatchedCopy(dev_entries, b.scale, options);
  REQUIRE(dev_plan.ok());
  REQUIRE(dev_plan->chunks.size() == host_plan->chunks.size());
  const absl::Status launched = LaunchBatchedCopy(*dev_plan, scratch, stream.handle());
  INFO(launched.ToString());
  REQUIRE(launched.ok());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  const std::vector<uint8_t> got = Download(d);
  CHECK(CountMismatches(got, want, NanRanges(host_entries, b.scale, want.data())) == 0);
  return dev_plan->chunks.size();
}

TEST_CASE("Random batches on the device match the host reference", "[gpu][batched_copy]") {
  Stream stream;
  std::unique_ptr<BatchedCopyScratch> scratch = MakeScratch();
  const int64_t chunk_bytes = GENERATE(int64_t{256}, int64_t{4096}, int64_t{65536});
  size_t inline_small = 0, inline_large = 0, table = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed << ", chunk_bytes " << chunk_bytes);
    const ArenaBatch b = RandomArenaBatch(seed * 7919 + static_cast<uint64_t>(chunk_bytes),
                                          {seed % 3 == 0 ? 4 : 40, DeviceBatchCount});
    const size_t chunks = CheckOnDevice(b, {chunk_bytes, true}, scratch.get(), stream);
    inline_small += chunks <= 16;
    inline_large += chunks > 16 && chunks <= kMaxInlineChunks;
    table += chunks > kMaxInlineChunks;
  }
  // Every launch path ran for at least one of the chunk sizes.
  if (chunk_bytes == 256) CHECK(table > 0);
  if (chunk_bytes == 65536) CHECK(inline_small > 0);
  if (chunk_bytes == 4096) CHECK(inline_large + table > 0);
}

TEST_CASE("Every kind, every alignment offset, through all three launch paths",
          "[gpu][batched_copy]") {
  Stream stream;
  std::unique_ptr<BatchedCopyScratch> scratch = MakeScratch();
  const double scale = GENERATE(1.0, 0.75);
  // (chunks per entry, entries per launch) at 256-byte chunks: one chunk per launch (inline
  // table of 16), <= 150 chunks per launch (inline table of 160), > 160 (device table).
  struct Mode {
    int64_t chunks_per_entry;
    size_t entries_per_launch;
  };
  const Mode mode = GENERATE(Mode{1, 1}, Mode{3, 50}, Mode{41, 1000});
  for (const DtypePair& p : SupportedCopyPairs()) {
    if (scale != 1.0 && p.src == DataType::kBool) continue;
    const auto ss = static_cast<int64_t>(DataTypeSize(p.src));
    const auto ds = static_cast<int64_t>(DataTypeSize(p.dst));
    const bool bytes = p.src == p.dst && scale == 1.0;
    const int64_t unit = bytes ? 1 : std::max(ss, ds);
    // One element short of full chunks, so the last chunk has a tail.
    const int64_t per_entry = mode.chunks_per_entry * 256 / (bytes ? ss : unit) - 1;
    // One entry per (source, destination) offset pair within 16 bytes (a subset for bytes).
    std::vector<std::pair<int64_t, int64_t>> offsets;
    for (int64_t so = 0; so < 16; so += bytes ? 1 : ss) {
      for (int64_t dof = 0; dof < 16; dof += bytes ? 1 : ds) {
        if (bytes && so != dof && (so * 16 + dof) % 7 != 0) continue;
        offsets.push_back({so, dof});
      }
    }
    const auto n = static_cast<int64_t>(offsets.size());
    const int64_t src_span = (per_entry * ss + 15) / 16 * 16 + 16;
    const int64_t dst_span = (per_entry * ds + 15) / 16 * 16 + 16;
    ArenaBatch all;
    all.scale = scale;
    all.arena.resize(static_cast<size_t>(n * (src_span + dst_span)));
    std::mt19937_64 rng(static_cast<uint64_t>(mode.chunks_per_entry) * 131 +
                        static_cast<uint64_t>(ss * 10 + ds));
    FillBytes(rng, all.arena);
    uint8_t* base = all.arena.data();
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* src = base + i * src_span + offsets[static_cast<size_t>(i)].first;
      uint8_t* dst = base + n * src_span + i * dst_span + offsets[static_cast<size_t>(i)].second;
      FillRandom(rng, src, per_entry, p.src);
      all.entries.push_back(CopyEntry{src, dst, per_entry, p.src, p.dst});
    }
    INFO(DataTypeName(p.src) << " -> " << DataTypeName(p.dst) << ", scale " << scale << ", " << n
                             << " entries of " << per_entry << " elements");
    for (size_t first = 0; first < all.entries.size(); first += mode.entries_per_launch) {
      ArenaBatch group;
      group.scale = scale;
      group.arena = all.arena;
      const size_t last = std::min(all.entries.size(), first + mode.entries_per_launch);
      // Rebase from `all`'s arena to the group's copy.
      const std::vector<CopyEntry> part(all.entries.begin() + static_cast<ptrdiff_t>(first),
                                        all.entries.begin() + static_cast<ptrdiff_t>(last));
      group.entries = Rebase(part, all.arena.data(), group.arena.data());
      const size_t chunks = CheckOnDevice(group, {256, true}, scratch.get(), stream);
      if (mode.entries_per_launch == 1) CHECK(chunks <= 16);
      if (mode.entries_per_launch == 50) CHECK(chunks <= kMaxInlineChunks);
      if (mode.entries_per_launch == 1000 && n >= 4) CHECK(chunks > kMaxInlineChunks);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Round trips through a fusion buffer, as the runtime will run them: copy-in (prescale, cast to
// the fusion dtype), copy-out (postscale, cast back).

struct RoundTrip {
  DataType tensor_dtype;
  DataType fusion_dtype;
  double prescale;
  double postscale;
};

void CheckRoundTrip(const std::vector<int64_t>& counts, const RoundTrip& rt, int64_t align,
                    BatchedCopyScratch* scratch, const Stream& stream, uint64_t seed) {
  const auto ts = static_cast<int64_t>(DataTypeSize(rt.tensor_dtype));
  const FusionLayout fusion = PackFusionLayout(counts, rt.fusion_dtype, align);
  const FusionLayout tensors = PackFusionLayout(counts, rt.tensor_dtype, 256);  // like torch
  const int64_t tensor_bytes = tensors.total_bytes + 256;
  // One host and one device arena each: [inputs | fusion | outputs].
  const int64_t fusion_at = tensor_bytes;
  const int64_t out_at = fusion_at + (fusion.total_bytes + 255) / 256 * 256;
  const auto arena_bytes = static_cast<size_t>(out_at + tensor_bytes);
  std::vector<uint8_t> host(arena_bytes);
  std::mt19937_64 rng(seed);
  FillBytes(rng, host);
  for (size_t i = 0; i < counts.size(); ++i) {
    FillRandom(rng, host.data() + tensors.offsets[i], counts[i], rt.tensor_dtype);
  }
  DeviceBuffer dev(arena_bytes);
  Upload(dev, host);

  const auto entries = [&](uint8_t* base, bool in) {
    std::vector<CopyEntry> v;
    for (size_t i = 0; i < counts.size(); ++i) {
      uint8_t* t = base + (in ? 0 : out_at) + tensors.offsets[i];
      uint8_t* f = base + fusion_at + fusion.offsets[i];
      v.push_back(in ? CopyEntry{t, f, counts[i], rt.tensor_dtype, rt.fusion_dtype}
                     : CopyEntry{f, t, counts[i], rt.fusion_dtype, rt.tensor_dtype});
    }
    return v;
  };
  // Host reference.
  const std::vector<CopyEntry> host_in = entries(host.data(), true);
  const std::vector<CopyEntry> host_out = entries(host.data(), false);
  absl::StatusOr<BatchedCopyPlan> hin = PlanBatchedCopy(host_in, rt.prescale);
  absl::StatusOr<BatchedCopyPlan> hout = PlanBatchedCopy(host_out, rt.postscale);
  REQUIRE(hin.ok());
  REQUIRE(hout.ok());
  RunBatchedCopyOnHost(*hin);
  RunBatchedCopyOnHost(*hout);
  // Device: both launches back to back on one stream, one synchronisation.
  absl::StatusOr<BatchedCopyPlan> din = PlanBatchedCopy(entries(dev.get(), true), rt.prescale);
  absl::StatusOr<BatchedCopyPlan> dout = PlanBatchedCopy(entries(dev.get(), false), rt.postscale);
  REQUIRE(din.ok());
  REQUIRE(dout.ok());
  REQUIRE(LaunchBatchedCopy(*din, scratch, stream.handle()).ok());
  REQUIRE(LaunchBatchedCopy(*dout, scratch, stream.handle()).ok());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  const std::vector<uint8_t> got = Download(dev);

  std::vector<NanRange> nan = NanRanges(host_in, rt.prescale, host.data());
  const std::vector<NanRange> nan_out = NanRanges(host_out, rt.postscale, host.data());
  nan.insert(nan.end(), nan_out.begin(), nan_out.end());
  // A NaN payload changed on copy-in travels on to the output even where copy-out is a plain
  // copy: the outputs' ranges tolerate NaN payloads whenever copy-in did.
  if (!(rt.tensor_dtype == rt.fusion_dtype && rt.prescale == 1.0) &&
      IsFloatingPoint(rt.tensor_dtype)) {
    for (const CopyEntry& e : host_out) {
      if (e.num_elements == 0) continue;
      const auto begin = static_cast<size_t>(static_cast<uint8_t*>(e.dst) - host.data());
      nan.push_back({begin, begin + static_cast<size_t>(e.num_elements * ts), rt.tensor_dtype});
    }
  }
  std::sort(nan.begin(), nan.end(),
            [](const NanRange& a, const NanRange& b) { return a.begin < b.begin; });
  nan.erase(std::unique(nan.begin(), nan.end(),
                        [](const NanRange& a, const NanRange& b) { return a.begin == b.begin; }),
            nan.end());
  CHECK(CountMismatches(got, host, nan) == 0);
}

std::vector<int64_t> SetCounts(const char* name) {
  absl::StatusOr<std::vector<bench::TensorSpec>> set = bench::GetTensorSet(name);
  REQUIRE(set.ok());
  std::vector<int64_t> counts;
  for (const bench::TensorSpec& t : *set) counts.push_back(t.num_elements());
  return counts;
}

TEST_CASE("ResNet-50 and tiny1000 round trips, plain, scaled and fp16/bf16-compressed",
          "[gpu][batched_copy]") {
  Stream stream;
  std::unique_ptr<BatchedCopyScratch> scratch = MakeScratch();
  const char* set = GENERATE("resnet50", "tiny1000");
  const RoundTrip rt = GENERATE(RoundTrip{DataType::kFloat32, DataType::kFloat32, 1.0, 1.0},
                                RoundTrip{DataType::kFloat32, DataType::kFloat32, 0.5, 0.25},
                                RoundTrip{DataType::kFloat32, DataType::kFloat16, 1.0, 0.5},
                                RoundTrip{DataType::kFloat32, DataType::kBfloat16, 0.125, 1.0});
  const int64_t align = GENERATE(int64_t{1}, int64_t{16});
  INFO(set << ": " << DataTypeName(rt.tensor_dtype) << " via " << DataTypeName(rt.fusion_dtype)
           << ", prescale " << rt.prescale << ", postscale " << rt.postscale << ", align "
           << align);
  CheckRoundTrip(SetCounts(set), rt, align, scratch.get(), stream, 42);
}

TEST_CASE("Round trips of every dtype with odd sizes", "[gpu][batched_copy]") {
  Stream stream;
  std::unique_ptr<BatchedCopyScratch> scratch = MakeScratch();
  const std::vector<int64_t> counts = {0, 1, 3, 17, 255, 4097, 70001, 0, 5, 300'007};
  for (DataType t : kAllDataTypes) {
    const double pre = t == DataType::kBool ? 1.0 : 0.5;
    const double post = t == DataType::kBool ? 1.0 : -3.0;
    for (int64_t align : {int64_t{1}, int64_t{16}}) {
      INFO(DataTypeName(t) << ", align " << align);
      CheckRoundTrip(counts, RoundTrip{t, t, pre, post}, align, scratch.get(), stream,
                     static_cast<uint64_t>(t) + 100);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Launch machinery.

TEST_CASE("Back-to-back launches never see a staging slot rewritten under them",
          "[gpu][batched_copy]") {
  Stream stream;
  // Two slots of 8 chunks: every launch below grows or reuses a slot while earlier launches are
  // still queued behind a 512 MiB copy.
  std::unique_ptr<BatchedCopyScratch> scratch = MakeScratch({2, 8});
  const size_t big = size_t{512} << 20;
  DeviceBuffer big_src(big), big_dst(big);
  CUDA_REQUIRE(cudaMemset(big_src.get(), 7, big));
  absl::StatusOr<BatchedCopyPlan> busy =
      PlanBatchedCopy({CopyEntry{big_src.get(), big_dst.get(), static_cast<int64_t>(big / 4),
                                 DataType::kFloat32, DataType::kFloat32}},
                      2.0);
  REQUIRE(busy.ok());

  constexpr int kLaunches = 12;
  // float32: 512 KiB, 2048 chunks of 256 bytes; launch k has (k+1)/12 of them (171 to 2048).
  constexpr int64_t kElems = 1 << 17;
  DeviceBuffer src(kElems * 4), dst(size_t{kLaunches} * kElems * 4);
  std::vector<float> host_src(kElems);
  for (int64_t i = 0; i < kElems; ++i) host_src[static_cast<size_t>(i)] = static_cast<float>(i);
  CUDA_REQUIRE(cudaMemcpy(src.get(), host_src.data(), kElems * 4, cudaMemcpyHostToDevice));

  REQUIRE(LaunchBatchedCopy(*busy, scratch.get(), stream.handle()).ok());
  std::vector<BatchedCopyPlan> plans;
  for (int k = 0; k < kLaunches; ++k) {
    // Launch k copies the first (k+1)/kLaunches of src, scaled by k+1, into its own output.
    const int64_t n = kElems * (k + 1) / kLaunches;
    absl::StatusOr<BatchedCopyPlan> plan =
        PlanBatchedCopy({CopyEntry{src.get(), dst.get() + size_t(k) * kElems * 4, n,
                                   DataType::kFloat32, DataType::kFloat32}},
                        static_cast<double>(k + 1), {256, true});
    REQUIRE(plan.ok());
    REQUIRE(plan->chunks.size() > kMaxInlineChunks);
    REQUIRE(LaunchBatchedCopy(*plan, scratch.get(), stream.handle()).ok());
  }
  // Both slots grew past their initial 8 chunks.
  CHECK(scratch->slot_capacity(0) >= 2048);
  CHECK(scratch->slot_capacity(1) >= static_cast<size_t>(kElems * 11 / 12 / 64));
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  std::vector<float> out(size_t{kLaunches} * kElems);
  CUDA_REQUIRE(cudaMemcpy(out.data(), dst.get(), out.size() * 4, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (int k = 0; k < kLaunches; ++k) {
    const int64_t n = kElems * (k + 1) / kLaunches;
    for (int64_t i = 0; i < n; ++i) {
      bad += out[size_t(k) * kElems + size_t(i)] != static_cast<float>(i) * float(k + 1);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("Launch errors and no-ops", "[gpu][batched_copy]") {
  Stream stream;
  // An empty plan enqueues nothing and needs no scratch.
  BatchedCopyPlan empty;
  CHECK(LaunchBatchedCopy(empty, nullptr, stream.handle()).ok());

  DeviceBuffer buf(size_t{1} << 20);
  absl::StatusOr<BatchedCopyPlan> large =
      PlanBatchedCopy({CopyEntry{buf.get(), buf.get() + (512 << 10), 512 << 10, DataType::kUint8,
                                 DataType::kUint8}},
                      1.0, {256, true});
  REQUIRE(large.ok());
  REQUIRE(large->chunks.size() > kMaxInlineChunks);
  const absl::Status no_scratch = LaunchBatchedCopy(*large, nullptr, stream.handle());
  CHECK(absl::IsInvalidArgument(no_scratch));
  CHECK_THAT(std::string(no_scratch.message()), Catch::Contains("BatchedCopyScratch"));

  CHECK(absl::IsInvalidArgument(BatchedCopyScratch::Create({0, 16}).status()));
}

TEST_CASE("The legacy default stream works", "[gpu][batched_copy]") {
  std::vector<uint8_t> pattern(1000);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7);
  DeviceBuffer buf(2048);
  CUDA_REQUIRE(cudaMemset(buf.get(), 0, 2048));
  CUDA_REQUIRE(cudaMemcpy(buf.get() + 3, pattern.data(), pattern.size(), cudaMemcpyHostToDevice));
  absl::StatusOr<BatchedCopyPlan> plan = PlanBatchedCopy(
      {CopyEntry{buf.get() + 3, buf.get() + 1029, 1000, DataType::kUint8, DataType::kUint8}}, 1.0);
  REQUIRE(plan.ok());
  REQUIRE(LaunchBatchedCopy(*plan, nullptr, nullptr).ok());
  std::vector<uint8_t> out(1000);
  CUDA_REQUIRE(cudaMemcpy(out.data(), buf.get() + 1029, 1000, cudaMemcpyDeviceToHost));
  CHECK(out == pattern);
}

}  // namespace
}  // namespace chorus::ops::gpu

int main(int argc, char** argv) {
  const absl::Status available = chorus::ops::gpu::CudaDeviceAvailable();
  if (!available.ok()) {
    std::printf("SKIPPED: %s\n", std::string(available.message()).c_str());
    return 77;
  }
  return chorus::testing::RunCatch(argc, argv);
}
