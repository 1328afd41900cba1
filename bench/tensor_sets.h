// File: bench/tensor_sets.h
//
// Named lists of parameter tensors of real models, used to drive chorus with the gradient
// traffic of one training step (chorus_bench steps) and by tests that want realistic sizes.
//
//   absl::StatusOr<std::vector<TensorSpec>> set = chorus::bench::GetTensorSet("resnet50");
//   for (const TensorSpec& t : *set) { ... t.name, t.shape, t.num_elements() ... }
//
// Sets (all float32 parameters, listed in definition = forward order; backward produces the
// gradients in reverse order):
//   "resnet50"  torchvision's ResNet-50: 161 tensors, 25,557,032 elements.
//   "bert-base" BERT-base uncased (HuggingFace BertModel, with pooler): 199 tensors,
//               109,482,240 elements.
//   "tiny1000"  1000 tensors of 256 elements (1 KiB each).
// Names carry the set as prefix: "resnet50.layer1.0.conv1.weight".
//
// Thread-safety: thread-safe (pure functions).
#ifndef CHORUS_BENCH_TENSOR_SETS_H_
#define CHORUS_BENCH_TENSOR_SETS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chorus::bench {

// One parameter tensor: its name and row-major shape (PyTorch's [out, in, ...] convention).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;

  int64_t num_elements() const;
};

// The tensors of the set called `name`, in definition order.
// Errors: InvalidArgument for a name not in TensorSetNames().
absl::StatusOr<std::vector<TensorSpec>> GetTensorSet(absl::string_view name);

// The names GetTensorSet accepts, in a fixed order.
std::vector<std::string> TensorSetNames();

// Sum of num_elements() over `tensors`.
int64_t TotalElements(const std::vector<TensorSpec>& tensors);

}  // namespace chorus::bench

#endif  // CHORUS_BENCH_TENSOR_SETS_H_
