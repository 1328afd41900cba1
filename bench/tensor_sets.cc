#include "bench/tensor_sets.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace chorus::bench {
namespace {

// Appends tensors named "<prefix><suffix>" to a list.
class SetBuilder {
 public:
  explicit SetBuilder(std::string prefix) : prefix_(std::move(prefix)) {}

  void Add(absl::string_view suffix, std::vector<int64_t> shape) {
    tensors_.push_back(TensorSpec{absl::StrCat(prefix_, suffix), std::move(shape)});
  }
  // Weight [out, in, k, k] of a bias-free convolution.
  void Conv(absl::string_view module, int64_t out, int64_t in, int64_t kernel) {
    Add(absl::StrCat(module, ".weight"), {out, in, kernel, kernel});
  }
  // Affine weight and bias of a BatchNorm or LayerNorm over `features`.
  void Norm(absl::string_view module, int64_t features) {
    Add(absl::StrCat(module, ".weight"), {features});
    Add(absl::StrCat(module, ".bias"), {features});
  }
  // nn.Linear(in, out): weight [out, in] and bias [out].
  void Linear(absl::string_view module, int64_t in, int64_t out) {
    Add(absl::StrCat(module, ".weight"), {out, in});
    Add(absl::StrCat(module, ".bias"), {out});
  }

  std::vector<TensorSpec> Take() { return std::move(tensors_); }

 private:
  std::string prefix_;
  std::vector<TensorSpec> tensors_;
};

// torchvision.models.resnet50(): Bottleneck blocks [3, 4, 6, 3], expansion 4, a 1x1
// downsample conv + BatchNorm in the first block of every layer, parameters in the order
// nn.Module.named_parameters() yields them.
std::vector<TensorSpec> ResNet50() {
  constexpr int64_t kExpansion = 4;
  constexpr int kBlocks[4] = {3, 4, 6, 3};
  SetBuilder b("resnet50.");
  b.Conv("conv1", 64, 3, 7);
  b.Norm("bn1", 64);
  int64_t in_planes = 64;
  for (int layer = 0; layer < 4; ++layer) {
    const int64_t width = int64_t{64} << layer;
    const int64_t out_planes = width * kExpansion;
    for (int block = 0; block < kBlocks[layer]; ++block) {
      const std::string m = absl::StrCat("layer", layer + 1, ".", block, ".");
      b.Conv(m + "conv1", width, in_planes, 1);
      b.Norm(m + "bn1", width);
      b.Conv(m + "conv2", width, width, 3);
      b.Norm(m + "bn2", width);
      b.Conv(m + "conv3", out_planes, width, 1);
      b.Norm(m + "bn3", out_planes);
      if (block == 0) {
        b.Conv(m + "downsample.0", out_planes, in_planes, 1);
        b.Norm(m + "downsample.1", out_planes);
      }
      in_planes = out_planes;
    }
  }
  b.Linear("fc", in_planes, 1000);
  return b.Take();
}

// HuggingFace BertModel for bert-base-uncased: vocabulary 30522, hidden 768, 12 layers,
// intermediate 3072, 512 positions, 2 token types, pooler included.
std::vector<TensorSpec> BertBase() {
  constexpr int64_t kVocab = 30522;
  constexpr int64_t kHidden = 768;
  constexpr int64_t kIntermediate = 3072;
  constexpr int64_t kPositions = 512;
  constexpr int64_t kTokenTypes = 2;
  constexpr int kLayers = 12;
  SetBuilder b("bert-base.");
  b.Add("embeddings.word_embeddings.weight", {kVocab, kHidden});
  b.Add("embeddings.position_embeddings.weight", {kPositions, kHidden});
  b.Add("embeddings.token_type_embeddings.weight", {kTokenTypes, kHidden});
  b.Norm("embeddings.LayerNorm", kHidden);
  for (int layer = 0; layer < kLayers; ++layer) {
    const std::string m = absl::StrCat("encoder.layer.", layer, ".");
    b.Linear(m + "attention.self.query", kHidden, kHidden);
    b.Linear(m + "attention.self.key", kHidden, kHidden);
    b.Linear(m + "attention.self.value", kHidden, kHidden);
    b.Linear(m + "attention.output.dense", kHidden, kHidden);
    b.Norm(m + "attention.output.LayerNorm", kHidden);
    b.Linear(m + "intermediate.dense", kHidden, kIntermediate);
    b.Linear(m + "output.dense", kIntermediate, kHidden);
    b.Norm(m + "output.LayerNorm", kHidden);
  }
  b.Linear("pooler.dense", kHidden, kHidden);
  return b.Take();
}

std::vector<TensorSpec> Tiny1000() {
  SetBuilder b("tiny1000.");
  for (int i = 0; i < 1000; ++i) b.Add(absl::StrCat("t", i), {256});
  return b.Take();
}

}  // namespace

int64_t TensorSpec::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<std::string> TensorSetNames() { return {"resnet50", "bert-base", "tiny1000"}; }

absl::StatusOr<std::vector<TensorSpec>> GetTensorSet(absl::string_view name) {
  if (name == "resnet50") return ResNet50();
  if (name == "bert-base") return BertBase();
  if (name == "tiny1000") return Tiny1000();
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown tensor set \"", name, "\"; known: ", absl::StrJoin(TensorSetNames(), ", ")));
}

int64_t TotalElements(const std::vector<TensorSpec>& tensors) {
  int64_t total = 0;
  for (const TensorSpec& t : tensors) total += t.num_elements();
  return total;
}

}  // namespace chorus::bench
