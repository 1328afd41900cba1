// MPI-tier tests of the runtime's collectives through the public API (chorus/chorus.h):
// allreduce (every reducible dtype, op and size; in and out of place; scaling), allgather,
// broadcast, alltoall, reducescatter, barrier, many tensors at once, a tensor larger than the
// pipeline chunk, grouped ops and callbacks. Every rank computes its inputs and the expected
// results independently and submits its ops in its own order.
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>

#include "chorus/chorus.h"
#include "chorus/types.h"
#include "runtime/execute/huge_pages.h"
#include "test/mpi/test_util.h"
#include "test/support/catch_session.h"
#include "test/support/huge_page_probe.h"

namespace chorus::mpitest {
namespace {

// Input value of `rank` at element i for an allreduce with `op`.
double ReduceInput(ReduceOp op, DataType dtype, int rank, int64_t i) {
  switch (op) {
    case ReduceOp::kMin:
    case ReduceOp::kMax: {
      const double v = static_cast<double>((rank * 3 + i * 5) % 11);
      return HasSign(dtype) ? v - 5 : v;
    }
    case ReduceOp::kProduct: {  // 1 or 2, sometimes negative: |product| <= 16 on 4 ranks
      const double v = static_cast<double>(1 + (rank + i) % 2);
      return HasSign(dtype) && (rank + 2 * i) % 3 == 0 ? -v : v;
    }
    case ReduceOp::kAverage:
      return AverageValue(dtype, rank, i);
    default:
      return SumValue(dtype, rank, i);
  }
}

// The reduction over ranks 0..size-1 of input(rank) with `op` (Average as the runtime defines
// it for integers: truncation toward zero).
double Reduced(ReduceOp op, DataType dtype, int size, const std::function<double(int)>& input) {
  double acc = input(0);
  for (int r = 1; r < size; ++r) {
    const double v = input(r);
    switch (op) {
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
      default:
        acc += v;
    }
  }
  if (op == ReduceOp::kAverage) {
    return IsFloatingPoint(dtype) ? acc / size : IntegerAverage(acc, size);
  }
  return acc;
}

std::string Name(const std::string& test, DataType dtype, const std::string& rest) {
  return "ops." + test + "." + DataTypeName(dtype) + "." + rest;
}

TEST_CASE("allreduce: every reducible dtype, op and size, in place and out of place",
          "[mpi][allreduce]") {
  const Topology topo = InitAndTopology();
  const DataType dtype = GENERATE(DataType::kUint8, DataType::kInt8, DataType::kInt16,
                                  DataType::kInt32, DataType::kInt64, DataType::kFloat16,
                                  DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64);
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                               ReduceOp::kProduct);
  INFO(DataTypeName(dtype) << " " << ReduceOpName(op) << " rank " << topo.rank);

  // Counts 0, 1 (a scalar), 7 and 1023 (3-d), each in place and out of place.
  const std::vector<std::vector<int64_t>> shapes = {{0}, {}, {7}, {3, 11, 31}};
  std::vector<std::unique_ptr<Tensor>> inputs;
  std::vector<std::unique_ptr<Tensor>> outputs;  // null: in place
  std::vector<OpRequest> requests;
  for (const auto& shape : shapes) {
    for (bool in_place : {true, false}) {
      auto in = std::make_unique<Tensor>(dtype, shape);
      in->Fill([&](int64_t i) { return ReduceInput(op, dtype, topo.rank, i); });
      OpRequest req =
          AllreduceRequest(Name("allreduce", dtype,
                                std::string(ReduceOpName(op)) + ".n" + std::to_string(in->size()) +
                                    (in_place ? ".inplace" : ".outofplace")),
                           *in, op);
      std::unique_ptr<Tensor> out;
      if (!in_place) {
        out = std::make_unique<Tensor>(dtype, shape);
        out->Fill([](int64_t) { return 99; });
        req.output = out->view();
      }
      requests.push_back(std::move(req));
      inputs.push_back(std::move(in));
      outputs.push_back(std::move(out));
    }
  }
  const std::vector<OpResult> results =
      ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/1));

  for (size_t k = 0; k < results.size(); ++k) {
    INFO("tensor " << k << " of " << inputs[k]->size() << " elements, "
                   << (outputs[k] ? "out of place" : "in place") << ": "
                   << results[k].status.ToString());
    CHECK(results[k].status.ok());
    const Tensor& result = outputs[k] ? *outputs[k] : *inputs[k];
    CHECK(result.Mismatch([&](int64_t i) {
      return Reduced(op, dtype, topo.size, [&](int r) { return ReduceInput(op, dtype, r, i); });
    }) == "");
    if (outputs[k]) {  // the input of an out-of-place allreduce is read only
      CHECK(inputs[k]->Mismatch([&](int64_t i) { return ReduceInput(op, dtype, topo.rank, i); }) ==
            "");
    }
  }
}

TEST_CASE("allreduce: prescale and postscale factors", "[mpi][allreduce]") {
  const Topology topo = InitAndTopology();
  const DataType dtype = GENERATE(DataType::kUint8, DataType::kInt8, DataType::kInt16,
                                  DataType::kInt32, DataType::kInt64, DataType::kFloat16,
                                  DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64);
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kAverage);
  // Integer factors keep integer results exact (|result| <= 80 on 4 ranks).
  const bool fp = IsFloatingPoint(dtype);
  const double pre = fp ? 0.5 : 2.0;
  const double post = fp ? 3.0 : 2.0;
  INFO(DataTypeName(dtype) << " " << ReduceOpName(op) << " rank " << topo.rank);

  auto input = [&](int r, int64_t i) { return AverageValue(dtype, r, i); };
  auto expected = [&](int64_t i) {
    double sum = 0;
    for (int r = 0; r < topo.size; ++r) sum += input(r, i) * pre;
    if (op == ReduceOp::kAverage) {
      return fp ? sum * post / topo.size : IntegerAverage(sum * post, topo.size);
    }
    return sum * post;
  };

  Tensor in_place(dtype, {13});
  Tensor in(dtype, {2, 5});
  Tensor out(dtype, {2, 5});
  in_place.Fill([&](int64_t i) { return input(topo.rank, i); });
  in.Fill([&](int64_t i) { return input(topo.rank, i); });
  std::vector<OpRequest> requests;
  requests.push_back(AllreduceRequest(
      Name("scale", dtype, std::string(ReduceOpName(op)) + ".inplace"), in_place, op));
  requests.push_back(AllreduceRequest(
      Name("scale", dtype, std::string(ReduceOpName(op)) + ".outofplace"), in, op));
  requests.back().output = out.view();
  for (OpRequest& req : requests) {
    req.prescale_factor = pre;
    req.postscale_factor = post;
  }
  const std::vector<OpResult> results =
      ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/2));
  for (const OpResult& r : results) {
    INFO(r.status.ToString());
    CHECK(r.status.ok());
  }
  CHECK(in_place.Mismatch(expected) == "");
  CHECK(out.Mismatch(expected) == "");
  CHECK(in.Mismatch([&](int64_t i) { return input(topo.rank, i); }) == "");  // not scaled
}

TEST_CASE("allgather: different first dimensions per rank, with and without trailing dims",
          "[mpi][allgather]") {
  const Topology topo = InitAndTopology();
  const DataType dtype = GENERATE(from_range(std::begin(kAllDataTypes), std::end(kAllDataTypes)));
  const std::vector<int64_t> trailing =
      GENERATE(std::vector<int64_t>{}, std::vector<int64_t>{2, 3});
  INFO(DataTypeName(dtype) << " trailing rank " << trailing.size() << " rank " << topo.rank);
  const int64_t row = NumElements(trailing);

  // Pattern 0: odd ranks contribute no rows; pattern 1: 2 rows everywhere; pattern 2: rank r
  // contributes size-1-r rows (the last rank none).
  auto rows = [&](int pattern, int r) -> int64_t {
    if (pattern == 0) return r % 2 == 1 ? 0 : r + 1;
    if (pattern == 1) return 2;
    return topo.size - 1 - r;
  };
  constexpr int kPatterns = 3;
  std::vector<std::unique_ptr<Tensor>> inputs;
  std::vector<OpRequest> requests;
  for (int p = 0; p < kPatterns; ++p) {
    std::vector<int64_t> shape = {rows(p, topo.rank)};
    shape.insert(shape.end(), trailing.begin(), trailing.end());
    auto in = std::make_unique<Tensor>(dtype, shape);
    in->Fill([&](int64_t i) { return MoveValue(dtype, topo.rank, i); });
    requests.push_back(MakeRequest(
        OpType::kAllgather,
        Name("allgather", dtype, "d" + std::to_string(trailing.size()) + ".p" + std::to_string(p)),
        in->view()));
    inputs.push_back(std::move(in));
  }
  const std::vector<OpResult> results =
      ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/3));

  for (int p = 0; p < kPatterns; ++p) {
    const OpResult& r = results[p];
    INFO("pattern " << p << ": " << r.status.ToString());
    CHECK(r.status.ok());
    int64_t total_rows = 0;
    std::vector<std::pair<int, int64_t>> source;  // (rank, element index there) per element
    for (int q = 0; q < topo.size; ++q) {
      total_rows += rows(p, q);
      for (int64_t i = 0; i < rows(p, q) * row; ++i) source.emplace_back(q, i);
    }
    std::vector<int64_t> want_shape = {total_rows};
    want_shape.insert(want_shape.end(), trailing.begin(), trailing.end());
    CHECK(r.output_shape == want_shape);
    CHECK(Mismatch(OutputData(r), dtype, static_cast<int64_t>(source.size()), [&](int64_t i) {
            return MoveValue(dtype, source[i].first, source[i].second);
          }) == "");
  }
}

TEST_CASE("broadcast: from every root", "[mpi][broadcast]") {
  const Topology topo = InitAndTopology();
  const DataType dtype = GENERATE(from_range(std::begin(kAllDataTypes), std::end(kAllDataTypes)));
  INFO(DataTypeName(dtype) << " rank " << topo.rank);

  std::vector<std::unique_ptr<Tensor>> buffers;
  std::vector<OpRequest> requests;
  for (int root = 0; root < topo.size; ++root) {
    auto t = std::make_unique<Tensor>(dtype, std::vector<int64_t>{5, 3});
    // Non-roots start from their own (different) data, which must be overwritten.
    const int source = root == topo.rank ? root : topo.rank + topo.size + 7;
    t->Fill([&](int64_t i) { return MoveValue(dtype, source, i); });
    OpRequest req = MakeRequest(OpType::kBroadcast,
                                Name("broadcast", dtype, "root" + std::to_string(root)), t->view());
    req.root_rank = root;
    requests.push_back(std::move(req));
    buffers.push_back(std::move(t));
  }
  const std::vector<OpResult> results =
      ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/4));
  for (int root = 0; root < topo.size; ++root) {
    INFO("root " << root << ": " << results[root].status.ToString());
    CHECK(results[root].status.ok());
    CHECK(buffers[root]->Mismatch([&](int64_t i) { return MoveValue(dtype, root, i); }) == "");
  }
}

TEST_CASE("alltoall: explicit and equal splits", "[mpi][alltoall]") {
  const Topology topo = InitAndTopology();
  const DataType dtype = GENERATE(from_range(std::begin(kAllDataTypes), std::end(kAllDataTypes)));
  // 0: explicit splits that differ per rank (some 0); 1: equal split (empty splits);
  // 2: explicit, and rank 0 sends nothing at all.
  const int mode = GENERATE(0, 1, 2);
  INFO(DataTypeName(dtype) << " mode " << mode << " rank " << topo.rank);
  constexpr int64_t kRow = 2;  // trailing dimension

  auto split = [&](int src, int dst) -> int64_t {
    if (mode == 1) return 2;
    if (mode == 2 && src == 0) return 0;
    return (src + 2 * dst) % 3;
  };
  auto sent_before = [&](int src, int dst) {  // rows src sends to ranks before dst
    int64_t n = 0;
    for (int d = 0; d < dst; ++d) n += split(src, d);
    return n;
  };

  const int64_t my_rows = sent_before(topo.rank, topo.size);
  Tensor in(dtype, {my_rows, kRow});
  in.Fill([&](int64_t i) { return MoveValue(dtype, topo.rank, i); });
  OpRequest req = MakeRequest(OpType::kAlltoall,
                              Name("alltoall", dtype, "m" + std::to_string(mode)), in.view());
  if (mode != 1) {
    for (int d = 0; d < topo.size; ++d) req.splits.push_back(split(topo.rank, d));
  }
  std::vector<OpRequest> requests;
  requests.push_back(std::move(req));
  const OpResult r = std::move(ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, 5))[0]);
  INFO(r.status.ToString());
  CHECK(r.status.ok());

  std::vector<int64_t> want_splits;
  std::vector<std::pair<int, int64_t>> source;  // (rank, element index there) per element
  for (int q = 0; q < topo.size; ++q) {
    want_splits.push_back(split(q, topo.rank));
    const int64_t first = sent_before(q, topo.rank) * kRow;
    for (int64_t i = 0; i < split(q, topo.rank) * kRow; ++i) source.emplace_back(q, first + i);
  }
  const int64_t total = static_cast<int64_t>(source.size()) / kRow;
  CHECK(r.received_splits == want_splits);
  CHECK(r.output_shape == std::vector<int64_t>{total, kRow});
  CHECK(Mismatch(OutputData(r), dtype, static_cast<int64_t>(source.size()), [&](int64_t i) {
          return MoveValue(dtype, source[i].first, source[i].second);
        }) == "");
}

TEST_CASE("reducescatter: Sum and Average, first dimension not divisible by size",
          "[mpi][reducescatter]") {
  const Topology topo = InitAndTopology();
  const DataType dtype = GENERATE(DataType::kUint8, DataType::kInt8, DataType::kInt16,
                                  DataType::kInt32, DataType::kInt64, DataType::kFloat16,
                                  DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64);
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kAverage);
  INFO(DataTypeName(dtype) << " " << ReduceOpName(op) << " rank " << topo.rank);
  constexpr int64_t kRow = 3;

  // Rank r gets dim0/size rows, plus one for the first dim0%size ranks (Horovod's rule).
  auto rows_of = [&](int64_t dim0, int r) { return dim0 / topo.size + (r < dim0 % topo.size); };
  const std::vector<int64_t> dims0 = {2 * topo.size + 1, 1, 3 * topo.size, 0, topo.size + 2};
  std::vector<std::unique_ptr<Tensor>> inputs;
  std::vector<OpRequest> requests;
  for (int64_t dim0 : dims0) {
    auto in = std::make_unique<Tensor>(dtype, std::vector<int64_t>{dim0, kRow});
    in->Fill([&](int64_t i) { return ReduceInput(op, dtype, topo.rank, i); });
    OpRequest req = MakeRequest(
        OpType::kReducescatter,
        Name("reducescatter", dtype, std::string(ReduceOpName(op)) + ".d" + std::to_string(dim0)),
        in->view());
    req.reduce_op = op;
    requests.push_back(std::move(req));
    inputs.push_back(std::move(in));
  }
  const std::vector<OpResult> results =
      ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/6));

  for (size_t k = 0; k < dims0.size(); ++k) {
    const OpResult& r = results[k];
    INFO("dim0 " << dims0[k] << ": " << r.status.ToString());
    CHECK(r.status.ok());
    const int64_t mine = rows_of(dims0[k], topo.rank);
    int64_t first_row = 0;
    for (int q = 0; q < topo.rank; ++q) first_row += rows_of(dims0[k], q);
    CHECK(r.output_shape == std::vector<int64_t>{mine, kRow});
    CHECK(Mismatch(OutputData(r), dtype, mine * kRow, [&](int64_t i) {
            return Reduced(op, dtype, topo.size,
                           [&](int q) { return ReduceInput(op, dtype, q, first_row * kRow + i); });
          }) == "");
  }
}

TEST_CASE("barrier completes on every rank", "[mpi][barrier]") {
  const Topology topo = InitAndTopology();
  for (int k = 0; k < 2; ++k) {
    OpRequest req;
    req.type = OpType::kBarrier;
    req.name = "ops.barrier." + std::to_string(k);
    const OpResult r = RunOp(std::move(req));
    INFO(r.status.ToString());
    CHECK(r.status.ok());
  }
  CheckRuntimeStillWorks("ops.barrier.after", topo);
}

TEST_CASE("1000 small tensors submitted at once in a different order on every rank",
          "[mpi][allreduce][fusion]") {
  const Topology topo = InitAndTopology();
  constexpr int kTensors = 1000;
  auto dtype_of = [](int k) { return k % 2 == 0 ? DataType::kFloat32 : DataType::kInt32; };
  auto value = [&](int k, int r, int64_t i) { return SumValue(dtype_of(k), r, i) + k % 13; };

  std::vector<std::unique_ptr<Tensor>> tensors;
  std::vector<OpRequest> requests;
  for (int k = 0; k < kTensors; ++k) {
    auto t = std::make_unique<Tensor>(dtype_of(k), std::vector<int64_t>{k % 5 + 1});
    t->Fill([&](int64_t i) { return value(k, topo.rank, i); });
    requests.push_back(AllreduceRequest("ops.many." + std::to_string(k), *t));
    tensors.push_back(std::move(t));
  }
  const std::vector<OpResult> results =
      ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/7));
  int failed = 0;
  int wrong = 0;
  std::string first;
  for (int k = 0; k < kTensors; ++k) {
    if (!results[k].status.ok()) {
      if (failed++ == 0 && first.empty()) first = results[k].status.ToString();
      continue;
    }
    const std::string m = tensors[k]->Mismatch([&](int64_t i) {
      double s = 0;
      for (int r = 0; r < topo.size; ++r) s += value(k, r, i);
      return s;
    });
    if (!m.empty() && wrong++ == 0 && first.empty()) first = "ops.many." + std::to_string(k) + m;
  }
  INFO(first);
  CHECK(failed == 0);
  CHECK(wrong == 0);
}

TEST_CASE("tensors larger than the pipeline chunk", "[mpi][allreduce][large]") {
  const Topology topo = InitAndTopology();
  // 40 MB float32 in place (Sum), 6 MiB int64 out of place (Max), and a small neighbour.
  Tensor big(DataType::kFloat32, {10'000'000});
  Tensor mid_in(DataType::kInt64, {3, 262'144});
  Tensor mid_out(DataType::kInt64, {3, 262'144});
  Tensor small(DataType::kFloat64, {3});
  // SumValue repeats with period 14: the 10M floats go through tables, not per-element calls.
  constexpr int64_t kPeriod = 14;
  float own[kPeriod];
  float want[kPeriod];
  for (int64_t k = 0; k < kPeriod; ++k) {
    own[k] = static_cast<float>(SumValue(DataType::kFloat32, topo.rank, k));
    double s = 0;
    for (int r = 0; r < topo.size; ++r) s += SumValue(DataType::kFloat32, r, k);
    want[k] = static_cast<float>(s);  // a small integer: exact
  }
  float* big_data = static_cast<float*>(big.data());
  for (int64_t i = 0; i < big.size(); ++i) big_data[i] = own[i % kPeriod];
  mid_in.Fill([&](int64_t i) { return SumValue(DataType::kInt64, topo.rank, i); });
  small.Fill([&](int64_t i) { return SumValue(DataType::kFloat64, topo.rank, i); });
  std::vector<OpRequest> requests;
  requests.push_back(AllreduceRequest("ops.large.float32", big));
  requests.push_back(AllreduceRequest("ops.large.int64", mid_in, ReduceOp::kMax));
  requests.back().output = mid_out.view();
  requests.push_back(AllreduceRequest("ops.large.small", small));
  const std::vector<OpResult> results =
      ReleaseAll(EnqueueShuffled(std::move(requests), topo.rank, /*salt=*/8));
  for (const OpResult& r : results) {
    INFO(r.status.ToString());
    CHECK(r.status.ok());
  }
  auto sum = [&](DataType dtype, int64_t i) {
    double s = 0;
    for (int r = 0; r < topo.size; ++r) s += SumValue(dtype, r, i);
    return s;
  };
  int64_t big_wrong = 0;
  int64_t first_wrong = -1;
  for (int64_t i = 0; i < big.size(); ++i) {
    if (big_data[i] != want[i % kPeriod] && big_wrong++ == 0) first_wrong = i;
  }
  INFO("float32: " << big_wrong << " wrong elements, first at " << first_wrong);
  CHECK(big_wrong == 0);
  CHECK(mid_out.Mismatch([&](int64_t i) {
    double m = SumValue(DataType::kInt64, 0, i);
    for (int r = 1; r < topo.size; ++r) m = std::max(m, SumValue(DataType::kInt64, r, i));
    return m;
  }) == "");
  CHECK(mid_in.Mismatch([&](int64_t i) { return SumValue(DataType::kInt64, topo.rank, i); }) == "");
  CHECK(small.Mismatch([&](int64_t i) { return sum(DataType::kFloat64, i); }) == "");
}

TEST_CASE("a large tensor reduced in place is moved onto huge pages, its values intact",
          "[mpi][allreduce][large][huge_pages]") {
  const Topology topo = InitAndTopology();
  // 12 MiB of float32 three pages into an anonymous mapping of its own, not 2 MiB-aligned (as a
  // malloc'd tensor): Note [Huge pages for large tensors] in docs/fusion.md.
  constexpr size_t kBytes = size_t{12} << 20;
  void* map =
      mmap(nullptr, kBytes + 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(map != MAP_FAILED);
  float* data = reinterpret_cast<float*>(static_cast<std::byte*>(map) + 3 * 4096);
  const int64_t count = static_cast<int64_t>(kBytes / sizeof(float));
  for (int64_t i = 0; i < count; ++i) data[i] = static_cast<float>((i % 1000) + topo.rank);
  OpRequest req;
  req.type = OpType::kAllreduce;
  req.name = "ops.huge_pages";
  req.input = {data, DataType::kFloat32, {count}};
  req.reduce_op = ReduceOp::kSum;
  const OpResult r = RunOp(std::move(req));
  CHECK(r.status.ok());
  int64_t wrong = 0;
  const float ranks_sum = static_cast<float>(topo.size * (topo.size - 1) / 2);
  for (int64_t i = 0; i < count; ++i) {
    wrong += data[i] != static_cast<float>(topo.size * (i % 1000)) + ranks_sum;
  }
  CHECK(wrong == 0);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t start = runtime::HugePageCeil(begin);
  const uintptr_t end = runtime::HugePageFloor(begin + kBytes);
  if (runtime::HugePageAdvisor(true).enabled()) {
    INFO(
        "the runtime collapses the aligned 2 MiB pages of the tensor (CHORUS_HUGE_PAGES "
        "defaults to on)");
    CHECK(chorus::testing::AnonHugeBytes(start, end) >= static_cast<int64_t>(end - start));
  }
  munmap(map, kBytes + 4 * 4096);
  if (!runtime::HugePageAdvisor(true).enabled()) {
    chorus::testing::SkipCase(
        "this kernel has no MADV_COLLAPSE: the values were checked, the huge pages cannot be");
    return;
  }
}

TEST_CASE("grouped allreduce and grouped allgather", "[mpi][group]") {
  const Topology topo = InitAndTopology();
  // Group A: 5 float32 allreduces (Sum); group B: 5 int32 allreduces (Average);
  // group C: 3 float64 allgathers with a different first dimension per rank.
  const std::vector<int64_t> counts = {1, 7, 0, 100, 33};
  std::vector<std::unique_ptr<Tensor>> a, b, c;
  std::vector<OpRequest> group_a, group_b, group_c;
  for (size_t k = 0; k < counts.size(); ++k) {
    a.push_back(std::make_unique<Tensor>(DataType::kFloat32, std::vector<int64_t>{counts[k]}));
    b.push_back(std::make_unique<Tensor>(DataType::kInt32, std::vector<int64_t>{counts[k], 2}));
    a[k]->Fill([&](int64_t i) { return SumValue(DataType::kFloat32, topo.rank, i + k); });
    b[k]->Fill([&](int64_t i) { return AverageValue(DataType::kInt32, topo.rank, i + k); });
    group_a.push_back(AllreduceRequest("ops.group.a." + std::to_string(k), *a[k]));
    group_b.push_back(
        AllreduceRequest("ops.group.b." + std::to_string(k), *b[k], ReduceOp::kAverage));
  }
  auto gather_rows = [](size_t k, int r) -> int64_t { return (r + static_cast<int>(k)) % 3; };
  for (size_t k = 0; k < 3; ++k) {
    c.push_back(std::make_unique<Tensor>(DataType::kFloat64,
                                         std::vector<int64_t>{gather_rows(k, topo.rank), 4}));
    c[k]->Fill([&](int64_t i) { return MoveValue(DataType::kFloat64, topo.rank, i + k); });
    group_c.push_back(
        MakeRequest(OpType::kAllgather, "ops.group.c." + std::to_string(k), c[k]->view()));
  }

  // The groups go in in a rank-dependent order; each group's tensors keep their order.
  std::vector<std::vector<OpRequest>> groups;
  groups.push_back(std::move(group_a));
  groups.push_back(std::move(group_b));
  groups.push_back(std::move(group_c));
  std::vector<std::vector<Handle>> handles(groups.size());
  for (size_t g : RankShuffledOrder(groups.size(), topo.rank, /*salt=*/9)) {
    const size_t n = groups[g].size();
    absl::StatusOr<std::vector<Handle>> h = EnqueueGroup(std::move(groups[g]));
    INFO("group " << g << ": " << h.status().ToString());
    CHECK(h.ok());
    handles[g] = h.ok() ? *h : std::vector<Handle>(n, kNoHandle);
    CHECK(handles[g].size() == n);
  }
  std::vector<std::vector<OpResult>> results;
  for (const auto& h : handles) results.push_back(ReleaseAll(h));

  for (size_t k = 0; k < counts.size(); ++k) {
    INFO("tensor " << k << ": " << results[0][k].status.ToString() << " / "
                   << results[1][k].status.ToString());
    CHECK(results[0][k].status.ok());
    CHECK(results[1][k].status.ok());
    CHECK(a[k]->Mismatch([&](int64_t i) {
      double s = 0;
      for (int r = 0; r < topo.size; ++r) s += SumValue(DataType::kFloat32, r, i + k);
      return s;
    }) == "");
    CHECK(b[k]->Mismatch([&](int64_t i) {
      double s = 0;
      for (int r = 0; r < topo.size; ++r) s += AverageValue(DataType::kInt32, r, i + k);
      return IntegerAverage(s, topo.size);
    }) == "");
  }
  for (size_t k = 0; k < 3; ++k) {
    const OpResult& r = results[2][k];
    INFO("allgather " << k << ": " << r.status.ToString());
    CHECK(r.status.ok());
    std::vector<std::pair<int, int64_t>> source;
    for (int q = 0; q < topo.size; ++q) {
      for (int64_t i = 0; i < gather_rows(k, q) * 4; ++i) source.emplace_back(q, i + k);
    }
    CHECK(r.output_shape == std::vector<int64_t>{static_cast<int64_t>(source.size()) / 4, 4});
    CHECK(Mismatch(OutputData(r), DataType::kFloat64, static_cast<int64_t>(source.size()),
                   [&](int64_t i) {
                     return MoveValue(DataType::kFloat64, source[i].first, source[i].second);
                   }) == "");
  }
}

// What a DoneCallback saw; written on the background thread, read after Wait returns.
struct CallbackRecord {
  std::atomic<int> calls{0};
  absl::Status status;
  std::vector<int64_t> output_shape;
  std::shared_ptr<OutputBuffer> output;
  double first_value = 0;
};

TEST_CASE("callbacks run once, before Wait returns, with the op's status", "[mpi][callback]") {
  const Topology topo = InitAndTopology();
  Tensor t(DataType::kInt32, {4});
  t.Fill([&](int64_t i) { return SumValue(DataType::kInt32, topo.rank, i); });
  Tensor g(DataType::kInt16, {topo.rank + 1, 2});
  g.Fill([&](int64_t i) { return MoveValue(DataType::kInt16, topo.rank, i); });
  auto reduce_record = std::make_shared<CallbackRecord>();
  auto gather_record = std::make_shared<CallbackRecord>();

  auto reduce_done = [rec = reduce_record,
                      data = static_cast<const int32_t*>(t.data())](const OpResult& r) {
    rec->status = r.status;
    rec->first_value = data[0];  // the op is complete: the in-place result is final
    rec->calls.fetch_add(1, std::memory_order_release);
  };
  auto gather_done = [rec = gather_record](const OpResult& r) {
    rec->status = r.status;
    rec->output_shape = r.output_shape;
    rec->output = r.output;
    rec->calls.fetch_add(1, std::memory_order_release);
  };
  std::vector<Handle> handles(2, kNoHandle);
  for (size_t k : RankShuffledOrder(2, topo.rank, /*salt=*/10)) {
    absl::StatusOr<Handle> h =
        k == 0 ? Enqueue(AllreduceRequest("ops.callback.allreduce", t), reduce_done)
               : Enqueue(MakeRequest(OpType::kAllgather, "ops.callback.allgather", g.view()),
                         gather_done);
    INFO(h.status().ToString());
    CHECK(h.ok());
    if (h.ok()) handles[k] = *h;
  }

  for (size_t k = 0; k < handles.size(); ++k) {
    if (handles[k] == kNoHandle) continue;
    const absl::Status waited = Wait(handles[k]);
    const CallbackRecord& rec = k == 0 ? *reduce_record : *gather_record;
    INFO("op " << k << ": " << waited.ToString());
    CHECK(waited.ok());
    CHECK(rec.calls.load(std::memory_order_acquire) == 1);
    CHECK(rec.status == waited);
    absl::StatusOr<bool> done = Poll(handles[k]);
    CHECK(done.ok());
    CHECK((done.ok() && *done));
    CHECK(Wait(handles[k]) == waited);  // the handle stays valid after Wait

    absl::StatusOr<OpResult> released = Release(handles[k]);
    CHECK(released.ok());
    if (released.ok()) {
      CHECK(released->status == waited);
      if (k == 1) {
        CHECK(released->output_shape == rec.output_shape);
        CHECK(released->output == rec.output);
      }
    }
    CHECK(rec.calls.load(std::memory_order_acquire) == 1);
    CHECK(Poll(handles[k]).status().code() == absl::StatusCode::kNotFound);
  }

  int32_t want0 = 0;
  for (int r = 0; r < topo.size; ++r)
    want0 += static_cast<int32_t>(SumValue(DataType::kInt32, r, 0));
  CHECK(reduce_record->first_value == want0);
  int64_t rows = 0;
  for (int r = 0; r < topo.size; ++r) rows += r + 1;
  CHECK(gather_record->output_shape == std::vector<int64_t>{rows, 2});
  std::vector<std::pair<int, int64_t>> source;
  for (int q = 0; q < topo.size; ++q) {
    for (int64_t i = 0; i < (q + 1) * 2; ++i) source.emplace_back(q, i);
  }
  const void* out = gather_record->output && !gather_record->output->empty()
                        ? gather_record->output->data()
                        : nullptr;
  CHECK(Mismatch(out, DataType::kInt16, static_cast<int64_t>(source.size()), [&](int64_t i) {
          return MoveValue(DataType::kInt16, source[i].first, source[i].second);
        }) == "");
}

}  // namespace
}  // namespace chorus::mpitest
