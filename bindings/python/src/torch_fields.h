// File: bindings/python/src/torch_fields.h
//
// The fields of a torch tensor that chorus.torch's fast path needs (torch_fast_path.cc), read in
// C++ by the optional extension chorus.torch._fields (torch_fields.cc, built where torch's
// headers are installed: Debian's libtorch-dev) instead of through five Python calls on the
// tensor (dtype, is_cpu, is_contiguous(), data_ptr(), shape: about 150 ns of a 0.5-1 us
// submission). chorus._C itself does not link torch: _fields hands it the reader as a capsule
// (kTorchFieldsCapsule) through setup_torch_fast_path, and without _fields the fast path reads
// the fields through Python as before.
//
// Thread-safety: the reader runs with the GIL held, like the rest of the fast path.
#ifndef CHORUS_BINDINGS_PYTHON_SRC_TORCH_FIELDS_H_
#define CHORUS_BINDINGS_PYTHON_SRC_TORCH_FIELDS_H_

#include <Python.h>

#include <cstdint>

namespace chorus_python {

struct TorchFields {
  void* data;
  int32_t dtype;  // a chorus::DataType value
  int32_t ndim;
  const int64_t*
      sizes;  // ndim entries, the tensor's own: valid while it is neither freed nor resized
};

// True when `tensor` (a torch.Tensor or subclass instance) is a strided, contiguous CPU tensor
// of a dtype chorus supports, with *out filled; false otherwise (the general path decides, and
// raises where it must). Never raises.
using ReadTorchFields = bool (*)(PyObject* tensor, TorchFields* out);

inline constexpr char kTorchFieldsCapsule[] = "chorus.torch._fields.read";

}  // namespace chorus_python

#endif  // CHORUS_BINDINGS_PYTHON_SRC_TORCH_FIELDS_H_
