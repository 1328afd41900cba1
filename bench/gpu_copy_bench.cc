// chorus_gpu_copy_bench: the batched fusion copy (ops/cuda/batched_copy.h) against one
// cudaMemcpyAsync per tensor and against one cudaMemcpyAsync of the same total bytes, device
// to device, for models' tensor sets (bench/tensor_sets.h).
//
//   chorus_gpu_copy_bench [--sets resnet50,tiny1000] [--iters 50] [--warmup 5] [--inner 10]
//                         [--chunk-kib 64] [--align 16] [--json FILE]
//
// One iteration = copy-in (every tensor into the fusion buffer) + copy-out (back into separate
// output tensors), on one non-blocking stream. A sample times `inner` back-to-back iterations
// between two cudaEvents (host submission included, as the runtime would pay it); the table
// shows the median over `iters` samples per iteration. Bandwidth counts the tensor bytes moved
// in plus out (2 x the set's bytes) per second. Extra rows: the batched copy with a scale
// factor, and with float16 compression (float32 tensors, float16 fusion buffer).
// Ratios: batched bandwidth as % of the single copy's; speedup over the per-tensor copies.
// Outputs are checked after the runs (a wrong copy fails the run).
//
// Exit status: 0 on success, 1 on a CUDA error or a wrong result, 2 on bad arguments, 77 when
// no CUDA device is visible.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <cuda_runtime_api.h>

#include "bench/cuda_check.h"
#include "bench/tensor_sets.h"
#include "chorus/types.h"
#include "ops/cuda/batched_copy.h"
#include "ops/cuda/batched_copy_plan.h"
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace chorus::bench {
namespace {

using ops::gpu::BatchedCopyPlan;
using ops::gpu::BatchedCopyScratch;
using ops::gpu::CopyEntry;
using ops::gpu::DeviceStream;
using ops::gpu::FusionLayout;

struct Args {
  std::vector<std::string> sets = {"resnet50", "tiny1000"};
  int iters = 50;
  int warmup = 5;
  int inner = 10;
  std::vector<int64_t> chunk_kib = {64};
  int64_t align = 16;
  std::string json_path;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median seconds per iteration of `iteration` (which enqueues on `stream`).
double TimeIterations(const Args& args, cudaStream_t stream,
                      const std::function<void()>& iteration) {
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < args.warmup; ++i) iteration();
  BENCH_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> samples;
  for (int s = 0; s < args.iters; ++s) {
    BENCH_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < args.inner; ++i) iteration();
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(static_cast<double>(ms) * 1e-3 / args.inner);
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  return Median(std::move(samples));
}

struct Row {
  std::string method;
  double seconds = 0;   // median per iteration (in + out)
  double gbps = 0;      // tensor bytes in + out per second, 1e9
  double plan_us = -1;  // host time to plan copy-in + copy-out (batched rows only)
};

// Device memory for one set: tensors, fusion buffer(s) and outputs, each tensor at a 256-byte
// boundary like a caching allocator's.
struct SetBuffers {
  std::vector<int64_t> counts;
  std::vector<int64_t> tensor_offsets;  // bytes, same for inputs and outputs
  int64_t tensor_bytes = 0;             // arena size of the inputs (and of the outputs)
  int64_t payload_bytes = 0;            // sum of the tensors' bytes
  uint8_t* in = nullptr;
  uint8_t* out = nullptr;
  uint8_t* fusion = nullptr;  // float32-sized; the float16 layout fits in it too
};

std::vector<CopyEntry> Entries(const SetBuffers& b, const FusionLayout& layout, DataType fusion,
                               bool copy_in) {
  std::vector<CopyEntry> v;
  v.reserve(b.counts.size());
  for (size_t i = 0; i < b.counts.size(); ++i) {
    uint8_t* f = b.fusion + layout.offsets[i];
    if (copy_in) {
      v.push_back({b.in + b.tensor_offsets[i], f, b.counts[i], DataType::kFloat32, fusion});
    } else {
      v.push_back({f, b.out + b.tensor_offsets[i], b.counts[i], fusion, DataType::kFloat32});
    }
  }
  return v;
}

// Plans copy-in and copy-out; returns the host planning time in microseconds (median of 21).
double PlanPair(const SetBuffers& b, const FusionLayout& layout, DataType fusion, double pre,
                double post, int64_t chunk_bytes, BatchedCopyPlan* in, BatchedCopyPlan* out) {
  const std::vector<CopyEntry> in_entries = Entries(b, layout, fusion, true);
  const std::vector<CopyEntry> out_entries = Entries(b, layout, fusion, false);
  std::vector<double> us;
  for (int rep = 0; rep < 21; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    Check(ops::gpu::PlanBatchedCopy(in_entries, pre, {chunk_bytes, true}, in), "plan copy-in");
    Check(ops::gpu::PlanBatchedCopy(out_entries, post, {chunk_bytes, true}, out), "plan copy-out");
    const auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return Median(std::move(us));
}

// True when the outputs hold the inputs times `factor` (exact for powers of two and 1) after a
// float32 round trip, or within float16 rounding when `half` is set.
bool OutputsCorrect(const SetBuffers& b, float factor, bool half) {
  std::vector<float> in(static_cast<size_t>(b.tensor_bytes / 4));
  std::vector<float> out(in.size());
  BENCH_CUDA(cudaMemcpy(in.data(), b.in, in.size() * 4, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(out.data(), b.out, out.size() * 4, cudaMemcpyDeviceToHost));
  for (size_t t = 0; t < b.counts.size(); ++t) {
    const size_t first = static_cast<size_t>(b.tensor_offsets[t] / 4);
    for (size_t i = first; i < first + static_cast<size_t>(b.counts[t]); ++i) {
      const float want = in[i] * factor;
      const bool ok =
          half ? std::abs(out[i] - want) <= std::abs(want) * 1e-3f + 1e-7f : out[i] == want;
      if (!ok) {
        std::fprintf(stderr, "wrong output: tensor %zu element %zu: %g, want %g\n", t, i - first,
                     static_cast<double>(out[i]), static_cast<double>(want));
        return false;
      }
    }
  }
  return true;
}

nlohmann::json RunSet(const Args& args, const std::string& name, cudaStream_t stream,
                      BatchedCopyScratch* scratch, bool* ok) {
  absl::StatusOr<std::vector<TensorSpec>> specs = GetTensorSet(name);
  Check(specs.status(), "tensor set");
  SetBuffers b;
  for (const TensorSpec& t : *specs) {
    b.counts.push_back(t.num_elements());
    b.payload_bytes += t.num_elements() * 4;
  }
  const FusionLayout tensors = ops::gpu::PackFusionLayout(b.counts, DataType::kFloat32, 256);
  b.tensor_offsets = tensors.offsets;
  b.tensor_bytes = (tensors.total_bytes + 255) / 256 * 256;
  const FusionLayout f32 = ops::gpu::PackFusionLayout(b.counts, DataType::kFloat32, args.align);
  const FusionLayout f16 = ops::gpu::PackFusionLayout(b.counts, DataType::kFloat16, args.align);
  BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&b.in), static_cast<size_t>(b.tensor_bytes)));
  BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&b.out), static_cast<size_t>(b.tensor_bytes)));
  BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&b.fusion), static_cast<size_t>(f32.total_bytes)));
  {
    // Inputs: small integers as floats, exact under the power-of-two scales used below.
    std::vector<float> host(static_cast<size_t>(b.tensor_bytes / 4));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 2001) - 1000.0f;
    BENCH_CUDA(cudaMemcpy(b.in, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  }
  const double moved = 2.0 * static_cast<double>(b.payload_bytes);
  std::vector<Row> rows;
  const auto add_row = [&](std::string method, double seconds, double plan_us) {
    rows.push_back({std::move(method), seconds, moved / seconds / 1e9, plan_us});
  };
  const auto clear_out = [&] {
    BENCH_CUDA(cudaMemset(b.out, 0, static_cast<size_t>(b.tensor_bytes)));
  };

  // Batched: one launch in, one launch out.
  const auto batched = [&](const BatchedCopyPlan& in, const BatchedCopyPlan& out) {
    return [&, in_plan = &in, out_plan = &out] {
      Check(ops::gpu::LaunchBatchedCopy(*in_plan, scratch, static_cast<DeviceStream>(stream)),
            "launch copy-in");
      Check(ops::gpu::LaunchBatchedCopy(*out_plan, scratch, static_cast<DeviceStream>(stream)),
            "launch copy-out");
    };
  };
  BatchedCopyPlan in_plan, out_plan;
  for (const int64_t kib : args.chunk_kib) {
    const double plan_us =
        PlanPair(b, f32, DataType::kFloat32, 1.0, 1.0, kib << 10, &in_plan, &out_plan);
    clear_out();
    add_row("batched (" + std::to_string(kib) + " KiB chunks, " +
                std::to_string(in_plan.chunks.size()) + " blocks)",
            TimeIterations(args, stream, batched(in_plan, out_plan)), plan_us);
    *ok = OutputsCorrect(b, 1.0f, false) && *ok;
  }
  const size_t batched_rows = rows.size();
  const int64_t chunk_bytes = args.chunk_kib.front() << 10;
  {
    const double plan_us =
        PlanPair(b, f32, DataType::kFloat32, 0.5, 4.0, chunk_bytes, &in_plan, &out_plan);
    clear_out();
    add_row("batched, x0.5 in, x4 out", TimeIterations(args, stream, batched(in_plan, out_plan)),
            plan_us);
    *ok = OutputsCorrect(b, 2.0f, false) && *ok;
  }
  {
    const double plan_us =
        PlanPair(b, f16, DataType::kFloat16, 1.0, 1.0, chunk_bytes, &in_plan, &out_plan);
    clear_out();
    add_row("batched, float16 fusion buffer",
            TimeIterations(args, stream, batched(in_plan, out_plan)), plan_us);
    *ok = OutputsCorrect(b, 1.0f, true) && *ok;
  }
  // One cudaMemcpyAsync per tensor, in and out.
  clear_out();
  const double per_tensor = TimeIterations(args, stream, [&] {
    for (size_t i = 0; i < b.counts.size(); ++i) {
      const auto bytes = static_cast<size_t>(b.counts[i] * 4);
      BENCH_CUDA(cudaMemcpyAsync(b.fusion + f32.offsets[i], b.in + b.tensor_offsets[i], bytes,
                                 cudaMemcpyDeviceToDevice, stream));
    }
    for (size_t i = 0; i < b.counts.size(); ++i) {
      const auto bytes = static_cast<size_t>(b.counts[i] * 4);
      BENCH_CUDA(cudaMemcpyAsync(b.out + b.tensor_offsets[i], b.fusion + f32.offsets[i], bytes,
                                 cudaMemcpyDeviceToDevice, stream));
    }
  });
  add_row("cudaMemcpyAsync per tensor", per_tensor, -1);
  *ok = OutputsCorrect(b, 1.0f, false) && *ok;
  // One copy of the same total bytes each way (what a contiguous buffer would cost).
  const auto payload = static_cast<size_t>(b.payload_bytes);
  const double single = TimeIterations(args, stream, [&] {
    BENCH_CUDA(cudaMemcpyAsync(b.fusion, b.in, payload, cudaMemcpyDeviceToDevice, stream));
    BENCH_CUDA(cudaMemcpyAsync(b.out, b.fusion, payload, cudaMemcpyDeviceToDevice, stream));
  });
  add_row("single cudaMemcpyAsync of the total", single, -1);

  // The best batched configuration against the baselines.
  double best = rows[0].seconds;
  for (size_t i = 1; i < batched_rows; ++i) best = std::min(best, rows[i].seconds);
  const double pct_of_single = 100.0 * single / best;
  const double speedup = per_tensor / best;

  std::printf("\n%s: %zu tensors, %.1f MB (fusion alignment %lld bytes)\n", name.c_str(),
              b.counts.size(), static_cast<double>(b.payload_bytes) / 1e6,
              static_cast<long long>(args.align));
  std::printf("  %-48s %12s %10s %10s\n", "method (copy-in + copy-out)", "median us", "GB/s",
              "plan us");
  nlohmann::json jrows = nlohmann::json::array();
  for (const Row& r : rows) {
    if (r.plan_us >= 0) {
      std::printf("  %-48s %12.2f %10.1f %10.1f\n", r.method.c_str(), r.seconds * 1e6, r.gbps,
                  r.plan_us);
    } else {
      std::printf("  %-48s %12.2f %10.1f %10s\n", r.method.c_str(), r.seconds * 1e6, r.gbps, "-");
    }
    jrows.push_back({{"method", r.method},
                     {"median_us", r.seconds * 1e6},
                     {"gbps", r.gbps},
                     {"plan_us", r.plan_us}});
  }
  std::printf("  batched bandwidth: %.1f%% of the single copy's; %.2fx the per-tensor copies\n",
              pct_of_single, speedup);

  BENCH_CUDA(cudaFree(b.in));
  BENCH_CUDA(cudaFree(b.out));
  BENCH_CUDA(cudaFree(b.fusion));
  return {{"set", name},
          {"tensors", b.counts.size()},
          {"bytes", b.payload_bytes},
          {"align", args.align},
          {"rows", jrows},
          {"batched_bw_pct_of_single", pct_of_single},
          {"speedup_vs_per_tensor", speedup}};
}

int Main(int argc, char** argv) {
  Args args;
  CLI::App app{"chorus_gpu_copy_bench: batched fusion copy vs cudaMemcpyAsync"};
  app.add_option("--sets", args.sets, "Tensor sets")
      ->delimiter(',')
      ->check(CLI::IsMember(TensorSetNames()));
  app.add_option("--iters", args.iters, "Timed samples")->check(CLI::PositiveNumber);
  app.add_option("--warmup", args.warmup, "Untimed iterations")->check(CLI::NonNegativeNumber);
  app.add_option("--inner", args.inner, "Iterations per sample")->check(CLI::PositiveNumber);
  app.add_option("--chunk-kib", args.chunk_kib, "Chunk sizes of the batched copy, KiB")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--align", args.align, "Fusion buffer offset alignment, bytes (power of two)")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--json", args.json_path, "Also write the results to FILE as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if ((args.align & (args.align - 1)) != 0) {
    std::fprintf(stderr, "--align must be a power of two\n");
    return 2;
  }
  const absl::Status available = ops::gpu::CudaDeviceAvailable();
  if (!available.ok()) {
    std::printf("SKIPPED: %s\n", std::string(available.message()).c_str());
    return 77;
  }
  int device = 0;
  BENCH_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
  std::printf("device %d: %s, %d SMs\n", device, prop.name, prop.multiProcessorCount);
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Slots large enough for every plan here, so no slot grows while timing.
  BatchedCopyScratch::Options options;
  options.initial_chunk_capacity = 1 << 16;
  absl::StatusOr<std::unique_ptr<BatchedCopyScratch>> scratch = BatchedCopyScratch::Create(options);
  Check(scratch.status(), "scratch");

  bool ok = true;
  nlohmann::json result = {{"device", prop.name},
                           {"iters", args.iters},
                           {"inner", args.inner},
                           {"sets", nlohmann::json::array()}};
  for (const std::string& set : args.sets) {
    result["sets"].push_back(RunSet(args, set, stream, scratch->get(), &ok));
  }
  scratch->reset();
  BENCH_CUDA(cudaStreamDestroy(stream));
  if (!args.json_path.empty()) {
    std::ofstream f(args.json_path);
    f << result.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", args.json_path.c_str());
      return 1;
    }
  }
  if (!ok) {
    std::fprintf(stderr, "chorus_gpu_copy_bench: wrong results\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace chorus::bench

int main(int argc, char** argv) { return chorus::bench::Main(argc, argv); }
