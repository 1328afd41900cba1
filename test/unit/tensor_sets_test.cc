#include "bench/tensor_sets.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>

namespace chorus::bench {
namespace {

using Shape = std::vector<int64_t>;

std::vector<TensorSpec> MustGet(const std::string& name) {
  absl::StatusOr<std::vector<TensorSpec>> set = GetTensorSet(name);
  REQUIRE(set.ok());
  return *std::move(set);
}

TEST_CASE("resnet50 matches torchvision's parameter list", "[tensor_sets]") {
  const std::vector<TensorSpec> set = MustGet("resnet50");
  REQUIRE(set.size() == 161);
  CHECK(TotalElements(set) == 25'557'032);

  // Checked against torchvision.models.resnet50().named_parameters().
  CHECK(set[0].name == "resnet50.conv1.weight");
  CHECK(set[0].shape == Shape{64, 3, 7, 7});
  CHECK(set[2].name == "resnet50.bn1.bias");
  CHECK(set[3].name == "resnet50.layer1.0.conv1.weight");
  CHECK(set[3].shape == Shape{64, 64, 1, 1});
  CHECK(set[6].name == "resnet50.layer1.0.conv2.weight");
  CHECK(set[6].shape == Shape{64, 64, 3, 3});
  CHECK(set[9].name == "resnet50.layer1.0.conv3.weight");
  CHECK(set[9].shape == Shape{256, 64, 1, 1});
  CHECK(set[12].name == "resnet50.layer1.0.downsample.0.weight");
  CHECK(set[12].shape == Shape{256, 64, 1, 1});
  CHECK(set[14].name == "resnet50.layer1.0.downsample.1.bias");
  CHECK(set[15].name == "resnet50.layer1.1.conv1.weight");
  CHECK(set[15].shape == Shape{64, 256, 1, 1});
  CHECK(set[159].name == "resnet50.fc.weight");
  CHECK(set[159].shape == Shape{1000, 2048});
  CHECK(set[160].name == "resnet50.fc.bias");
  CHECK(set[160].shape == Shape{1000});

  int downsamples = 0;
  for (const TensorSpec& t : set) {
    if (t.name.find("downsample.0.weight") != std::string::npos) ++downsamples;
  }
  CHECK(downsamples == 4);
}

TEST_CASE("bert-base matches BERT-base uncased", "[tensor_sets]") {
  const std::vector<TensorSpec> set = MustGet("bert-base");
  // 5 embedding tensors, 16 per encoder layer, 2 for the pooler.
  REQUIRE(set.size() == 5 + 12 * 16 + 2);
  CHECK(TotalElements(set) == 109'482'240);
  CHECK(set[0].name == "bert-base.embeddings.word_embeddings.weight");
  CHECK(set[0].shape == Shape{30522, 768});
  CHECK(set[1].shape == Shape{512, 768});
  CHECK(set[2].shape == Shape{2, 768});
  CHECK(set[5].name == "bert-base.encoder.layer.0.attention.self.query.weight");
  CHECK(set[15].name == "bert-base.encoder.layer.0.intermediate.dense.weight");
  CHECK(set[15].shape == Shape{3072, 768});
  CHECK(set[17].name == "bert-base.encoder.layer.0.output.dense.weight");
  CHECK(set[17].shape == Shape{768, 3072});
  CHECK(set[20].name == "bert-base.encoder.layer.0.output.LayerNorm.bias");
  CHECK(set[197].name == "bert-base.pooler.dense.weight");
  CHECK(set[198].name == "bert-base.pooler.dense.bias");
}

TEST_CASE("tiny1000 is 1000 tensors of 1 KiB", "[tensor_sets]") {
  const std::vector<TensorSpec> set = MustGet("tiny1000");
  REQUIRE(set.size() == 1000);
  CHECK(TotalElements(set) == 256'000);
  for (const TensorSpec& t : set) CHECK(t.shape == Shape{256});
  CHECK(set[999].name == "tiny1000.t999");
}

TEST_CASE("every set has unique, prefixed names", "[tensor_sets]") {
  const std::string name = GENERATE(from_range(TensorSetNames()));
  const std::vector<TensorSpec> set = MustGet(name);
  std::set<std::string> names;
  for (const TensorSpec& t : set) {
    CHECK(t.name.rfind(name + ".", 0) == 0);
    CHECK(t.num_elements() > 0);
    names.insert(t.name);
  }
  CHECK(names.size() == set.size());
}

TEST_CASE("an unknown set is InvalidArgument", "[tensor_sets]") {
  const std::string name = GENERATE(as<std::string>{}, "", "resnet", "ResNet50", "bert");
  absl::StatusOr<std::vector<TensorSpec>> set = GetTensorSet(name);
  CHECK(set.status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chorus::bench
