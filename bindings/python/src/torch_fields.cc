// chorus.torch._fields: reads a torch tensor's fields in C++ for chorus.torch's fast path
// (torch_fields.h says why). Its attribute `read` is the capsule of ReadFields; `dtype_code`
// (for the tests) gives the chorus dtype ReadFields reads of a tensor, or None.
#include "torch_fields.h"

#include <torch/csrc/autograd/python_variable.h>

#include <utility>

#include "chorus/types.h"

namespace chorus_python {
namespace {

// torch's scalar types and chorus's dtypes: the same pairs as chorus.torch's _DTYPES (chorus's
// dtype names are torch's).
constexpr std::pair<c10::ScalarType, chorus::DataType> kDtypes[] = {
    {c10::ScalarType::Byte, chorus::DataType::kUint8},
    {c10::ScalarType::Char, chorus::DataType::kInt8},
    {c10::ScalarType::Short, chorus::DataType::kInt16},
    {c10::ScalarType::Int, chorus::DataType::kInt32},
    {c10::ScalarType::Long, chorus::DataType::kInt64},
    {c10::ScalarType::Half, chorus::DataType::kFloat16},
    {c10::ScalarType::BFloat16, chorus::DataType::kBfloat16},
    {c10::ScalarType::Float, chorus::DataType::kFloat32},
    {c10::ScalarType::Double, chorus::DataType::kFloat64},
    {c10::ScalarType::Bool, chorus::DataType::kBool},
};

// The chorus dtype of a torch scalar type, or -1.
int32_t DtypeCode(c10::ScalarType type) {
  for (const auto& [torch_type, chorus_type] : kDtypes) {
    if (torch_type == type) return static_cast<int32_t>(chorus_type);
  }
  return -1;
}

bool ReadFields(PyObject* tensor, TorchFields* out) {
  if (!THPVariable_Check(tensor)) return false;
  const at::Tensor& t = THPVariable_Unpack(tensor);
  if (!t.defined() || t.layout() != c10::kStrided || !t.is_cpu() || !t.is_contiguous()) {
    return false;
  }
  const int32_t dtype = DtypeCode(t.scalar_type());
  if (dtype < 0) return false;
  out->data = t.data_ptr();
  out->dtype = dtype;
  out->ndim = static_cast<int32_t>(t.dim());
  out->sizes = t.sizes().data();
  return true;
}

PyObject* DtypeCodeOf(PyObject*, PyObject* tensor) {
  TorchFields fields;
  if (!ReadFields(tensor, &fields)) Py_RETURN_NONE;
  return PyLong_FromLong(fields.dtype);
}

PyMethodDef kMethods[] = {
    {"dtype_code", DtypeCodeOf, METH_O,
     "dtype_code(tensor): the chorus dtype the fast path reads of tensor, or None"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "_fields",
                       "Reads torch tensors' fields for chorus.torch's fast path.",
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace
}  // namespace chorus_python

PyMODINIT_FUNC PyInit__fields() {
  PyObject* module = PyModule_Create(&chorus_python::kModule);
  if (module == nullptr) return nullptr;
  PyObject* read = PyCapsule_New(reinterpret_cast<void*>(&chorus_python::ReadFields),
                                 chorus_python::kTorchFieldsCapsule, nullptr);
  if (read == nullptr || PyModule_AddObject(module, "read", read) != 0) {
    Py_XDECREF(read);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
