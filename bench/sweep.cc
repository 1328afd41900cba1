#include "bench/sweep.h"

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include <mpi.h>

#include "base/status_macros.h"
#include "bench/measure.h"
#include "chorus/chorus.h"
#include "chorus/types.h"
#include "ops/mpi/mpi_datatypes.h"
#include <nlohmann/json.hpp>

namespace chorus::bench {
namespace {

using Bytes = std::vector<std::byte>;

bool SplitsAcrossRanks(OpType op) {
  return op == OpType::kAllgather || op == OpType::kAlltoall || op == OpType::kReducescatter;
}

// nccl-tests' busbw factor for `op` over `n` ranks.
double BusFactor(OpType op, int n) {
  const double nd = n;
  switch (op) {
    case OpType::kAllreduce:
      return 2.0 * (nd - 1) / nd;
    case OpType::kBroadcast:
      return 1.0;
    default:
      return (nd - 1) / nd;
  }
}

// Small integers (0..4) that depend on the rank and the index: every reduction order of up to
// a few dozen ranks sums them exactly in every supported dtype.
template <typename T>
void FillTyped(void* data, int64_t count, int rank) {
  T* p = static_cast<T*>(data);
  for (int64_t i = 0; i < count; ++i) p[i] = static_cast<T>((i * 7 + rank * 3) % 5);
}

void Fill(DataType dtype, Bytes& buffer, int rank) {
  const int64_t count = static_cast<int64_t>(buffer.size() / DataTypeSize(dtype));
  void* data = buffer.data();
  switch (dtype) {
    case DataType::kUint8:
      return FillTyped<uint8_t>(data, count, rank);
    case DataType::kInt8:
      return FillTyped<int8_t>(data, count, rank);
    case DataType::kInt16:
      return FillTyped<int16_t>(data, count, rank);
    case DataType::kInt32:
      return FillTyped<int32_t>(data, count, rank);
    case DataType::kInt64:
      return FillTyped<int64_t>(data, count, rank);
    case DataType::kFloat32:
      return FillTyped<float>(data, count, rank);
    case DataType::kFloat64:
      return FillTyped<double>(data, count, rank);
    default:
      return;  // rejected by RunSweep
  }
}

// The buffers of one sweep size and the two ways of running the op over them. Main thread
// only; RunChorus returns only once the chorus op has completed, so no op is left in flight.
class SweepCase {
 public:
  // `count`: elements of the nccl-tests size (see sweep.h); divisible by `ranks` where the op
  // splits it.
  SweepCase(OpType op, DataType dtype, int64_t count, int rank, int ranks)
      : op_(op),
        dtype_(dtype),
        mpi_dtype_(ops::ToMpiDatatype(dtype)),
        count_(count),
        rank_(rank),
        ranks_(ranks),
        name_(absl::StrCat("sweep.", OpTypeName(op), ".", count * DataTypeSize(dtype))) {
    const size_t es = DataTypeSize(dtype);
    const size_t bytes = static_cast<size_t>(count) * es;
    const size_t slice = bytes / static_cast<size_t>(ranks);
    input_.resize(op == OpType::kAllgather ? slice : bytes);
    if (op == OpType::kAllreduce) chorus_out_.resize(bytes);
    if (op != OpType::kBroadcast) mpi_out_.resize(op == OpType::kReducescatter ? slice : bytes);
  }

  void FillInputs() { Fill(dtype_, input_, rank_); }

  absl::Status RunChorus() {
    OpRequest req;
    req.type = op_;
    req.name = name_;
    req.input = {input_.data(), dtype_, {ElementsOf(input_)}};
    if (op_ == OpType::kAllreduce) req.output = {chorus_out_.data(), dtype_, {count_}};
    req.reduce_op = ReduceOp::kSum;
    req.root_rank = 0;
    CHORUS_ASSIGN_OR_RETURN(Handle handle, Enqueue(std::move(req)));
    CHORUS_ASSIGN_OR_RETURN(OpResult result, Release(handle));
    CHORUS_RETURN_IF_ERROR(result.status);
    chorus_output_ = std::move(result.output);
    return absl::OkStatus();
  }

  absl::Status RunMpi() {
    const int n = static_cast<int>(count_);
    const int per_rank = static_cast<int>(count_ / ranks_);
    switch (op_) {
      case OpType::kAllreduce:
        CHORUS_MPI_RETURN_IF_ERROR(
            MPI_Allreduce(input_.data(), mpi_out_.data(), n, mpi_dtype_, MPI_SUM, MPI_COMM_WORLD));
        break;
      case OpType::kAllgather:
        CHORUS_MPI_RETURN_IF_ERROR(MPI_Allgather(input_.data(), per_rank, mpi_dtype_,
                                                 mpi_out_.data(), per_rank, mpi_dtype_,
                                                 MPI_COMM_WORLD));
        break;
      case OpType::kBroadcast:
        CHORUS_MPI_RETURN_IF_ERROR(MPI_Bcast(input_.data(), n, mpi_dtype_, 0, MPI_COMM_WORLD));
        break;
      case OpType::kAlltoall:
        CHORUS_MPI_RETURN_IF_ERROR(MPI_Alltoall(input_.data(), per_rank, mpi_dtype_,
                                                mpi_out_.data(), per_rank, mpi_dtype_,
                                                MPI_COMM_WORLD));
        break;
      case OpType::kReducescatter:
        CHORUS_MPI_RETURN_IF_ERROR(MPI_Reduce_scatter_block(
            input_.data(), mpi_out_.data(), per_rank, mpi_dtype_, MPI_SUM, MPI_COMM_WORLD));
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("sweep: unsupported op ", OpTypeName(op_)));
    }
    return absl::OkStatus();
  }

  // The bytes the last RunChorus / RunMpi produced on this rank (broadcast: in place, so only
  // until the next run or fill).
  Bytes ChorusResult() const {
    switch (op_) {
      case OpType::kAllreduce:
        return chorus_out_;
      case OpType::kBroadcast:
        return input_;
      default:
        if (chorus_output_ == nullptr) return Bytes{};
        return Bytes(chorus_output_->data(), chorus_output_->data() + chorus_output_->size());
    }
  }
  const Bytes& MpiResult() const { return op_ == OpType::kBroadcast ? input_ : mpi_out_; }

 private:
  int64_t ElementsOf(const Bytes& b) const {
    return static_cast<int64_t>(b.size() / DataTypeSize(dtype_));
  }

  const OpType op_;
  const DataType dtype_;
  const MPI_Datatype mpi_dtype_;
  const int64_t count_;
  const int rank_;
  const int ranks_;
  const std::string name_;  // the same for every iteration: exercises the response cache
  Bytes input_;
  Bytes chorus_out_;  // allreduce's output
  Bytes mpi_out_;     // raw MPI's output (none for broadcast, which is in place)
  std::shared_ptr<OutputBuffer> chorus_output_;  // allgather, alltoall, reducescatter
};

// Runs chorus and MPI once each from the same inputs and compares their bytes on every rank.
// DataLoss on every rank if any rank differs.
absl::Status Verify(SweepCase& c, int64_t size_bytes) {
  c.FillInputs();
  CHORUS_RETURN_IF_ERROR(c.RunChorus());
  const Bytes chorus = c.ChorusResult();
  c.FillInputs();
  CHORUS_RETURN_IF_ERROR(c.RunMpi());
  const Bytes& mpi = c.MpiResult();
  bool ok = chorus.size() == mpi.size();
  size_t first_diff = 0;
  if (ok) {
    for (; first_diff < mpi.size(); ++first_diff) {
      if (chorus[first_diff] != mpi[first_diff]) break;
    }
    ok = first_diff == mpi.size();
  }
  if (!ok) {
    std::fprintf(stderr,
                 "chorus_bench sweep: rank %d, size %lld: chorus result (%zu bytes) differs from "
                 "MPI's (%zu bytes) at byte %zu\n",
                 WorldRank(), static_cast<long long>(size_bytes), chorus.size(), mpi.size(),
                 first_diff);
  }
  CHORUS_ASSIGN_OR_RETURN(bool all_ok, AllRanksOk(ok));
  if (!all_ok) {
    return absl::DataLossError(
        absl::StrCat("sweep: chorus result differs from MPI's at size ", size_bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const SweepOptions& o) {
  if (o.min_bytes <= 0 || o.max_bytes < o.min_bytes) {
    return absl::InvalidArgumentError("sweep: need 0 < minbytes <= maxbytes");
  }
  if (o.factor < 2) return absl::InvalidArgumentError("sweep: stepfactor must be >= 2");
  if (o.iters < 1 || o.warmup < 0) {
    return absl::InvalidArgumentError("sweep: need iters >= 1 and warmup >= 0");
  }
  switch (o.op) {
    case OpType::kAllreduce:
    case OpType::kAllgather:
    case OpType::kBroadcast:
    case OpType::kAlltoall:
    case OpType::kReducescatter:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("sweep: unsupported op ", OpTypeName(o.op)));
  }
  for (DataType t : SweepDataTypes()) {
    if (t == o.dtype) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("sweep: unsupported dtype ", DataTypeName(o.dtype)));
}

struct Timing {
  double time_us;
  double algbw;
  double busbw;
};

Timing ToTiming(const Summary& s, int64_t bytes, double bus_factor) {
  const double seconds = s.median;
  const double algbw = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  return {seconds * 1e6, algbw, algbw * bus_factor};
}

nlohmann::json TimingJson(const Timing& t, const Summary& s) {
  return {{"time_us", t.time_us},  {"algbw_gbps", t.algbw}, {"busbw_gbps", t.busbw},
          {"p10_us", s.p10 * 1e6}, {"p90_us", s.p90 * 1e6}, {"min_us", s.min * 1e6},
          {"max_us", s.max * 1e6}};
}

}  // namespace

std::vector<DataType> SweepDataTypes() {
  return {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64,
          DataType::kInt16,   DataType::kInt8,    DataType::kUint8};
}

absl::StatusOr<nlohmann::json> RunSweep(const SweepOptions& options) {
  CHORUS_RETURN_IF_ERROR(Validate(options));
  const int rank = WorldRank();
  const int ranks = WorldSize();
  const bool print = rank == 0;
  const int64_t es = static_cast<int64_t>(DataTypeSize(options.dtype));
  const double bus_factor = BusFactor(options.op, ranks);

  nlohmann::json out = {{"benchmark", "sweep"},
                        {"op", OpTypeName(options.op)},
                        {"dtype", DataTypeName(options.dtype)},
                        {"ranks", ranks},
                        {"iters", options.iters},
                        {"warmup", options.warmup},
                        {"time_statistic", "median over iterations of the max over ranks"},
                        {"rows", nlohmann::json::array()}};
  if (print) {
    std::printf("# chorus_bench sweep: %s, %s, %d ranks, %d iters (+%d warmup)\n",
                OpTypeName(options.op), DataTypeName(options.dtype), ranks, options.iters,
                options.warmup);
    std::printf("# time: median over iters of the max over ranks; busbw = algbw * %.3f\n",
                bus_factor);
    std::printf("#%47s%34s\n", "chorus", "raw MPI");
    std::printf("# %12s %12s %10s %7s %7s  %10s %7s %7s  %10s\n", "size(B)", "count", "time(us)",
                "algbw", "busbw", "time(us)", "algbw", "busbw", "chorus/mpi");
    std::fflush(stdout);
  }

  for (int64_t size = options.min_bytes; size <= options.max_bytes;) {
    int64_t count = size / es;
    if (SplitsAcrossRanks(options.op)) count -= count % ranks;
    const int64_t bytes = count * es;
    if (count == 0 || count > INT_MAX) {
      if (print) {
        std::printf("# size %lld skipped: %s\n", static_cast<long long>(size),
                    count == 0 ? "less than one element per rank" : "count exceeds INT_MAX");
      }
    } else {
      SweepCase c(options.op, options.dtype, count, rank, ranks);
      CHORUS_RETURN_IF_ERROR(Verify(c, bytes));
      c.FillInputs();
      // Interleaved: each iteration times chorus, then MPI, so drift affects both alike.
      std::vector<double> times;  // chorus iters, then MPI iters
      times.resize(2 * static_cast<size_t>(options.iters));
      for (int it = 0; it < options.warmup + options.iters; ++it) {
        CHORUS_ASSIGN_OR_RETURN(double t_chorus, TimeOnce([&] { return c.RunChorus(); }));
        CHORUS_ASSIGN_OR_RETURN(double t_mpi, TimeOnce([&] { return c.RunMpi(); }));
        if (it >= options.warmup) {
          const size_t i = static_cast<size_t>(it - options.warmup);
          times[i] = t_chorus;
          times[static_cast<size_t>(options.iters) + i] = t_mpi;
        }
      }
      CHORUS_ASSIGN_OR_RETURN(std::vector<double> max_times, MaxOverRanks(times));
      const auto mid = max_times.begin() + options.iters;
      const Summary s_chorus = Summarize(std::vector<double>(max_times.begin(), mid));
      const Summary s_mpi = Summarize(std::vector<double>(mid, max_times.end()));
      const Timing chorus = ToTiming(s_chorus, bytes, bus_factor);
      const Timing mpi = ToTiming(s_mpi, bytes, bus_factor);
      const double ratio = mpi.time_us > 0 ? chorus.time_us / mpi.time_us : 0;
      if (print) {
        std::printf("  %12lld %12lld %10.2f %7.3f %7.3f  %10.2f %7.3f %7.3f  %10.2f\n",
                    static_cast<long long>(bytes), static_cast<long long>(count), chorus.time_us,
                    chorus.algbw, chorus.busbw, mpi.time_us, mpi.algbw, mpi.busbw, ratio);
        std::fflush(stdout);
      }
      out["rows"].push_back({{"size_bytes", bytes},
                             {"count", count},
                             {"chorus", TimingJson(chorus, s_chorus)},
                             {"mpi", TimingJson(mpi, s_mpi)},
                             {"chorus_over_mpi", ratio}});
    }
    if (size > options.max_bytes / options.factor) break;
    size *= options.factor;
  }
  out["verified"] = true;
  if (print) std::printf("# verified: chorus results equal MPI's byte for byte at every size\n");
  return out;
}

}  // namespace chorus::bench
