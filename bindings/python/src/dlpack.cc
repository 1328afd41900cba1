// DLPack interop for chorus._C: framework arrays in (tensor_from_dlpack) and runtime-allocated
// op outputs out (result_to_dlpack), both without copying.
//
// Errors raise ValueError (TypeError for a non-capsule argument). Every function runs with the
// GIL held. The deleters this file installs (on result_to_dlpack's tensors) do not need the GIL
// and may run on any thread; the producer deleters it calls (DlpackTensor) run with the GIL.
#include "dlpack.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chorus/c_api.h"

namespace py = pybind11;

namespace chorus_python {
namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";
constexpr int kNumDataTypes = 10;  // chorus::DataType values 0..9 (chorus/types.h)

PyObject* g_result_type = nullptr;  // chorus._C.Result; set once by RegisterDlpack

// chorus::DataType value -> DLPack dtype; index = value.
constexpr DLDataType kDlTypes[kNumDataTypes] = {
    {kDLUInt, 8, 1},     // uint8
    {kDLInt, 8, 1},      // int8
    {kDLInt, 16, 1},     // int16
    {kDLInt, 32, 1},     // int32
    {kDLInt, 64, 1},     // int64
    {kDLFloat, 16, 1},   // float16
    {kDLBfloat, 16, 1},  // bfloat16
    {kDLFloat, 32, 1},   // float32
    {kDLFloat, 64, 1},   // float64
    {kDLBool, 8, 1},     // bool
};

std::string DlTypeName(DLDataType t) {
  static const char* const kCodes[] = {"int",    "uint",    "float", "handle",
                                       "bfloat", "complex", "bool"};
  std::string name = t.code < 7 ? kCodes[t.code] : "code" + std::to_string(t.code) + "_";
  name += std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

// The chorus::DataType value of `t`, or -1 when chorus has none.
int ChorusDtype(DLDataType t) {
  if (t.lanes != 1) return -1;
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (kDlTypes[i].code == t.code && kDlTypes[i].bits == t.bits) return i;
  }
  return -1;
}

std::string ShapeString(const int64_t* v, int32_t n) {
  std::string s = "[";
  for (int32_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// True when `strides` (NULL allowed) describe a compact row-major layout of `shape`. Strides of
// size-1 dimensions, and of empty tensors, do not matter.
bool IsRowMajor(const int64_t* shape, const int64_t* strides, int32_t ndim) {
  if (strides == nullptr) return true;
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] == 0) return true;
  }
  int64_t expected = 1;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

// Owns a consumed DLManagedTensor (an imported array) and calls its deleter once, on
// destruction (with the GIL held: producers such as NumPy need it).
class DlpackTensor {
 public:
  explicit DlpackTensor(DLManagedTensor* m) : m_(m) {}
  DlpackTensor(const DlpackTensor&) = delete;
  DlpackTensor& operator=(const DlpackTensor&) = delete;
  ~DlpackTensor() {
    if (m_ != nullptr && m_->deleter != nullptr) m_->deleter(m_);
  }

 private:
  DLManagedTensor* m_;
};

// The DLManagedTensor of result_to_dlpack: views the output of `result`, which it owns.
struct ResultTensor {
  ResultTensor() = default;
  ResultTensor(const ResultTensor&) = delete;
  ResultTensor& operator=(const ResultTensor&) = delete;
  ~ResultTensor() {
    if (result != nullptr) chorus_result_free(result);
  }

  DLManagedTensor managed{};
  chorus_result_t* result = nullptr;
  std::vector<int64_t> shape;
};

void DeleteResultTensor(DLManagedTensor* m) { delete static_cast<ResultTensor*>(m->manager_ctx); }

// Destructor of the capsules result_to_dlpack makes: frees the tensor unless a consumer took it.
void DestroyCapsule(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kUsedCapsuleName)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (m == nullptr) {
    PyErr_WriteUnraisable(capsule);
  } else if (m->deleter != nullptr) {
    m->deleter(m);
  }
  PyErr_Restore(type, value, traceback);
}

// tensor_from_dlpack(capsule, dtype=-1) -> (data, dtype, shape, device, keepalive).
//
// Consumes `capsule` (from obj.__dlpack__()) and describes its tensor as the (data, dtype, shape,
// device) that chorus ops take: data includes byte_offset; device -1 for host memory (kDLCPU,
// kDLCUDAHost), the device id for kDLCUDA. `dtype` >= 0 overrides the chorus dtype (for
// producers without a DLPack bool, e.g. NumPy 1.24: pass a uint8 view and dtype 9); it must have
// the DLPack dtype's element size. The tensor stays valid while `keepalive` (a DlpackTensor)
// lives; dropping it calls the producer's deleter.
// Raises, leaving the capsule unconsumed (its own destructor frees it), when the tensor is not
// row-major contiguous (the caller copies first), or its dtype or device is not supported.
py::tuple TensorFromDlpack(py::handle capsule, int dtype) {
  if (!PyCapsule_CheckExact(capsule.ptr())) {
    throw py::type_error(std::string("tensor_from_dlpack expects a DLPack capsule (from "
                                     "obj.__dlpack__()), got ") +
                         Py_TYPE(capsule.ptr())->tp_name);
  }
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName)) {
    if (PyCapsule_IsValid(capsule.ptr(), kUsedCapsuleName)) {
      throw py::value_error("DLPack capsule was already consumed");
    }
    throw py::value_error("capsule is not a DLPack tensor (its name is not \"dltensor\")");
  }
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  if (m == nullptr) throw py::error_already_set();
  const DLTensor& t = m->dl_tensor;

  int32_t device;
  switch (t.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
      device = -1;
      break;
    case kDLCUDA:
      device = t.device.device_id;
      break;
    default:
      throw py::value_error("DLPack device type " +
                            std::to_string(static_cast<int>(t.device.device_type)) +
                            " is not supported (only CPU and CUDA)");
  }
  int code = ChorusDtype(t.dtype);
  if (code < 0 && dtype < 0) {
    throw py::value_error("DLPack dtype " + DlTypeName(t.dtype) + " is not supported");
  }
  if (dtype >= 0) {
    if (dtype >= kNumDataTypes) {
      throw py::value_error("unknown chorus dtype " + std::to_string(dtype));
    }
    if (t.dtype.lanes != 1 || t.dtype.bits != kDlTypes[dtype].bits) {
      throw py::value_error("dtype " + std::to_string(dtype) + " (" + DlTypeName(kDlTypes[dtype]) +
                            ") does not have the element size of the DLPack dtype " +
                            DlTypeName(t.dtype));
    }
    code = dtype;
  }
  if (t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr)) {
    throw py::value_error("DLPack tensor has a malformed shape");
  }
  if (!IsRowMajor(t.shape, t.strides, t.ndim)) {
    throw py::value_error("DLPack tensor is not contiguous (shape " + ShapeString(t.shape, t.ndim) +
                          ", strides " + ShapeString(t.strides, t.ndim) +
                          "); pass a contiguous copy");
  }

  py::tuple shape(t.ndim);
  for (int32_t i = 0; i < t.ndim; ++i) shape[i] = py::int_(t.shape[i]);
  uintptr_t data = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  // Consumed from here on: the keepalive calls the deleter.
  if (PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName) != 0) throw py::error_already_set();
  py::object keepalive = py::cast(std::make_unique<DlpackTensor>(m));
  return py::make_tuple(data, code, shape, device, keepalive);
}

// result_to_dlpack(result, dtype) -> capsule named "dltensor".
//
// Takes the chorus_result_t of `result` (a chorus._C.Result, via Result.take(): the Result
// must not be used afterwards, except for another take(), which returns 0) and exports its
// runtime-allocated output (allgather, alltoall, reducescatter) as a host tensor of chorus
// dtype `dtype`, shaped like the output. The tensor owns the result: its deleter (called by the
// consumer, or by the capsule's destructor when never consumed) frees it with
// chorus_result_free.
// Raises, leaving `result` untouched, when `dtype` is unknown; raises after freeing the result
// when the op failed or its output does not hold shape x dtype bytes (e.g. it has no output);
// raises when the result was already taken.
py::capsule ResultToDlpack(py::object result, int dtype) {
  if (PyObject_IsInstance(result.ptr(), g_result_type) != 1) {
    if (PyErr_Occurred()) throw py::error_already_set();
    throw py::type_error(std::string("result_to_dlpack expects a chorus._C.Result, got ") +
                         Py_TYPE(result.ptr())->tp_name);
  }
  if (dtype < 0 || dtype >= kNumDataTypes) {
    throw py::value_error("unknown chorus dtype " + std::to_string(dtype));
  }
  auto guard = std::make_unique<ResultTensor>();  // frees the result on every error path
  guard->result = reinterpret_cast<chorus_result_t*>(result.attr("take")().cast<uintptr_t>());
  if (guard->result == nullptr) throw py::value_error("result_to_dlpack: result already taken");
  const char* message = nullptr;
  if (chorus_result_status(guard->result, &message) != 0) {
    throw py::value_error(std::string("result_to_dlpack: the op failed: ") +
                          (message != nullptr ? message : ""));
  }

  void* data = nullptr;
  int64_t num_bytes = 0;
  int32_t ndim = 0;
  const int64_t* shape = nullptr;
  chorus_result_output(guard->result, &data, &num_bytes, &ndim, &shape);
  guard->shape.assign(shape, shape + ndim);
  int64_t elements = 1;
  for (int64_t d : guard->shape) elements *= d;
  const int64_t item = kDlTypes[dtype].bits / 8;
  if (data == nullptr && num_bytes == 0 && ndim == 0) {
    throw py::value_error("result_to_dlpack: the op has no runtime-allocated output");
  }
  if (elements * item != num_bytes) {
    throw py::value_error("result_to_dlpack: output has " + std::to_string(num_bytes) +
                          " bytes, not the " + std::to_string(elements * item) + " of shape " +
                          ShapeString(shape, ndim) + " and dtype " + DlTypeName(kDlTypes[dtype]));
  }
  // Consumers may reject a NULL data pointer even for an empty tensor.
  alignas(64) static char empty_storage[64];
  DLTensor& t = guard->managed.dl_tensor;
  t.data = data != nullptr ? data : empty_storage;
  const int32_t device = chorus_result_output_device(guard->result);
  t.device = device < 0 ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, device};
  t.ndim = ndim;
  t.dtype = kDlTypes[dtype];
  t.shape = guard->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  guard->managed.manager_ctx = guard.get();
  guard->managed.deleter = &DeleteResultTensor;

  PyObject* capsule = PyCapsule_New(&guard->managed, kCapsuleName, &DestroyCapsule);
  if (capsule == nullptr) throw py::error_already_set();
  guard.release();  // the capsule (then its consumer) owns it now
  return py::reinterpret_steal<py::capsule>(capsule);
}

}  // namespace

void RegisterDlpack(py::module_& m) {
  g_result_type = m.attr("Result").ptr();  // a type the module keeps alive
  py::class_<DlpackTensor>(m, "DlpackTensor",
                           "Keeps an array imported by tensor_from_dlpack alive; dropping it "
                           "releases the array to its producer.");
  m.def("tensor_from_dlpack", &TensorFromDlpack, py::arg("capsule"), py::arg("dtype") = -1,
        "tensor_from_dlpack(capsule, dtype=-1) -> (data, dtype, shape, device, keepalive)");
  m.def("result_to_dlpack", &ResultToDlpack, py::arg("result"), py::arg("dtype"),
        "result_to_dlpack(result, dtype) -> DLPack capsule owning the result's output");
}

}  // namespace chorus_python
