// File: bench/step_bench.h
//
// The gradient traffic of one data-parallel training step, for the chorus_bench subcommands
// that time steps (bench/steps.h, bench/autotune_bench.h): a tensor set's per-tensor gradient
// buffers, chorus's step (one in-place Average allreduce per tensor, last tensor first, then
// every handle released), the raw MPI baselines on one contiguous buffer, and the inputs and
// checks that catch a wrong result. A chorus step submits its ops through Enqueue
// (ChorusStep) or as registered ops (RegisteredStep).
//
// Thread-safety: main thread only; the raw baselines call MPI on MPI_COMM_WORLD, so only while
// no chorus op is in flight (bench/measure.h).
#ifndef CHORUS_BENCH_STEP_BENCH_H_
#define CHORUS_BENCH_STEP_BENCH_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include <mpi.h>

#include "base/status_macros.h"
#include "bench/tensor_sets.h"
#include "chorus/chorus.h"
#include "chorus/types.h"
#include "ops/mpi/mpi_datatypes.h"
#include "runtime/execute/huge_pages.h"

namespace chorus::bench {

inline constexpr int64_t kKiB = 1024;
inline constexpr int64_t kMiB = 1024 * kKiB;

// A pseudo-random integer in [0, 64) for global element index `g`: distinct tensors and
// offsets get distinct patterns, so a result routed to the wrong place is caught.
inline float Pattern(int64_t g) {
  return static_cast<float>(((static_cast<uint64_t>(g) * 2654435761u) >> 16) % 64);
}

// The tensor set, chorus's per-tensor gradient buffers and the raw baselines' contiguous
// buffer. Main thread only.
class StepBench {
 public:
  // Where chorus's gradients live: one allocation per tensor, or slices of one buffer laid out
  // in the order a step submits them (last tensor first), as gradients that are views into a
  // bucket are (Note [Zero-copy windows] in docs/fusion.md).
  enum class Layout { kSeparate, kBucket };

  StepBench(std::vector<TensorSpec> tensors, int rank, int ranks, Layout layout = Layout::kSeparate)
      : tensors_(std::move(tensors)), rank_(rank), ranks_(ranks) {
    int64_t offset = 0;
    for (const TensorSpec& t : tensors_) {
      offsets_.push_back(offset);
      offset += t.num_elements();
    }
    total_ = offset;
    flat_.resize(static_cast<size_t>(total_));
    handles_.reserve(tensors_.size());
    grads_.resize(tensors_.size());
    storage_.reserve(tensors_.size());
    if (layout == Layout::kBucket) {
      // On huge pages, as chorus's own fusion buffer (runtime/execute/huge_pages.h): a bucket
      // reduced in place is what MPI reads and writes.
      bucket_ = runtime::AllocateHugePageBuffer(total_ * static_cast<int64_t>(sizeof(float)));
      float* next = reinterpret_cast<float*>(bucket_.get());
      for (size_t k = tensors_.size(); k-- > 0;) {
        grads_[k] = absl::MakeSpan(next, static_cast<size_t>(tensors_[k].num_elements()));
        next += tensors_[k].num_elements();
      }
    } else {
      for (size_t k = 0; k < tensors_.size(); ++k) {
        storage_.emplace_back(static_cast<size_t>(tensors_[k].num_elements()));
        grads_[k] = absl::MakeSpan(storage_.back());
      }
    }
  }

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  int64_t total_elements() const { return total_; }

  // Enqueues every tensor's Average allreduce, last tensor first, then releases them all.
  absl::Status ChorusStep() {
    handles_.clear();
    for (size_t k = tensors_.size(); k-- > 0;) {
      CHORUS_ASSIGN_OR_RETURN(Handle handle, Enqueue(RequestOf(k)));
      handles_.push_back(handle);
    }
    for (Handle handle : handles_) {
      CHORUS_ASSIGN_OR_RETURN(OpResult result, Release(handle));
      CHORUS_RETURN_IF_ERROR(result.status);
    }
    return absl::OkStatus();
  }

  // The same step with registered ops (Note [Registered ops]): every tensor's allreduce is
  // registered at the first call (and again after chorus was re-initialised), then submitted
  // each step.
  absl::Status RegisteredStep() {
    if (slots_.empty()) CHORUS_RETURN_IF_ERROR(RegisterAll());
    handles_.clear();
    for (size_t k = tensors_.size(); k-- > 0;) {
      absl::StatusOr<Handle> handle = Submit(slots_[k], SubmitArgs{grads_[k].data()});
      if (absl::IsNotFound(handle.status()) && handles_.empty()) {
        // A new runtime since the registration (Reinit): register in this one.
        CHORUS_RETURN_IF_ERROR(RegisterAll());
        handle = Submit(slots_[k], SubmitArgs{grads_[k].data()});
      }
      CHORUS_RETURN_IF_ERROR(handle.status());
      handles_.push_back(*handle);
    }
    for (Handle handle : handles_) {
      CHORUS_ASSIGN_OR_RETURN(OpResult result, Release(handle));
      CHORUS_RETURN_IF_ERROR(result.status);
    }
    return absl::OkStatus();
  }

  // (a)
  absl::Status RawSingle() { return RawAllreduce(0, total_); }

  // (b)
  absl::Status RawPerTensor() {
    for (size_t k = tensors_.size(); k-- > 0;) {
      CHORUS_RETURN_IF_ERROR(RawAllreduce(offsets_[k], tensors_[k].num_elements()));
    }
    return absl::OkStatus();
  }

  // (c)
  absl::Status RawChunked(int64_t chunk_bytes) {
    const int64_t chunk = chunk_bytes / static_cast<int64_t>(sizeof(float));
    for (int64_t begin = 0; begin < total_; begin += chunk) {
      CHORUS_RETURN_IF_ERROR(RawAllreduce(begin, std::min(chunk, total_ - begin)));
    }
    return absl::OkStatus();
  }

  void FillChorus() {
    for (size_t k = 0; k < grads_.size(); ++k) {
      for (size_t i = 0; i < grads_[k].size(); ++i) {
        grads_[k][i] = Pattern(offsets_[k] + static_cast<int64_t>(i)) + static_cast<float>(rank_);
      }
    }
  }

  void FillRaw() {
    for (int64_t g = 0; g < total_; ++g) {
      flat_[static_cast<size_t>(g)] = Pattern(g) + static_cast<float>(rank_);
    }
  }

  // Zeroes the raw buffer: repeated in-place sums of zeros never overflow.
  void ClearRaw() { std::fill(flat_.begin(), flat_.end(), 0.0f); }

  // Checks chorus's buffers against the average of FillChorus over all ranks; on a mismatch
  // sets `*error` to the first one.
  bool CheckChorus(std::string* error) const {
    const double rank_mean = (ranks_ - 1) / 2.0;
    for (size_t k = 0; k < grads_.size(); ++k) {
      for (size_t i = 0; i < grads_[k].size(); ++i) {
        const double want = Pattern(offsets_[k] + static_cast<int64_t>(i)) + rank_mean;
        const double got = grads_[k][i];
        if (std::abs(got - want) > 1e-5 * std::max(1.0, std::abs(want))) {
          *error = absl::StrCat(tensors_[k].name, "[", i, "] = ", got, ", expected ", want);
          return false;
        }
      }
    }
    return true;
  }

  // Checks the raw buffer against the sum of FillRaw over all ranks (exact: small integers).
  bool CheckRaw(std::string* error) const {
    const double rank_sum = ranks_ * (ranks_ - 1) / 2.0;
    for (int64_t g = 0; g < total_; ++g) {
      const double want = ranks_ * static_cast<double>(Pattern(g)) + rank_sum;
      const double got = flat_[static_cast<size_t>(g)];
      if (got != want) {
        *error = absl::StrCat("element ", g, " = ", got, ", expected ", want);
        return false;
      }
    }
    return true;
  }

 private:
  absl::Status RawAllreduce(int64_t offset, int64_t count) {
    CHORUS_MPI_RETURN_IF_ERROR(MPI_Allreduce(MPI_IN_PLACE, flat_.data() + offset,
                                             static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                             MPI_COMM_WORLD));
    return absl::OkStatus();
  }

  absl::Status RegisterAll() {
    slots_.clear();
    for (size_t k = 0; k < tensors_.size(); ++k) {
      CHORUS_ASSIGN_OR_RETURN(OpSlot slot, RegisterOp(RequestOf(k)));
      slots_.push_back(slot);
    }
    return absl::OkStatus();
  }

  // Tensor k's in-place Average allreduce.
  OpRequest RequestOf(size_t k) const {
    OpRequest req;
    req.type = OpType::kAllreduce;
    req.name = tensors_[k].name;
    req.input = {grads_[k].data(), DataType::kFloat32, tensors_[k].shape};
    req.reduce_op = ReduceOp::kAverage;
    return req;
  }

  const std::vector<TensorSpec> tensors_;
  const int rank_;
  const int ranks_;
  std::vector<int64_t> offsets_;             // of each tensor in the flat buffer
  int64_t total_ = 0;                        // elements
  std::vector<std::vector<float>> storage_;  // of chorus's gradients (Layout::kSeparate)
  runtime::HugePageBuffer bucket_;           // of chorus's gradients (Layout::kBucket)
  std::vector<absl::Span<float>> grads_;     // chorus: each tensor's gradient
  std::vector<float> flat_;                  // raw MPI: one contiguous buffer
  std::vector<Handle> handles_;              // of the chorus step in progress
  std::vector<OpSlot> slots_;                // RegisteredStep's, by tensor
};

}  // namespace chorus::bench

#endif  // CHORUS_BENCH_STEP_BENCH_H_
