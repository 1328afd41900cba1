#include "runtime/entry_pool.h"

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/tensor_entry.h"

namespace chorus::runtime {
namespace {

// An entry with every member away from its default.
std::unique_ptr<TensorEntry> UsedEntry(EntryPool& pool) {
  std::unique_ptr<TensorEntry> e = pool.Take();
  e->op.type = OpType::kAlltoall;
  e->op.name = "a.rather.long.tensor.name.beyond.the.small.string.buffer";
  e->op.input.shape = {4, 5, 6};
  e->op.splits = {1, 3};
  e->op.stream = &e;
  e->request.name = e->op.name;
  e->request.shape = {4, 5, 6, 7, 8, 9, 10};
  e->request.type = OpType::kAlltoall;
  e->request.group_key = "group#2";
  e->request.splits = {1, 3};
  e->request.wire_dtype = 5;
  e->handle = 42;
  e->done = [](const OpResult&) {};
  e->enqueued_at = absl::Now();
  e->ready_event = &e;
  e->cache_bit = 7;
  e->in_unsent = true;
  e->ready_at = absl::Now();
  return e;
}

void CheckFresh(const TensorEntry& e) {
  const TensorEntry fresh;
  CHECK(e.op.type == fresh.op.type);
  CHECK(e.op.name.empty());
  CHECK(e.op.input.shape.empty());
  CHECK(e.op.splits.empty());
  CHECK(e.op.stream == nullptr);
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
