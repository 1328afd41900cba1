#include "runtime/negotiate/response_cache.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/message.h"

namespace chorus::runtime {
namespace {

Request Req(const std::string& name, int32_t rank = 0) {
  Request r;
  r.request_rank = rank;
  r.name = name;
  r.shape = {4, 4};
  return r;
}

Response Resp(const std::string& name) {
  Response r;
  r.names = {name};
  r.shapes = {{4, 4}};
  return r;
}

using State = ResponseCache::State;

TEST_CASE("Capacity 0 disables the cache", "[response_cache]") {
  ResponseCache cache(0);
  const Request req = Req("a");
  CHECK(cache.Put(Resp("a"), &req) == -1);
  CHECK(cache.size() == 0);
  CHECK(cache.capacity() == 0);
  CHECK(cache.Find(req).state == State::kMiss);
  CHECK_FALSE(cache.Contains(0));
}

TEST_CASE("Miss, hit and invalid", "[response_cache]") {
  ResponseCache cache(8);
  const Request a = Req("a");
  CHECK(cache.Find(a).state == State::kMiss);
  CHECK(cache.Find(a).bit == -1);
  CHECK(cache.Put(Resp("a"), &a) == 0);
  const Request b = Req("b");
  CHECK(cache.Put(Resp("b"), &b) == 1);
  CHECK(cache.size() == 2);

  ResponseCache::Lookup hit = cache.Find(a);
  CHECK(hit.state == State::kHit);
  CHECK(hit.bit == 0);
  CHECK(cache.Get(0).names == std::vector<std::string>{"a"});
  CHECK(cache.Get(1).names == std::vector<std::string>{"b"});
  // request_rank is not part of the signature.
  CHECK(cache.Find(Req("b", 5)).state == State::kHit);

  Request changed = Req("a");
  changed.shape = {4, 5};
  ResponseCache::Lookup invalid = cache.Find(changed);
  CHECK(invalid.state == State::kInvalid);
  CHECK(invalid.bit == 0);
  changed = Req("a");
  changed.dtype = DataType::kFloat64;
  CHECK(cache.Find(changed).state == State::kInvalid);

  // An entry put without a local request never hits here.
  CHECK(cache.Put(Resp("c"), nullptr) == 2);
  ResponseCache::Lookup foreign = cache.Find(Req("c"));
  CHECK(foreign.state == State::kInvalid);
  CHECK(foreign.bit == 2);
  CHECK(cache.Find(Req("zzz")).state == State::kMiss);
}

TEST_CASE("Put with an existing name keeps its bit and replaces the entry", "[response_cache]") {
  ResponseCache cache(4);
  const Request a = Req("a");
  const Request b = Req("b");
  cache.Put(Resp("a"), &a);
  cache.Put(Resp("b"), &b);
  Request a2 = Req("a");
  a2.shape = {8};
  Response r2 = Resp("a");
  r2.shapes = {{8}};
  CHECK(cache.Put(r2, &a2) == 0);
  CHECK(cache.size() == 2);
  CHECK(cache.Get(0).shapes == std::vector<std::vector<int64_t>>{{8}});
  CHECK(cache.Find(a2).state == State::kHit);
  CHECK(cache.Find(a).state == State::kInvalid);
}

TEST_CASE("Eviction takes the least recently used entry; erased bits are reused lowest first",
          "[response_cache]") {
  ResponseCache cache(3);
  std::vector<Request> reqs;
  for (const char* n : {"a", "b", "c", "d", "e", "f", "g"}) reqs.push_back(Req(n));
  CHECK(cache.Put(Resp("a"), &reqs[0]) == 0);
  CHECK(cache.Put(Resp("b"), &reqs[1]) == 1);
  CHECK(cache.Put(Resp("c"), &reqs[2]) == 2);
  cache.Touch(0);  // a is now the most recent; b the least
  CHECK(cache.Put(Resp("d"), &reqs[3]) == 1);
  CHECK(cache.Find(reqs[1]).state == State::kMiss);
  CHECK(cache.Find(reqs[3]).bit == 1);
  CHECK(cache.size() == 3);
  // LRU order now: c (oldest), a, d.
  CHECK(cache.Put(Resp("e"), &reqs[4]) == 2);
  CHECK(cache.Find(reqs[2]).state == State::kMiss);
  // Re-putting a refreshes it: LRU order d, e, a.
  cache.Put(Resp("a"), &reqs[0]);
  CHECK(cache.Put(Resp("f"), &reqs[5]) == 1);  // evicts d
  CHECK(cache.Find(reqs[3]).state == State::kMiss);

  cache.Erase(2);  // e
  cache.Erase(0);  // a
  cache.Erase(0);  // no-op
  CHECK_FALSE(cache.Contains(0));
  CHECK_FALSE(cache.Contains(2));
  CHECK(cache.Contains(1));
  CHECK(cache.size() == 1);
  CHECK(cache.Put(Resp("g"), &reqs[6]) == 0);
  CHECK(cache.Put(Resp("a"), &reqs[0]) == 2);
  CHECK(cache.size() == 3);
  cache.Touch(7);  // absent: no-op

  cache.Clear();
  CHECK(cache.size() == 0);
  CHECK_FALSE(cache.Contains(1));
  CHECK(cache.Find(reqs[5]).state == State::kMiss);
  CHECK(cache.Put(Resp("f"), &reqs[5]) == 0);
}

TEST_CASE("Two caches fed the same calls agree on every bit", "[response_cache]") {
  const uint32_t seed = GENERATE(7u, 11u, 13u);
  const int32_t capacity = GENERATE(1, 5, 16);
  ResponseCache mine(capacity), theirs(capacity);
  std::mt19937 rng(seed);
  for (int step = 0; step < 500; ++step) {
    const std::string name = "t" + std::to_string(rng() % 24);
    switch (rng() % 4) {
      case 0:
      case 1: {
        // This rank holds the tensor; the other rank may not (null local).
        const Request local = Req(name, 0);
        const Request other = Req(name, 1);
        const int32_t b1 = mine.Put(Resp(name), &local);
        const int32_t b2 = theirs.Put(Resp(name), rng() % 2 ? &other : nullptr);
        REQUIRE(b1 == b2);
        REQUIRE(b1 >= 0);
        REQUIRE(b1 < capacity);
        break;
      }
      case 2: {
        const int32_t bit = static_cast<int32_t>(rng() % static_cast<uint32_t>(capacity));
        mine.Touch(bit);
        theirs.Touch(bit);
        break;
      }
      default: {
        const int32_t bit = static_cast<int32_t>(rng() % static_cast<uint32_t>(capacity));
        mine.Erase(bit);
        theirs.Erase(bit);
        break;
      }
    }
    REQUIRE(mine.size() == theirs.size());
    REQUIRE(mine.size() <= capacity);
    for (int32_t bit = 0; bit < capacity; ++bit) {
      REQUIRE(mine.Contains(bit) == theirs.Contains(bit));
      if (mine.Contains(bit)) REQUIRE(mine.Get(bit).names == theirs.Get(bit).names);
    }
  }
}

}  // namespace
}  // namespace chorus::runtime
