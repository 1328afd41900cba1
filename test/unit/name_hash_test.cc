// The tensor-name hash of the per-op tables (runtime/submit/name_hash.h).
#include "runtime/submit/name_hash.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include <catch2/catch.hpp>

namespace chorus::runtime {
namespace {

TEST_CASE("HashName is XXH3-64", "[name_hash]") {
  // XXH3_64bits of the empty input with seed 0 (xxhash's own test vector).
  CHECK(HashName("") == 0x2D06800538D394C2ULL);
  CHECK(HashName("a") != HashName("b"));
  CHECK(HashName("allreduce.grad.0") == HashName(std::string("allreduce.grad.0")));
}

TEST_CASE("name tables are looked up across std::string and views", "[name_hash]") {
  NameMap<std::string, int> map;
  absl::flat_hash_set<size_t> hashes;
  for (int i = 0; i < 20000; ++i) {
    const std::string name = absl::StrCat("allreduce.model.layer", i, ".weight");
    map[name] = i;
    hashes.insert(HashName(name));
  }
  CHECK(hashes.size() == 20000);  // no 64-bit collision among similar names
  absl::string_view view = "allreduce.model.layer1234.weight";
  REQUIRE(map.find(view) != map.end());
  CHECK(map.find(view)->second == 1234);
  CHECK(map.find(absl::string_view("allreduce.model.layer1234.bias")) == map.end());
  NameSet<absl::string_view> views;  // the in-flight table's kind: views, found by strings
  views.insert(view);
  CHECK(views.contains(std::string(view)));
  CHECK_FALSE(views.contains(std::string("allreduce.model.layer1234.bias")));
}

}  // namespace
}  // namespace chorus::runtime
