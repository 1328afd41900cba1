// chorus.torch's fast path for the per-gradient op: allreduce_async_ of a named, dense,
// contiguous CPU tensor (what DistributedOptimizer submits for each gradient), and the
// synchronize of its handle.
//
// chorus.torch's `allreduce_async_` and `synchronize` are "front doors": callables written in
// C (vectorcall) that take the public signature. A call the fast path covers is checked,
// submitted and registered in the Python handle table (chorus.handles._pending) here, skipping
// the Python frame, its argument binding and the Python-level checks (together about as much
// CPU as the op's C++ side). Every other call, and any call whose arguments are unusual in
// the least (unknown keywords, another tensor kind, device or op, a non-float scale), goes
// unchanged to the Python implementation the front door wraps, which binds the arguments and
// raises exactly as before. The fast path raises only what the runtime refuses (a name already
// in flight, a shut-down runtime), with the general path's exception types.
//
// Thread-safety: everything here runs with the GIL held; g_torch is written once, by
// setup_torch_fast_path at import.
#include <Python.h>
#include <structmember.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pybind11/pybind11.h"

#include "chorus/c_api.h"
#include "chorus/types.h"
#include "fast_calls.h"
#include "torch_fields.h"

namespace py = pybind11;

namespace chorus_python {
namespace {

struct TorchFastPath {
  PyObject* dtypes = nullptr;        // dict: torch.dtype -> chorus DataType value
  PyObject* pending = nullptr;       // chorus.handles._pending
  PyObject* next_handle = nullptr;   // chorus.handles._next_handle (an iterator)
  PyObject* tensor_types = nullptr;  // tuple of the exact types taken (torch.Tensor, ...)
  PyObject* dtype = nullptr;         // interned attribute names
  PyObject* is_cpu = nullptr;
  PyObject* is_contiguous = nullptr;
  PyObject* data_ptr = nullptr;
  PyObject* shape = nullptr;
  PyObject* process_set_id = nullptr;
  // Registered ops (FastSlot below): name (as passed) -> index into g_fast_slots, and the
  // names submitted once.
  PyObject* slot_of_name = nullptr;
  PyObject* seen_names = nullptr;
  // chorus.torch._fields's reader (torch_fields.h), or null: the fields are read through Python.
  ReadTorchFields read_fields = nullptr;
};
TorchFastPath g_torch;

// setup_torch_fast_path(dtypes, pending, next_handle, tensor_types[, fields_reader])
PyObject* SetupTorchFastPath(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if ((nargs != 4 && nargs != 5) || !PyDict_Check(args[0]) || !PyDict_Check(args[1]) ||
      !PyIter_Check(args[2]) || !PyTuple_Check(args[3]) ||
      (nargs == 5 && args[4] != Py_None && !PyCapsule_IsValid(args[4], kTorchFieldsCapsule))) {
    PyErr_SetString(PyExc_TypeError,
                    "setup_torch_fast_path(dtypes: dict, pending: dict, next_handle: iterator, "
                    "tensor_types: tuple[, fields_reader: chorus.torch._fields.read or None])");
    return nullptr;
  }
  g_torch.read_fields = nullptr;
  if (nargs == 5 && args[4] != Py_None) {
    g_torch.read_fields =
        reinterpret_cast<ReadTorchFields>(PyCapsule_GetPointer(args[4], kTorchFieldsCapsule));
  }
  PyObject** slots[] = {&g_torch.dtypes, &g_torch.pending, &g_torch.next_handle,
                        &g_torch.tensor_types};
  for (int i = 0; i < 4; ++i) Py_XSETREF(*slots[i], Py_NewRef(args[i]));
  struct {
    PyObject** slot;
    const char* name;
  } names[] = {{&g_torch.dtype, "dtype"},
               {&g_torch.is_cpu, "is_cpu"},
               {&g_torch.is_contiguous, "is_contiguous"},
               {&g_torch.data_ptr, "data_ptr"},
               {&g_torch.shape, "shape"},
               {&g_torch.process_set_id, "process_set_id"}};
  for (auto& n : names) {
    if (*n.slot == nullptr) *n.slot = PyUnicode_InternFromString(n.name);
    if (*n.slot == nullptr) return nullptr;
  }
  if (g_torch.slot_of_name == nullptr) g_torch.slot_of_name = PyDict_New();
  if (g_torch.seen_names == nullptr) g_torch.seen_names = PyDict_New();
  if (g_torch.slot_of_name == nullptr || g_torch.seen_names == nullptr) return nullptr;
  Py_RETURN_NONE;
}

// Gets attribute `name` of `o`; nullptr (with no Python error left) when that fails.
PyObject* QuietAttr(PyObject* o, PyObject* name) {
  PyObject* v = PyObject_GetAttr(o, name);
  if (v == nullptr) PyErr_Clear();
  return v;
}

// Calls method `name` of `o` without arguments; nullptr (no Python error left) when it raises.
PyObject* QuietCall(PyObject* o, PyObject* name) {
  PyObject* v = PyObject_CallMethodNoArgs(o, name);
  if (v == nullptr) PyErr_Clear();
  return v;
}

// True when `o` is exactly the bool `want` (a new reference `o` is released).
bool IsBool(PyObject* o, PyObject* want) {
  const bool is = o == want;
  Py_XDECREF(o);
  return is;
}

// Returns Py_None (a new reference) when the general path must take the op: nothing was done.
PyObject* NotHandled() { Py_RETURN_NONE; }

// ---- Registered ops (Note [Registered ops] in runtime/submit/op_slots.h).
//
// A name the fast path has submitted before is registered with the runtime on its second
// submission, with the op's parameters; from then on an op of that name with the same
// parameters is a chorus_submit of its slot (no validation, name copy or hashing in the
// runtime). Other parameters re-register it. A slot the runtime cannot take this time (its
// last handle not released, say) leaves the op to chorus_enqueue, which handles names as
// before. Bounded: at most kMaxFastSlots names are registered, and names seen once are
// forgotten when kMaxSeenNames accumulate (a job that names every op anew registers nothing).
struct FastSlot {
  int32_t slot = -1;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  int32_t reduce_op = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t process_set_id = 0;

  bool Matches(const chorus_op_t& op) const {
    return op.input.dtype == dtype && op.reduce_op == reduce_op && op.prescale_factor == prescale &&
           op.postscale_factor == postscale && op.process_set_id == process_set_id &&
           static_cast<size_t>(op.input.ndim) == shape.size() &&
           std::equal(shape.begin(), shape.end(), op.input.shape);
  }
};
constexpr size_t kMaxFastSlots = 1 << 16;
constexpr Py_ssize_t kMaxSeenNames = 1 << 16;
std::vector<FastSlot> g_fast_slots;  // by index (g_torch.slot_of_name maps names to indices)

// The slot index of `name` (borrowed dict lookups), or -1; -2 with a Python error set.
Py_ssize_t FastSlotIndex(PyObject* name) {
  PyObject* index = PyDict_GetItemWithError(g_torch.slot_of_name, name);
  if (index == nullptr) return PyErr_Occurred() ? -2 : -1;
  return PyLong_AsSsize_t(index);
}

// Registers `op` under `name` (when it is seen for the second time and room is left); the
// index of its FastSlot, or -1 (not registered: the caller enqueues).
Py_ssize_t RegisterFastSlot(PyObject* name, const chorus_op_t& op, Py_ssize_t reuse) {
  if (reuse < 0) {
    if (g_fast_slots.size() >= kMaxFastSlots) return -1;
    const int seen = PyDict_Contains(g_torch.seen_names, name);
    if (seen <= 0) {
      if (seen < 0) PyErr_Clear();
      if (PyDict_GET_SIZE(g_torch.seen_names) >= kMaxSeenNames) PyDict_Clear(g_torch.seen_names);
      if (PyDict_SetItem(g_torch.seen_names, name, Py_None) != 0) PyErr_Clear();
      return -1;
    }
  }
  int32_t slot = -1;
  if (chorus_register_op(&op, &slot) != 0) return -1;  // e.g. in flight: enqueue says why
  Py_ssize_t index = reuse;
  if (index < 0) {
    index = static_cast<Py_ssize_t>(g_fast_slots.size());
    PyObject* index_obj = PyLong_FromSsize_t(index);
    if (index_obj == nullptr || PyDict_SetItem(g_torch.slot_of_name, name, index_obj) != 0) {
      Py_XDECREF(index_obj);
      PyErr_Clear();
      chorus_unregister_op(slot);
      return -1;
    }
    Py_DECREF(index_obj);
    if (PyDict_DelItem(g_torch.seen_names, name) != 0) PyErr_Clear();
    g_fast_slots.emplace_back();
  }
  FastSlot& fs = g_fast_slots[static_cast<size_t>(index)];
  fs.slot = slot;
  fs.dtype = op.input.dtype;
  fs.shape.assign(op.input.shape, op.input.shape + op.input.ndim);
  fs.reduce_op = op.reduce_op;
  fs.prescale = op.prescale_factor;
  fs.postscale = op.postscale_factor;
  fs.process_set_id = op.process_set_id;
  return index;
}

// Submits `op` (named `name` by the caller) through its registered slot: 0 and *handle set;
// a chorus error code (the runtime refused the op: raise); or -1 when the op must be
// enqueued instead (no slot for it, or the slot cannot take it now).
int SubmitRegistered(PyObject* name, const chorus_op_t& op, chorus_handle_t* handle) {
  Py_ssize_t index = FastSlotIndex(name);
  if (index == -2) {
    PyErr_Clear();
    return -1;
  }
  if (index >= 0) {
    FastSlot& fs = g_fast_slots[static_cast<size_t>(index)];
    if (fs.slot >= 0 && !fs.Matches(op)) {
      // Other parameters under this name: register them instead (when the slot is idle).
      if (chorus_unregister_op(fs.slot) != 0) return -1;
      fs.slot = -1;
    }
    if (fs.slot < 0 && RegisterFastSlot(name, op, index) < 0) return -1;
  } else {
    index = RegisterFastSlot(name, op, -1);
    if (index < 0) return -1;
  }
  FastSlot& fs = g_fast_slots[static_cast<size_t>(index)];
  int code = chorus_submit(fs.slot, op.input.data, nullptr, nullptr, handle);
  if (code == CHORUS_CODE_NOT_FOUND) {
    // A runtime initialised since the registration forgot it: register in this one.
    fs.slot = -1;
    if (RegisterFastSlot(name, op, index) < 0) return -1;
    code = chorus_submit(fs.slot, op.input.data, nullptr, nullptr, handle);
  }
  if (code == CHORUS_CODE_ALREADY_EXISTS) return -1;  // not released
  return code;
}

// The handle table's entry (c_handle, tensor, None); nullptr with the error set. Built by hand:
// Py_BuildValue would parse its format string once per op.
PyObject* PendingEntry(chorus_handle_t c_handle, PyObject* tensor) {
  PyObject* c = PyLong_FromLongLong(static_cast<long long>(c_handle));
  PyObject* entry = c == nullptr ? nullptr : PyTuple_New(3);
  if (entry == nullptr) {
    Py_XDECREF(c);
    return nullptr;
  }
  PyTuple_SET_ITEM(entry, 0, c);
  PyTuple_SET_ITEM(entry, 1, Py_NewRef(tensor));
  PyTuple_SET_ITEM(entry, 2, Py_NewRef(Py_None));
  return entry;
}

// Registers `c_handle` (in flight) in the Python handle table as
// chorus.handles.submit_op(c_handle, tensor, None) would; returns the Python handle. When that
// fails, waits for the op (so the tensor is not written after this raises) and raises.
PyObject* RegisterHandle(chorus_handle_t c_handle, PyObject* tensor) {
  PyObject* handle = PyIter_Next(g_torch.next_handle);
  PyObject* entry = handle == nullptr ? nullptr : PendingEntry(c_handle, tensor);
  if (entry != nullptr && PyDict_SetItem(g_torch.pending, handle, entry) == 0) {
    Py_DECREF(entry);
    return handle;
  }
  Py_XDECREF(entry);
  Py_XDECREF(handle);
  chorus_result_t* r = nullptr;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  {
    py::gil_scoped_release release;
    chorus_release(c_handle, &r);
  }
  if (r != nullptr) chorus_result_free(r);
  PyErr_Restore(type, value, trace);
  if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "handle registration failed");
  return nullptr;
}

// Reads `tensor` as the fast path takes it (a contiguous CPU tensor of a dtype chorus supports)
// into `input`; false (no Python error left) when it is not one, or its fields cannot be read.
// The shape `input` points to is borrowed from the tensor or kept here until the next call.
bool ReadInput(PyObject* tensor, chorus_tensor_t* input) {
  if (g_torch.read_fields != nullptr) {
    TorchFields fields;
    if (!g_torch.read_fields(tensor, &fields)) return false;
    input->data = fields.data;
    input->dtype = fields.dtype;
    input->ndim = fields.ndim;
    input->shape = fields.sizes;
    input->device = chorus::kCpuDevice;
    return true;
  }
  PyObject* dtype_obj = QuietAttr(tensor, g_torch.dtype);
  if (dtype_obj == nullptr) return false;
  PyObject* dtype_code = PyDict_GetItemWithError(g_torch.dtypes, dtype_obj);  // borrowed
  Py_DECREF(dtype_obj);
  if (dtype_code == nullptr) {
    PyErr_Clear();
    return false;
  }
  // Sparse, mkldnn and other storage-less layouts have no data_ptr(), so they leave below.
  if (!IsBool(QuietAttr(tensor, g_torch.is_cpu), Py_True) ||
      !IsBool(QuietCall(tensor, g_torch.is_contiguous), Py_True)) {
    return false;
  }
  PyObject* data = QuietCall(tensor, g_torch.data_ptr);
  PyObject* shape_obj = QuietAttr(tensor, g_torch.shape);
  static std::vector<int64_t> shape;  // GIL-protected scratch, kept: no allocation per op
  const bool read = data != nullptr && shape_obj != nullptr &&
                    ArgTensor(data, dtype_code, shape_obj, nullptr, &shape, input);
  Py_XDECREF(data);
  Py_XDECREF(shape_obj);
  if (!read) PyErr_Clear();
  return read;
}

// The in-place allreduce of `tensor` named "allreduce.<name>": a Python handle; Py_None when
// the general path must take it (nothing done); nullptr with the error set when the runtime
// refused it.
PyObject* SubmitAllreduceInplace(PyObject* tensor, PyObject* name, PyObject* op, PyObject* prescale,
                                 PyObject* postscale, PyObject* process_set) {
  bool known_type = false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(g_torch.tensor_types); ++i) {
    known_type |= Py_TYPE(tensor) ==
                  reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(g_torch.tensor_types, i));
  }
  if (!known_type || !PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) == 0 ||
      !PyLong_CheckExact(op) || !PyFloat_CheckExact(prescale) || !PyFloat_CheckExact(postscale)) {
    return NotHandled();
  }
  const long reduce_op = PyLong_AsLong(op);
  // Sum, Average, Min, Max, Product (Adasum and unknown values: the general path says why).
  if (reduce_op < static_cast<long>(chorus::ReduceOp::kSum) ||
      reduce_op > static_cast<long>(chorus::ReduceOp::kProduct)) {
    PyErr_Clear();
    return NotHandled();
  }
  PyObject* set_id_obj = QuietAttr(process_set, g_torch.process_set_id);
  if (set_id_obj == nullptr || !PyLong_CheckExact(set_id_obj)) {
    Py_XDECREF(set_id_obj);
    return NotHandled();
  }
  const long set_id = PyLong_AsLong(set_id_obj);
  Py_DECREF(set_id_obj);
  chorus_op_t c_op;
  chorus_op_init(&c_op);
  if (!ReadInput(tensor, &c_op.input)) return NotHandled();
  Py_ssize_t name_len = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(name, &name_len);
  if (utf8 == nullptr) {
    PyErr_Clear();  // a lone surrogate, say: the general path raises for it
    return NotHandled();
  }
  static std::string full_name;  // GIL-protected scratch; chorus_enqueue copies the name
  full_name.assign("allreduce.");
  full_name.append(utf8, static_cast<size_t>(name_len));
  c_op.type = static_cast<int32_t>(chorus::OpType::kAllreduce);
  c_op.name = full_name.c_str();
  c_op.reduce_op = static_cast<int32_t>(reduce_op);
  c_op.prescale_factor = PyFloat_AS_DOUBLE(prescale);
  c_op.postscale_factor = PyFloat_AS_DOUBLE(postscale);
  c_op.process_set_id = static_cast<int32_t>(set_id);
  chorus_handle_t c_handle = 0;
  int code = SubmitRegistered(name, c_op, &c_handle);
  if (code < 0) code = chorus_enqueue(&c_op, nullptr, nullptr, &c_handle);
  if (code != 0) return SetChorusError(code);
  return RegisterHandle(c_handle, tensor);
}

// The synchronize of a handle registered without a finish function (those of the fast path
// among them): what chorus.handles.synchronize returns (the keepalive); Py_NotImplemented for
// any other handle (the general path takes it), None for an unknown one. Raises ChorusError
// (with .code) when the op failed.
PyObject* SynchronizePlain(PyObject* handle) {
  PyObject* entry = PyDict_GetItemWithError(g_torch.pending, handle);  // borrowed
  if (entry == nullptr) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
  }
  if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3 ||
      !PyLong_CheckExact(PyTuple_GET_ITEM(entry, 0)) || PyTuple_GET_ITEM(entry, 2) != Py_None) {
    return Py_NewRef(Py_NotImplemented);
  }
  Py_INCREF(entry);
  if (PyDict_DelItem(g_torch.pending, handle) != 0) {
    Py_DECREF(entry);
    return nullptr;
  }
  PyObject* status = ReleaseStatus(nullptr, PyTuple_GET_ITEM(entry, 0));
  if (status == nullptr || status != Py_None) {
    Py_DECREF(entry);  // the tensors go before the error is raised, as in the general path
    if (status == nullptr) return nullptr;
    PyObject* error_type = ChorusErrorType();
    PyObject* err = PyObject_CallOneArg(error_type, PyTuple_GET_ITEM(status, 1));
    if (err != nullptr && PyObject_SetAttrString(err, "code", PyTuple_GET_ITEM(status, 0)) == 0) {
      PyErr_SetObject(error_type, err);
    }
    Py_XDECREF(err);
    Py_DECREF(status);
    return nullptr;
  }
  Py_DECREF(status);
  PyObject* keepalive = Py_NewRef(PyTuple_GET_ITEM(entry, 1));
  Py_DECREF(entry);
  return keepalive;
}

// ---- Front doors.

// A callable with a vectorcall entry point, the Python function it wraps and an instance
// dict (so functools.update_wrapper gives it the wrapped function's name, doc and signature).
struct FrontDoor {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* general;     // the Python implementation
  PyObject* defaults;    // general.__defaults__ (allreduce_async_: a tuple of 6)
  PyObject* average_op;  // allreduce_async_: the value of chorus.torch.Average
  PyObject* dict;
};

// The parameters of allreduce_async_, in order.
enum AllreduceParam {
  kTensor,
  kAverage,
  kName,
  kOp,
  kPrescale,
  kPostscale,
  kProcessSet,
  kAllreduceParams
};
PyObject* g_allreduce_params[kAllreduceParams];  // interned names

// Binds a vectorcall's arguments to allreduce_async_'s parameters (borrowed; defaults filled
// in). False, with nothing raised, when Python's own binding would be needed (too many
// arguments, an unknown or repeated keyword, no tensor): the general function then raises.
bool BindAllreduceArgs(const FrontDoor& door, PyObject* const* args, Py_ssize_t nargs,
                       PyObject* kwnames, PyObject* out[kAllreduceParams]) {
  if (nargs > kAllreduceParams) return false;
  for (int p = 0; p < kAllreduceParams; ++p) out[p] = p < nargs ? args[p] : nullptr;
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int found = -1;
    for (int p = 0; p < kAllreduceParams && found < 0; ++p) {
      if (key == g_allreduce_params[p]) found = p;  // interned keywords: the common case
    }
    for (int p = 0; p < kAllreduceParams && found < 0; ++p) {
      if (PyUnicode_Compare(key, g_allreduce_params[p]) == 0) found = p;
    }
    if (PyErr_Occurred()) PyErr_Clear();
    if (found < 0 || out[found] != nullptr) return false;
    out[found] = args[nargs + k];
  }
  if (out[kTensor] == nullptr) return false;
  for (int p = 1; p < kAllreduceParams; ++p) {
    if (out[p] == nullptr) out[p] = PyTuple_GET_ITEM(door.defaults, p - 1);
  }
  return true;
}

PyObject* AllreduceAsyncInplaceCall(PyObject* self, PyObject* const* args, size_t nargsf,
                                    PyObject* kwnames) {
  auto& door = *reinterpret_cast<FrontDoor*>(self);
  PyObject* p[kAllreduceParams];
  if (g_torch.dtypes != nullptr &&
      BindAllreduceArgs(door, args, PyVectorcall_NARGS(nargsf), kwnames, p) &&
      p[kAverage] == Py_None) {
    PyObject* op = p[kOp] == Py_None ? door.average_op : p[kOp];  // Horovod's default
    PyObject* handle = SubmitAllreduceInplace(p[kTensor], p[kName], op, p[kPrescale], p[kPostscale],
                                              p[kProcessSet]);
    if (handle != Py_None) return handle;  // a handle, or nullptr with the error set
    Py_DECREF(handle);
  }
  return PyObject_Vectorcall(door.general, args, nargsf, kwnames);
}

PyObject* SynchronizeCall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto& door = *reinterpret_cast<FrontDoor*>(self);
  if (g_torch.pending != nullptr && kwnames == nullptr && PyVectorcall_NARGS(nargsf) == 1 &&
      PyLong_CheckExact(args[0])) {
    PyObject* result = SynchronizePlain(args[0]);
    if (result != Py_NotImplemented) return result;
    Py_DECREF(result);
  }
  return PyObject_Vectorcall(door.general, args, nargsf, kwnames);
}

int FrontDoorTraverse(PyObject* self, visitproc visit, void* arg) {
  auto* door = reinterpret_cast<FrontDoor*>(self);
  Py_VISIT(door->general);
  Py_VISIT(door->defaults);
  Py_VISIT(door->average_op);
  Py_VISIT(door->dict);
  return 0;
}

int FrontDoorClear(PyObject* self) {
  auto* door = reinterpret_cast<FrontDoor*>(self);
  Py_CLEAR(door->general);
  Py_CLEAR(door->defaults);
  Py_CLEAR(door->average_op);
  Py_CLEAR(door->dict);
  return 0;
}

void FrontDoorDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  FrontDoorClear(self);
  type->tp_free(self);
  Py_DECREF(type);  // instances of a heap type hold a reference to it
}

PyObject* FrontDoorRepr(PyObject* self) {
  return PyUnicode_FromFormat("<chorus front door of %R>",
                              reinterpret_cast<FrontDoor*>(self)->general);
}

// Binds as a method when stored on a class, like the Python function it stands for.
PyObject* FrontDoorGet(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyTypeObject* g_front_door_type = nullptr;

// The FrontDoor type (a heap type: its vectorcall and dict offsets are given as members).
PyTypeObject* MakeFrontDoorType() {
  static PyMemberDef members[] = {
      {"__vectorcalloffset__", T_PYSSIZET, offsetof(FrontDoor, vectorcall), READONLY, nullptr},
      {"__dictoffset__", T_PYSSIZET, offsetof(FrontDoor, dict), READONLY, nullptr},
      {nullptr, 0, 0, 0, nullptr}};
  static PyGetSetDef getset[] = {
      {"__dict__", &PyObject_GenericGetDict, &PyObject_GenericSetDict, nullptr, nullptr},
      {nullptr, nullptr, nullptr, nullptr, nullptr}};
  static PyType_Slot slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(&FrontDoorDealloc)},
                                {Py_tp_traverse, reinterpret_cast<void*>(&FrontDoorTraverse)},
                                {Py_tp_clear, reinterpret_cast<void*>(&FrontDoorClear)},
                                {Py_tp_repr, reinterpret_cast<void*>(&FrontDoorRepr)},
                                {Py_tp_call, reinterpret_cast<void*>(&PyVectorcall_Call)},
                                {Py_tp_getattro, reinterpret_cast<void*>(&PyObject_GenericGetAttr)},
                                {Py_tp_setattro, reinterpret_cast<void*>(&PyObject_GenericSetAttr)},
                                {Py_tp_descr_get, reinterpret_cast<void*>(&FrontDoorGet)},
                                {Py_tp_members, members},
                                {Py_tp_getset, getset},
                                {0, nullptr}};
  static PyType_Spec spec = {"chorus._C.FrontDoor", sizeof(FrontDoor), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                             slots};
  return reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
}

// front_door(kind, general[, average_op]) -> a FrontDoor for "allreduce_async_" (average_op
// required: the value of Average) or "synchronize".
PyObject* MakeFrontDoor(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  const char* usage =
      "front_door('allreduce_async_', general, average_op) or "
      "front_door('synchronize', general)";
  if (nargs < 2 || !PyUnicode_Check(args[0]) || !PyCallable_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, usage);
    return nullptr;
  }
  vectorcallfunc call = nullptr;
  PyObject* defaults = nullptr;
  PyObject* average_op = nullptr;
  if (PyUnicode_CompareWithASCIIString(args[0], "allreduce_async_") == 0 && nargs == 3) {
    defaults = PyObject_GetAttrString(args[1], "__defaults__");
    if (defaults == nullptr) return nullptr;
    if (!PyTuple_Check(defaults) || PyTuple_GET_SIZE(defaults) != kAllreduceParams - 1) {
      Py_DECREF(defaults);
      PyErr_SetString(PyExc_TypeError,
                      "allreduce_async_'s general function must default its 6 last parameters");
      return nullptr;
    }
    average_op = Py_NewRef(args[2]);
    call = &AllreduceAsyncInplaceCall;
  } else if (PyUnicode_CompareWithASCIIString(args[0], "synchronize") == 0 && nargs == 2) {
    call = &SynchronizeCall;
  } else {
    PyErr_SetString(PyExc_TypeError, usage);
    return nullptr;
  }
  auto* door = PyObject_GC_New(FrontDoor, g_front_door_type);
  if (door == nullptr) {
    Py_XDECREF(defaults);
    Py_XDECREF(average_op);
    return nullptr;
  }
  door->vectorcall = call;
  door->general = Py_NewRef(args[1]);
  door->defaults = defaults;
  door->average_op = average_op;
  door->dict = nullptr;
  PyObject_GC_Track(door);
  return reinterpret_cast<PyObject*>(door);
}

PyMethodDef g_torch_methods[] = {
    {"setup_torch_fast_path",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&SetupTorchFastPath)),
     METH_FASTCALL,
     "setup_torch_fast_path(dtypes, pending, next_handle, tensor_types[, fields_reader])"},
    {"front_door", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&MakeFrontDoor)),
     METH_FASTCALL,
     "front_door(kind, general[, average_op]) -> a callable running the fast path of "
     "'allreduce_async_' or 'synchronize' and `general` for everything else"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void RegisterTorchFastPath(py::module_& m) {
  static const char* const kParamNames[kAllreduceParams] = {
      "tensor", "average", "name", "op", "prescale_factor", "postscale_factor", "process_set"};
  for (int p = 0; p < kAllreduceParams; ++p) {
    g_allreduce_params[p] = PyUnicode_InternFromString(kParamNames[p]);
    if (g_allreduce_params[p] == nullptr) throw py::error_already_set();
  }
  g_front_door_type = MakeFrontDoorType();
  if (g_front_door_type == nullptr) throw py::error_already_set();
  for (PyMethodDef* def = g_torch_methods; def->ml_name != nullptr; ++def) {
    py::object fn = py::reinterpret_steal<py::object>(PyCFunction_NewEx(def, nullptr, m.ptr()));
    if (!fn) throw py::error_already_set();
    m.add_object(def->ml_name, fn);
  }
}

}  // namespace chorus_python
