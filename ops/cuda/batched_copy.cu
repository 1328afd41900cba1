// The batched fusion-copy kernels and their launcher (ops/cuda/batched_copy.h).
//
// Note [One block per chunk]: the grid has one 256-thread block per CopyChunk. A block reads
// its chunk record (from its kernel parameters or from the device table), then copies the
// chunk with the widest vector accesses the two pointers allow: for elements of S and D it
// processes V = 16 / max(sizeof(S), sizeof(D)) elements per access, so the wider side moves
// 16 bytes per load or store, after a scalar head that brings both pointers to a V-element
// boundary; when the two pointers cannot be aligned together it retries with V/2, down to 1.
// Each thread issues kUnroll loads before its stores, so a block keeps 16 KiB in flight.
//
// Note [Bit-exact with the CPU path]: every operation below is the CPU path's operation in the
// same precision: IEEE multiplies (nvcc's defaults: no flush-to-zero, and no fused multiply-add
// can form because nothing is added), float16 conversions by cvt.rn (round to nearest even,
// subnormals kept, overflow to inf, as FloatToHalf), bfloat16 by the same integer rounding as
// FloatToBfloat16, and integer scaling in double with the same saturating truncation. Only NaN
// payloads differ: GPU arithmetic returns a canonical NaN.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "base/status_macros.h"
#include "ops/cuda/batched_copy.h"

namespace chorus::ops::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
// Inline tables: up to 16 chunks in 384 bytes of kernel parameters (a cheaper launch for small
// batches), up to kMaxInlineChunks in 3,856 bytes, under the classic 4 KiB parameter limit.
constexpr size_t kSmallInlineChunks = 16;

struct KernelArgs {
  double scale;
  float scale_f;  // static_cast<float>(scale), as the CPU path multiplies 32/16-bit floats
};

template <size_t N>
struct InlineTable {
  CopyChunk chunks[N];
};
static_assert(sizeof(InlineTable<kMaxInlineChunks>) + sizeof(KernelArgs) <= 4096,
              "kernel parameters must fit the 4 KiB limit");

// ---------------------------------------------------------------------------------------------
// Machine words of 1..16 bytes.

template <int kBytes>
struct Word;
template <>
struct Word<16> {
  using type = uint4;
};
template <>
struct Word<8> {
  using type = uint2;
};
template <>
struct Word<4> {
  using type = uint32_t;
};
template <>
struct Word<2> {
  using type = uint16_t;
};
template <>
struct Word<1> {
  using type = uint8_t;
};

// ---------------------------------------------------------------------------------------------
// Element operations (see Note [Bit-exact with the CPU path]).

__device__ __forceinline__ float HalfBitsToFloat(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ uint16_t FloatToHalfBits(float f) {
  return __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ float Bf16BitsToFloat(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

__device__ __forceinline__ uint16_t FloatToBf16Bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Bounds of TruncateToInt in ops/cpu/reduce_kernels.cc: kUpper = max + 1 (a power of two).
template <typename T>
struct IntRange;
template <>
struct IntRange<uint8_t> {
  static constexpr uint8_t kMin = 0, kMax = 255;
  static constexpr double kLower = 0.0, kUpper = 256.0;
};
template <>
struct IntRange<int8_t> {
  static constexpr int8_t kMin = -128, kMax = 127;
  static constexpr double kLower = -128.0, kUpper = 128.0;
};
template <>
struct IntRange<int16_t> {
  static constexpr int16_t kMin = -32768, kMax = 32767;
  static constexpr double kLower = -32768.0, kUpper = 32768.0;
};
template <>
struct IntRange<int32_t> {
  static constexpr int32_t kMin = INT32_MIN, kMax = INT32_MAX;
  static constexpr double kLower = -2147483648.0, kUpper = 2147483648.0;
};
template <>
struct IntRange<int64_t> {
  static constexpr int64_t kMin = INT64_MIN, kMax = INT64_MAX;
  static constexpr double kLower = -9223372036854775808.0, kUpper = 9223372036854775808.0;
};

template <typename T>
struct ScaleInt {
  double f;
  __device__ __forceinline__ T operator()(T x) const {
    const double v = static_cast<double>(x) * f;
    if (isnan(v)) return T{0};
    if (v >= IntRange<T>::kUpper) return IntRange<T>::kMax;
    if (v <= IntRange<T>::kLower) return IntRange<T>::kMin;
    return static_cast<T>(v);
  }
};

struct Identity {
  __device__ __forceinline__ uint8_t operator()(uint8_t x) const { return x; }
};

struct ScaleFloat32 {
  float f;
  __device__ __forceinline__ float operator()(float x) const { return x * f; }
};

struct ScaleFloat64 {
  double f;
  __device__ __forceinline__ double operator()(double x) const { return x * f; }
};

struct ScaleFloat16 {
  float f;
  __device__ __forceinline__ uint16_t operator()(uint16_t x) const {
    return FloatToHalfBits(HalfBitsToFloat(x) * f);
  }
};

struct ScaleBfloat16 {
  float f;
  __device__ __forceinline__ uint16_t operator()(uint16_t x) const {
    return FloatToBf16Bits(Bf16BitsToFloat(x) * f);
  }
};

struct Float32ToFloat16 {
  float f;
  __device__ __forceinline__ uint16_t operator()(float x) const { return FloatToHalfBits(x * f); }
};

struct Float16ToFloat32 {
  float f;
  __device__ __forceinline__ float operator()(uint16_t x) const { return HalfBitsToFloat(x) * f; }
};

struct Float32ToBfloat16 {
  float f;
  __device__ __forceinline__ uint16_t operator()(float x) const { return FloatToBf16Bits(x * f); }
};

struct Bfloat16ToFloat32 {
  float f;
  __device__ __forceinline__ float operator()(uint16_t x) const { return Bf16BitsToFloat(x) * f; }
};

// ---------------------------------------------------------------------------------------------
// Block-wide loops (see Note [One block per chunk]).

// Applies `op` to the V elements packed in `in`.
template <typename S, typename D, int V, typename Op>
__device__ __forceinline__ typename Word<sizeof(D) * V>::type ApplyWord(
    const typename Word<sizeof(S) * V>::type& in, const Op& op) {
  S s[V];
  D d[V];
  memcpy(s, &in, sizeof(s));
#pragma unroll
  for (int k = 0; k < V; ++k) d[k] = op(s[k]);
  typename Word<sizeof(D) * V>::type out;
  memcpy(&out, d, sizeof(d));
  return out;
}

// dst[i] = op(src[i]) for the `nwords` words of V elements. REQUIRES: src and dst aligned to
// their word sizes. src == dst is allowed (each word is read before it is written, by the same
// thread), so the pointers are not __restrict__.
template <typename S, typename D, int V, typename Op>
__device__ __forceinline__ void WordLoop(const S* src, D* dst, uint32_t nwords, const Op& op) {
  using SW = typename Word<sizeof(S) * V>::type;
  using DW = typename Word<sizeof(D) * V>::type;
  const SW* s = reinterpret_cast<const SW*>(src);
  DW* d = reinterpret_cast<DW*>(dst);
  for (uint32_t base = threadIdx.x; base < nwords; base += kUnroll * kThreads) {
    SW r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = base + u * kThreads;
      if (i < nwords) r[u] = s[i];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = base + u * kThreads;
      if (i < nwords) d[i] = ApplyWord<S, D, V>(r[u], op);
    }
  }
}

// dst[i] = op(src[i]) for i < n, with words of V elements where the pointers allow.
// REQUIRES: src aligned to sizeof(S), dst to sizeof(D) (checked by the planner).
template <typename S, typename D, int V, typename Op>
__device__ void Elementwise(const S* src, D* dst, uint32_t n, const Op& op) {
  if constexpr (V > 1) {
    const uintptr_t s_index = reinterpret_cast<uintptr_t>(src) / sizeof(S);
    const uintptr_t d_index = reinterpret_cast<uintptr_t>(dst) / sizeof(D);
    const auto head = static_cast<uint32_t>((V - s_index % V) % V);
    if (s_index % V == d_index % V && head < n) {
      WordLoop<S, D, 1>(src, dst, head, op);
      const uint32_t nwords = (n - head) / V;
      WordLoop<S, D, V>(src + head, dst + head, nwords, op);
      const uint32_t done = head + nwords * V;
      WordLoop<S, D, 1>(src + done, dst + done, n - done, op);
      return;
    }
    Elementwise<S, D, V / 2>(src, dst, n, op);
  } else {
    WordLoop<S, D, 1>(src, dst, n, op);
  }
}

template <typename S, typename D, typename Op>
__device__ __forceinline__ void Run(const CopyChunk& c, const Op& op) {
  constexpr int kV = 16 / (sizeof(S) > sizeof(D) ? sizeof(S) : sizeof(D));
  Elementwise<S, D, kV>(static_cast<const S*>(c.src), static_cast<D*>(c.dst), c.count, op);
}

__device__ void RunChunk(const CopyChunk& c, const KernelArgs& a) {
  switch (c.kind) {
    case CopyKind::kBytes:
      return Run<uint8_t, uint8_t>(c, Identity{});
    case CopyKind::kScaleUint8:
      return Run<uint8_t, uint8_t>(c, ScaleInt<uint8_t>{a.scale});
    case CopyKind::kScaleInt8:
      return Run<int8_t, int8_t>(c, ScaleInt<int8_t>{a.scale});
    case CopyKind::kScaleInt16:
      return Run<int16_t, int16_t>(c, ScaleInt<int16_t>{a.scale});
    case CopyKind::kScaleInt32:
      return Run<int32_t, int32_t>(c, ScaleInt<int32_t>{a.scale});
    case CopyKind::kScaleInt64:
      return Run<int64_t, int64_t>(c, ScaleInt<int64_t>{a.scale});
    case CopyKind::kScaleFloat16:
      return Run<uint16_t, uint16_t>(c, ScaleFloat16{a.scale_f});
    case CopyKind::kScaleBfloat16:
      return Run<uint16_t, uint16_t>(c, ScaleBfloat16{a.scale_f});
    case CopyKind::kScaleFloat32:
      return Run<float, float>(c, ScaleFloat32{a.scale_f});
    case CopyKind::kScaleFloat64:
      return Run<double, double>(c, ScaleFloat64{a.scale});
    case CopyKind::kFloat32ToFloat16:
      return Run<float, uint16_t>(c, Float32ToFloat16{a.scale_f});
    case CopyKind::kFloat16ToFloat32:
      return Run<uint16_t, float>(c, Float16ToFloat32{a.scale_f});
    case CopyKind::kFloat32ToBfloat16:
      return Run<float, uint16_t>(c, Float32ToBfloat16{a.scale_f});
    case CopyKind::kBfloat16ToFloat32:
      return Run<uint16_t, float>(c, Bfloat16ToFloat32{a.scale_f});
  }
}

template <size_t N>
__global__ void __launch_bounds__(kThreads)
    InlineCopyKernel(const __grid_constant__ InlineTable<N> table, const KernelArgs args) {
  const CopyChunk c = table.chunks[blockIdx.x];
  RunChunk(c, args);
}

__global__ void __launch_bounds__(kThreads)
    TableCopyKernel(const CopyChunk* __restrict__ table, const KernelArgs args) {
  const CopyChunk c = table[blockIdx.x];
  RunChunk(c, args);
}

// ---------------------------------------------------------------------------------------------
// Host side.

absl::Status CudaError(cudaError_t err, const char* what) {
  std::string msg =
      std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return absl::UnavailableError(std::move(msg));
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(std::move(msg));
    default:
      return absl::InternalError(std::move(msg));
  }
}

#define CHORUS_CUDA_RETURN_IF_ERROR_(call)                                    \
  do {                                                                        \
    if (const cudaError_t chorus_err_ = (call); chorus_err_ != cudaSuccess) { \
      return CudaError(chorus_err_, #call);                                   \
    }                                                                         \
  } while (0)

// REQUIRES: plan.chunks.size() <= N. Launch errors are left for cudaGetLastError.
template <size_t N>
void LaunchInline(const BatchedCopyPlan& plan, const KernelArgs& args, cudaStream_t stream) {
  InlineTable<N> table;
  std::memcpy(table.chunks, plan.chunks.data(), plan.chunks.size() * sizeof(CopyChunk));
  InlineCopyKernel<N>
      <<<static_cast<unsigned>(plan.chunks.size()), kThreads, 0, stream>>>(table, args);
}

}  // namespace

struct BatchedCopyScratch::Impl {
  struct Slot {
    CopyChunk* host = nullptr;    // pinned staging (cudaMallocHost)
    CopyChunk* device = nullptr;  // the kernel's table (cudaMalloc)
    size_t capacity = 0;          // chunks
    cudaEvent_t done = nullptr;   // recorded after the launch that last used this slot
    bool pending = false;         // `done` has been recorded
  };

  int device = 0;
  std::vector<Slot> slots;
  size_t next = 0;

  // Frees one slot's buffers (not its event). Errors are ignored: called on teardown or growth.
  static void FreeBuffers(Slot& s) {
    if (s.host != nullptr) (void)cudaFreeHost(s.host);
    if (s.device != nullptr) (void)cudaFree(s.device);
    s.host = nullptr;
    s.device = nullptr;
    s.capacity = 0;
  }

  static absl::Status Allocate(Slot& s, size_t capacity) {
    FreeBuffers(s);
    const size_t bytes = capacity * sizeof(CopyChunk);
    CHORUS_CUDA_RETURN_IF_ERROR_(cudaMallocHost(reinterpret_cast<void**>(&s.host), bytes));
    CHORUS_CUDA_RETURN_IF_ERROR_(cudaMalloc(reinterpret_cast<void**>(&s.device), bytes));
    s.capacity = capacity;
    return absl::OkStatus();
  }

  // The next slot of the ring, idle and holding at least `chunks` chunks.
  absl::StatusOr<Slot*> Acquire(size_t chunks) {
    Slot& s = slots[next];
    next = (next + 1) % slots.size();
    if (s.pending) {
      CHORUS_CUDA_RETURN_IF_ERROR_(cudaEventSynchronize(s.done));
      s.pending = false;
    }
    if (s.capacity < chunks) {
      absl::Status st = Allocate(s, std::max(chunks, 2 * s.capacity));
      if (!st.ok()) {
        FreeBuffers(s);
        return st;
      }
    }
    return &s;
  }
};

BatchedCopyScratch::BatchedCopyScratch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BatchedCopyScratch::~BatchedCopyScratch() {
  if (impl_ == nullptr) return;
  for (Impl::Slot& s : impl_->slots) {
    if (s.pending) (void)cudaEventSynchronize(s.done);
    if (s.done != nullptr) (void)cudaEventDestroy(s.done);
    Impl::FreeBuffers(s);
  }
}

absl::StatusOr<std::unique_ptr<BatchedCopyScratch>> BatchedCopyScratch::Create(
    const Options& options) {
  if (options.num_slots < 1 || options.initial_chunk_capacity < 1) {
    return absl::InvalidArgumentError(
        "BatchedCopyScratch: num_slots and initial_chunk_capacity must be at least 1");
  }
  auto impl = std::make_unique<Impl>();
  CHORUS_CUDA_RETURN_IF_ERROR_(cudaGetDevice(&impl->device));
  // Owned by `scratch` from here on, so every exit frees what was allocated.
  impl->slots.resize(static_cast<size_t>(options.num_slots));
  std::unique_ptr<BatchedCopyScratch> scratch(new BatchedCopyScratch(std::move(impl)));
  for (Impl::Slot& s : scratch->impl_->slots) {
    CHORUS_CUDA_RETURN_IF_ERROR_(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    CHORUS_RETURN_IF_ERROR(Impl::Allocate(s, options.initial_chunk_capacity));
  }
  return scratch;
}

int BatchedCopyScratch::device() const { return impl_->device; }

int BatchedCopyScratch::num_slots() const { return static_cast<int>(impl_->slots.size()); }

size_t BatchedCopyScratch::slot_capacity(int slot) const {
  return impl_->slots.at(static_cast<size_t>(slot)).capacity;
}

absl::Status PreloadBatchedCopyKernels() {
  // cudaFuncGetAttributes loads the function into the current context.
  cudaFuncAttributes attributes;
  const void* kernels[] = {reinterpret_cast<const void*>(&InlineCopyKernel<kSmallInlineChunks>),
                           reinterpret_cast<const void*>(&InlineCopyKernel<kMaxInlineChunks>),
                           reinterpret_cast<const void*>(&TableCopyKernel)};
  for (const void* kernel : kernels) {
    if (const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel); err != cudaSuccess) {
      return CudaError(err, "cudaFuncGetAttributes (preloading the copy kernels)");
    }
  }
  return absl::OkStatus();
}

absl::Status CudaDeviceAvailable() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // cudaGetDeviceCount's error is not sticky; clear it
    return absl::UnavailableError(
        std::string("no usable CUDA device: cudaGetDeviceCount failed: ") + cudaGetErrorName(err) +
        " (" + cudaGetErrorString(err) + ")");
  }
  if (count == 0) {
    return absl::UnavailableError("no CUDA device is visible (cudaGetDeviceCount returned 0)");
  }
  return absl::OkStatus();
}

absl::Status LaunchBatchedCopy(const BatchedCopyPlan& plan, BatchedCopyScratch* scratch,
                               DeviceStream stream) {
  const size_t n = plan.chunks.size();
  if (n == 0) return absl::OkStatus();
  const auto s = static_cast<cudaStream_t>(stream);
  const KernelArgs args{plan.scale, static_cast<float>(plan.scale)};
  // Discard a stale error of an earlier call on this thread, so that the check after the
  // launch reports this launch.
  (void)cudaGetLastError();
  if (n <= kSmallInlineChunks) {
    LaunchInline<kSmallInlineChunks>(plan, args, s);
  } else if (n <= kMaxInlineChunks) {
    LaunchInline<kMaxInlineChunks>(plan, args, s);
  } else {
    if (scratch == nullptr) {
      return absl::InvalidArgumentError("LaunchBatchedCopy: a plan of " + std::to_string(n) +
                                        " chunks (more than " + std::to_string(kMaxInlineChunks) +
                                        ") needs a BatchedCopyScratch");
    }
    int device = -1;
    CHORUS_CUDA_RETURN_IF_ERROR_(cudaGetDevice(&device));
    if (device != scratch->impl_->device) {
      return absl::FailedPreconditionError(
          "LaunchBatchedCopy: the current device is " + std::to_string(device) +
          " but the scratch belongs to device " + std::to_string(scratch->impl_->device));
    }
    CHORUS_ASSIGN_OR_RETURN(BatchedCopyScratch::Impl::Slot * slot, scratch->impl_->Acquire(n));
    std::memcpy(slot->host, plan.chunks.data(), n * sizeof(CopyChunk));
    CHORUS_CUDA_RETURN_IF_ERROR_(cudaMemcpyAsync(slot->device, slot->host, n * sizeof(CopyChunk),
                                                 cudaMemcpyHostToDevice, s));
    TableCopyKernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(slot->device, args);
    const cudaError_t launch_err = cudaGetLastError();
    // Recorded even when the launch failed: the table copy reading the staging slot is queued.
    CHORUS_CUDA_RETURN_IF_ERROR_(cudaEventRecord(slot->done, s));
    slot->pending = true;
    if (launch_err != cudaSuccess) return CudaError(launch_err, "TableCopyKernel launch");
    return absl::OkStatus();
  }
  const cudaError_t launch_err = cudaGetLastError();
  if (launch_err != cudaSuccess) return CudaError(launch_err, "InlineCopyKernel launch");
  return absl::OkStatus();
}

}  // namespace chorus::ops::gpu
