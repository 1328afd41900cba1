#include "runtime/submit/entry_pool.h"

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/submit/tensor_entry.h"

namespace chorus::runtime {
namespace {

// An entry with every member away from its default.
std::unique_ptr<TensorEntry> UsedEntry(EntryPool& pool) {
  std::unique_ptr<TensorEntry> e = pool.Take();
  static float data[4];
  e->op.type = OpType::kAlltoall;
  e->op.name = "a.rather.long.tensor.name.beyond.the.small.string.buffer";
  e->op.input = {data, DataType::kInt64, {4, 5, 6}, 0};
  e->op.output = {data + 1, DataType::kUint8, {2}, 1};
  e->op.reduce_op = ReduceOp::kMax;
  e->op.prescale_factor = 2.0;
  e->op.postscale_factor = 3.0;
  e->op.root_rank = 1;
  e->op.process_set_id = 4;
  e->op.splits = {1, 3};
  e->op.process_set_ranks = {0, 2};
  e->op.stream = &e;
  e->op.wire_dtype = DataType::kFloat16;
  Request& q = e->request;
  q.request_rank = 3;
  q.type = OpType::kAlltoall;
  q.name = e->op.name;
  q.dtype = DataType::kInt64;
  q.shape = {4, 5, 6, 7, 8, 9, 10};
  q.reduce_op = ReduceOp::kMax;
  q.prescale_factor = 2.0;
  q.postscale_factor = 3.0;
  q.root_rank = 1;
  q.device = 0;
  q.process_set_id = 4;
  q.group_key = "group#2";
  q.group_size = 2;
  q.splits = {1, 3};
  q.process_set_ranks = {0, 2};
  q.wire_dtype = 5;
  e->handle = 42;
  e->done = [](const OpResult&) {};
  e->enqueued_at = absl::Now();
  e->ready_event = &e;
  e->cache_bit = 7;
  e->in_unsent = true;
  e->ready_at = absl::Now();
  return e;
}

void CheckFreshView(const TensorView& v, const TensorView& fresh) {
  CHECK(v.data == fresh.data);
  CHECK(v.dtype == fresh.dtype);
  CHECK(v.shape.empty());
  CHECK(v.device == fresh.device);
}

void CheckFresh(const TensorEntry& e) {
  const TensorEntry fresh;
  const OpRequest& op = e.op;
  CHECK(op.type == fresh.op.type);
  CHECK(op.name.empty());
  CheckFreshView(op.input, fresh.op.input);
  CheckFreshView(op.output, fresh.op.output);
  CHECK(op.reduce_op == fresh.op.reduce_op);
  CHECK(op.prescale_factor == fresh.op.prescale_factor);
  CHECK(op.postscale_factor == fresh.op.postscale_factor);
  CHECK(op.root_rank == fresh.op.root_rank);
  CHECK(op.process_set_id == fresh.op.process_set_id);
  CHECK(op.splits.empty());
  CHECK(op.process_set_ranks.empty());
  CHECK(op.stream == nullptr);
  CHECK(!op.wire_dtype.has_value());
  CHECK(e.request == fresh.request);
  CHECK(e.handle == 0);
  CHECK(!e.done);
  CHECK(e.enqueued_at == fresh.enqueued_at);
  CHECK(e.ready_event == nullptr);
  CHECK(e.cache_bit == -1);
  CHECK(!e.in_unsent);
  CHECK(e.ready_at == fresh.ready_at);
}

TEST_CASE("EntryPool: a retired entry comes back as a fresh one that keeps its buffers") {
  EntryPool pool;
  std::unique_ptr<TensorEntry> used = UsedEntry(pool);
  const TensorEntry* address = used.get();
  const size_t name_capacity = used->request.name.capacity();
  const size_t shape_capacity = used->request.shape.capacity();
  const size_t op_name_capacity = used->op.name.capacity();
  const size_t op_shape_capacity = used->op.input.shape.capacity();
  std::vector<std::unique_ptr<TensorEntry>> retired;
  retired.push_back(std::move(used));
  pool.Retire(&retired);
  CHECK(retired.empty());
  CHECK(pool.size() == 1);

  std::unique_ptr<TensorEntry> again = pool.Take();
  CHECK(again.get() == address);
  CHECK(pool.size() == 0);
  CheckFresh(*again);
  CHECK(again->request.name.capacity() == name_capacity);
  CHECK(again->request.shape.capacity() == shape_capacity);
  CHECK(again->op.name.capacity() == op_name_capacity);
  CHECK(again->op.input.shape.capacity() == op_shape_capacity);
}

TEST_CASE("EntryPool: an empty pool makes new entries; a full one frees what does not fit") {
  EntryPool pool(/*capacity=*/2);
  std::unique_ptr<TensorEntry> fresh = pool.Take();
  CheckFresh(*fresh);
  std::vector<std::unique_ptr<TensorEntry>> retired;
  for (int i = 0; i < 5; ++i) retired.push_back(UsedEntry(pool));
  pool.Retire(&retired);
  CHECK(retired.empty());
  CHECK(pool.size() == 2);
  CheckFresh(*pool.Take());
  CheckFresh(*pool.Take());
  CHECK(pool.size() == 0);
  CheckFresh(*pool.Take());
}

}  // namespace
}  // namespace chorus::runtime
