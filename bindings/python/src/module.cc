// The extension module chorus._C: a thin pybind11 layer over the C ABI (chorus/c_api.h).
//
// Tensors cross as (address, dtype, shape, device): this module never sees a framework tensor,
// and the Python side keeps every tensor alive until its handle is released. Failures become
// chorus._C.ChorusError (a RuntimeError); InvalidArgument becomes ChorusValueError, which is
// both a ChorusError and a ValueError. Calls that block (wait, release, release_status, init,
// shutdown) drop the GIL while they wait.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pybind11/pybind11.h"
#include "pybind11/stl.h"

#include "chorus/c_api.h"
#include "constants.h"
#include "dlpack.h"
#include "fast_calls.h"

namespace py = pybind11;

namespace {

constexpr int kInvalidArgument = 3;

PyObject* g_error = nullptr;        // chorus._C.ChorusError
PyObject* g_value_error = nullptr;  // chorus._C.ChorusValueError

// Raises the exception for `code` with `message`; the instance carries `.code`.
[[noreturn]] void Raise(int code, const std::string& message) {
  PyObject* type = code == kInvalidArgument ? g_value_error : g_error;
  py::object exc =
      py::reinterpret_steal<py::object>(PyObject_CallFunction(type, "s", message.c_str()));
  if (!exc) throw py::error_already_set();
  exc.attr("code") = code;
  PyErr_SetObject(type, exc.ptr());
  throw py::error_already_set();
}

// Raises for a non-zero status of a C ABI call made on this thread.
void Check(int code) {
  if (code != 0) Raise(code, chorus_last_error());
}

struct TensorSpec {
  uintptr_t data = 0;
  int32_t dtype = 7;
  std::vector<int64_t> shape;
  int32_t device = -1;
};

// One op as Python describes it; the fields mirror chorus_op_t.
struct OpSpec {
  int32_t type = 0;
  std::string name;
  TensorSpec input;
  TensorSpec output;
  int32_t reduce_op = 0;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  int32_t root_rank = 0;
  int32_t process_set_id = 0;
  std::vector<int64_t> splits;
  std::vector<int32_t> process_set_ranks;
  uintptr_t stream = 0;  // GPU tensors: the producing cudaStream_t
};

chorus_tensor_t ToC(const TensorSpec& t) {
  chorus_tensor_t c;
  c.data = reinterpret_cast<void*>(t.data);
  c.dtype = t.dtype;
  c.ndim = static_cast<int32_t>(t.shape.size());
  c.shape = t.shape.data();
  c.device = t.device;
  return c;
}

// The returned struct borrows from `spec`, which must outlive its use.
chorus_op_t ToC(const OpSpec& spec) {
  chorus_op_t op;
  chorus_op_init(&op);
  op.type = spec.type;
  op.name = spec.name.empty() ? nullptr : spec.name.c_str();
  op.input = ToC(spec.input);
  op.output = ToC(spec.output);
  op.reduce_op = spec.reduce_op;
  op.prescale_factor = spec.prescale_factor;
  op.postscale_factor = spec.postscale_factor;
  op.root_rank = spec.root_rank;
  op.process_set_id = spec.process_set_id;
  op.splits = spec.splits.empty() ? nullptr : spec.splits.data();
  op.num_splits = static_cast<int32_t>(spec.splits.size());
  op.process_set_ranks = spec.process_set_ranks.empty() ? nullptr : spec.process_set_ranks.data();
  op.num_process_set_ranks = static_cast<int32_t>(spec.process_set_ranks.size());
  op.stream = reinterpret_cast<void*>(spec.stream);
  return op;
}

struct ResultDeleter {
  void operator()(chorus_result_t* r) const { chorus_result_free(r); }
};

// The result of a released op; owns the chorus_result_t.
class Result {
 public:
  explicit Result(chorus_result_t* r) : r_(r) {}

  int code() const { return chorus_result_status(Get(), nullptr); }
  std::string message() const {
    const char* m = nullptr;
    chorus_result_status(Get(), &m);
    return m != nullptr ? m : "";
  }
  std::vector<int64_t> output_shape() const {
    Output o = GetOutput();
    return std::vector<int64_t>(o.shape, o.shape + o.ndim);
  }
  std::vector<int64_t> received_splits() const {
    const int64_t* s = nullptr;
    int32_t n = 0;
    chorus_result_received_splits(Get(), &s, &n);
    return std::vector<int64_t>(s, s + n);
  }
  int32_t last_joined_rank() const { return chorus_result_last_joined_rank(Get()); }
  int32_t process_set_id() const { return chorus_result_process_set_id(Get()); }
  // Hands the chorus_result_t (as an address; 0 once taken) to the caller, who must free it
  // with chorus_result_free. Every other accessor raises ValueError afterwards. For
  // result_to_dlpack.
  uintptr_t take() { return reinterpret_cast<uintptr_t>(r_.release()); }

 private:
  struct Output {
    void* data = nullptr;
    int64_t num_bytes = 0;
    int32_t ndim = 0;
    const int64_t* shape = nullptr;
  };
  const chorus_result_t* Get() const {
    if (r_ == nullptr) Raise(kInvalidArgument, "this result has been taken (result_to_dlpack)");
    return r_.get();
  }
  Output GetOutput() const {
    Output o;
    chorus_result_output(Get(), &o.data, &o.num_bytes, &o.ndim, &o.shape);
    return o;
  }

  std::unique_ptr<chorus_result_t, ResultDeleter> r_;
};

// Elastic jobs: see chorus_elastic_adopt_next. Returns the adopted generation; raises the call's
// status (NOT_FOUND: this worker was released).
int64_t ElasticAdoptNext(double timeout_s) {
  int64_t generation = -1;
  int code;
  std::string error;
  {
    py::gil_scoped_release release;
    code = chorus_elastic_adopt_next(static_cast<int64_t>(timeout_s * 1000), &generation);
    if (code != 0) error = chorus_last_error();
  }
  if (code != 0) Raise(code, error);
  return generation;
}

// chorus_elastic_adopted_env as {name: value}.
py::dict ElasticAdoptedEnv() {
  const std::string env = chorus_elastic_adopted_env();
  py::dict vars;
  size_t start = 0;
  while (start < env.size()) {
    size_t end = env.find('\n', start);
    if (end == std::string::npos) end = env.size();
    const std::string line = env.substr(start, end - start);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) vars[py::str(line.substr(0, eq))] = py::str(line.substr(eq + 1));
    start = end + 1;
  }
  return vars;
}

// comm: the address of an MPI_Comm (mpi4py's MPI._addressof(comm)), or 0 for MPI_COMM_WORLD.
void Init(const std::vector<std::vector<int32_t>>& process_sets, uintptr_t comm) {
  std::vector<const int32_t*> ptrs;
  std::vector<int32_t> sizes;
  for (const auto& s : process_sets) {
    ptrs.push_back(s.data());
    sizes.push_back(static_cast<int32_t>(s.size()));
  }
  int code;
  std::string error;
  {
    py::gil_scoped_release release;
    code = chorus_init(reinterpret_cast<const void*>(comm), static_cast<int32_t>(ptrs.size()),
                       ptrs.data(), sizes.data());
    if (code != 0) error = chorus_last_error();
  }
  if (code != 0) Raise(code, error);
}

// Runs `call` (a blocking, collective C call: chorus_shutdown, chorus_suspend, chorus_reform)
// without the GIL; raises its status.
template <typename Call>
void CallWithoutGil(const Call& call) {
  int code;
  std::string error;
  {
    py::gil_scoped_release release;
    code = call();
    if (code != 0) error = chorus_last_error();
  }
  if (code != 0) Raise(code, error);
}

py::dict Topology() {
  chorus_topology_t t;
  Check(chorus_topology(&t));
  py::dict d;
  d["rank"] = t.rank;
  d["size"] = t.size;
  d["local_rank"] = t.local_rank;
  d["local_size"] = t.local_size;
  d["cross_rank"] = t.cross_rank;
  d["cross_size"] = t.cross_size;
  d["is_homogeneous"] = t.is_homogeneous != 0;
  return d;
}

int64_t Enqueue(const OpSpec& spec) {
  chorus_op_t op = ToC(spec);
  chorus_handle_t handle = 0;
  Check(chorus_enqueue(&op, nullptr, nullptr, &handle));
  return handle;
}

std::vector<int64_t> EnqueueGroup(const std::vector<OpSpec>& specs) {
  std::vector<chorus_op_t> ops;
  ops.reserve(specs.size());
  for (const OpSpec& s : specs) ops.push_back(ToC(s));
  std::vector<chorus_handle_t> handles(specs.size());
  Check(chorus_enqueue_group(ops.data(), static_cast<int32_t>(ops.size()), handles.data()));
  return std::vector<int64_t>(handles.begin(), handles.end());
}

bool Poll(int64_t handle) {
  int done = 0;
  Check(chorus_poll(handle, &done));
  return done != 0;
}

// Returns the op's status code (0 = success); raises only when the handle is unknown.
int Wait(int64_t handle) {
  int code;
  {
    py::gil_scoped_release release;
    code = chorus_wait(handle);
  }
  return code;
}

// Waits for the op and takes its result; raises only when no result exists (unknown handle).
Result Release(int64_t handle) {
  chorus_result_t* r = nullptr;
  int code;
  std::string error;
  {
    py::gil_scoped_release release;
    code = chorus_release(handle, &r);
    if (code != 0 && r == nullptr) error = chorus_last_error();
  }
  if (r == nullptr) Raise(code != 0 ? code : 13, error);
  return Result(r);
}

}  // namespace

namespace chorus_python {

// ---- Per-op fast path: raw METH_FASTCALL functions that skip pybind11's dispatch and the
// OpSpec/TensorSpec objects. Arguments are plain Python ints/floats/str/sequences.

// Reads an int argument; false with a Python error set when `o` is no integer.
bool ArgInt(PyObject* o, int64_t* out) {
  long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) return false;
  *out = v;
  return true;
}

// float(o), as Python's float() would convert it.
bool ArgDouble(PyObject* o, double* out) {
  if (PyFloat_CheckExact(o)) {
    *out = PyFloat_AS_DOUBLE(o);
    return true;
  }
  PyObject* f = PyNumber_Float(o);
  if (f == nullptr) return false;
  *out = PyFloat_AS_DOUBLE(f);
  Py_DECREF(f);
  return true;
}

// Fills `shape` from a tuple (torch.Size included), list or other sequence of ints.
bool ArgShape(PyObject* o, std::vector<int64_t>* shape) {
  if (PyTuple_Check(o)) {  // torch.Size is a tuple subclass, which PySequence_Fast would copy
    const Py_ssize_t n = PyTuple_GET_SIZE(o);
    shape->resize(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (!ArgInt(PyTuple_GET_ITEM(o, i), &(*shape)[static_cast<size_t>(i)])) return false;
    }
    return true;
  }
  PyObject* seq = PySequence_Fast(o, "shape must be a sequence of integers");
  if (seq == nullptr) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  shape->resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!ArgInt(items[i], &(*shape)[static_cast<size_t>(i)])) {
      Py_DECREF(seq);
      return false;
    }
  }
  Py_DECREF(seq);
  return true;
}

// Reads (data, dtype, shape, device) into `t`; `shape` backs t->shape. A null `device` is
// the host (-1).
bool ArgTensor(PyObject* data, PyObject* dtype, PyObject* shape, PyObject* device,
               std::vector<int64_t>* shape_store, chorus_tensor_t* t) {
  unsigned long long d = PyLong_AsUnsignedLongLong(data);
  if (d == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return false;
  int64_t dt = 0, dev = -1;
  if (!ArgInt(dtype, &dt) || !ArgShape(shape, shape_store) ||
      (device != nullptr && !ArgInt(device, &dev))) {
    return false;
  }
  t->data = reinterpret_cast<void*>(static_cast<uintptr_t>(d));
  t->dtype = static_cast<int32_t>(dt);
  t->ndim = static_cast<int32_t>(shape_store->size());
  t->shape = shape_store->data();
  t->device = static_cast<int32_t>(dev);
  return true;
}

// Sets the Python error for a failed C ABI call (see Raise) and returns nullptr.
PyObject* SetChorusError(int code) {
  try {
    Raise(code, chorus_last_error());
  } catch (py::error_already_set& e) {
    e.restore();
  }
  return nullptr;
}

// release_status(handle) -> None when the op succeeded, else (code, message). Waits for the op
// (without the GIL unless it has already completed) and frees its result; raises only when no
// result exists (unknown handle), like release.
PyObject* ReleaseStatus(PyObject*, PyObject* arg) {
  int64_t handle = 0;
  if (!ArgInt(arg, &handle)) return nullptr;
  // A completed op is released without giving up the GIL (the common case in a synchronize
  // loop); only a wait releases it.
  int released = 0;
  int code = chorus_release_status(handle, /*block=*/0, &released);
  if (code == 0 && released == 0) {
    py::gil_scoped_release release;
    code = chorus_release_status(handle, /*block=*/1, &released);
  }
  if (released == 0) {  // no result: an unknown handle
    try {
      Raise(code != 0 ? code : 13, chorus_last_error());
    } catch (py::error_already_set& e) {
      e.restore();
    }
    return nullptr;
  }
  if (code == 0) Py_RETURN_NONE;
  return Py_BuildValue("(is)", code, chorus_last_error());
}

PyObject* ChorusErrorType() { return g_error; }

}  // namespace chorus_python

namespace {

using chorus_python::ArgDouble;
using chorus_python::ArgInt;
using chorus_python::ArgTensor;
using chorus_python::ReleaseStatus;
using chorus_python::SetChorusError;

// enqueue_op(type, name, data, dtype, shape, device, reduce_op, prescale, postscale, root_rank,
//            process_set_id, output[, stream]) -> handle. output: None or (data, dtype, shape,
// device); stream: the producing cudaStream_t of GPU tensors (default 0). An empty name
// submits no name. Raises like enqueue.
PyObject* EnqueueOp(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 12 && nargs != 13) {
    PyErr_SetString(PyExc_TypeError, "enqueue_op takes 12 or 13 positional arguments");
    return nullptr;
  }
  chorus_op_t op;
  chorus_op_init(&op);
  int64_t type = 0, reduce_op = 0, root_rank = 0, set_id = 0;
  if (!ArgInt(args[0], &type)) return nullptr;
  Py_ssize_t name_len = 0;
  const char* name = PyUnicode_AsUTF8AndSize(args[1], &name_len);
  if (name == nullptr) return nullptr;
  std::vector<int64_t> in_shape, out_shape;
  if (!ArgTensor(args[2], args[3], args[4], args[5], &in_shape, &op.input)) return nullptr;
  if (!ArgInt(args[6], &reduce_op) || !ArgDouble(args[7], &op.prescale_factor) ||
      !ArgDouble(args[8], &op.postscale_factor) || !ArgInt(args[9], &root_rank) ||
      !ArgInt(args[10], &set_id)) {
    return nullptr;
  }
  PyObject* out = args[11];
  if (out != Py_None) {
    if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) != 4) {
      PyErr_SetString(PyExc_TypeError, "output must be None or (data, dtype, shape, device)");
      return nullptr;
    }
    if (!ArgTensor(PyTuple_GET_ITEM(out, 0), PyTuple_GET_ITEM(out, 1), PyTuple_GET_ITEM(out, 2),
                   PyTuple_GET_ITEM(out, 3), &out_shape, &op.output)) {
      return nullptr;
    }
  }
  op.type = static_cast<int32_t>(type);
  op.name = name_len == 0 ? nullptr : name;
  op.reduce_op = static_cast<int32_t>(reduce_op);
  op.root_rank = static_cast<int32_t>(root_rank);
  op.process_set_id = static_cast<int32_t>(set_id);
  if (nargs == 13) {
    int64_t stream = 0;
    if (!ArgInt(args[12], &stream)) return nullptr;
    op.stream = reinterpret_cast<void*>(static_cast<uintptr_t>(stream));
  }
  chorus_handle_t handle = 0;
  int code = chorus_enqueue(&op, nullptr, nullptr, &handle);
  if (code != 0) return SetChorusError(code);
  return PyLong_FromLongLong(handle);
}

PyMethodDef g_fast_methods[] = {
    {"enqueue_op", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&EnqueueOp)),
     METH_FASTCALL,
     "enqueue_op(type, name, data, dtype, shape, device, reduce_op, prescale, "
     "postscale, root_rank, process_set_id, output[, stream]) -> handle"},
    {"release_status", &ReleaseStatus, METH_O,
     "release_status(handle) -> None on success, else (code, message)"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "chorus C ABI bindings (internal; use chorus.torch)";

  g_error = PyErr_NewException("chorus._C.ChorusError", PyExc_RuntimeError, nullptr);
  py::tuple bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError));
  g_value_error = PyErr_NewException("chorus._C.ChorusValueError", bases.ptr(), nullptr);
  m.add_object("ChorusError", py::handle(g_error));
  m.add_object("ChorusValueError", py::handle(g_value_error));
  chorus_python::AddConstants(m);

  py::class_<TensorSpec>(m, "TensorSpec")
      .def(py::init([](uintptr_t data, int32_t dtype, std::vector<int64_t> shape, int32_t device) {
             return TensorSpec{data, dtype, std::move(shape), device};
           }),
           py::arg("data") = 0, py::arg("dtype") = 7, py::arg("shape") = std::vector<int64_t>{},
           py::arg("device") = -1)
      .def_readwrite("data", &TensorSpec::data)
      .def_readwrite("dtype", &TensorSpec::dtype)
      .def_readwrite("shape", &TensorSpec::shape)
      .def_readwrite("device", &TensorSpec::device);

  py::class_<OpSpec>(m, "OpSpec")
      .def(py::init<>())
      .def_readwrite("type", &OpSpec::type)
      .def_readwrite("name", &OpSpec::name)
      .def_readwrite("input", &OpSpec::input)
      .def_readwrite("output", &OpSpec::output)
      .def_readwrite("reduce_op", &OpSpec::reduce_op)
      .def_readwrite("prescale_factor", &OpSpec::prescale_factor)
      .def_readwrite("postscale_factor", &OpSpec::postscale_factor)
      .def_readwrite("root_rank", &OpSpec::root_rank)
      .def_readwrite("process_set_id", &OpSpec::process_set_id)
      .def_readwrite("splits", &OpSpec::splits)
      .def_readwrite("process_set_ranks", &OpSpec::process_set_ranks)
      .def_readwrite("stream", &OpSpec::stream);

  py::class_<Result>(m, "Result")
      .def_property_readonly("code", &Result::code)
      .def_property_readonly("message", &Result::message)
      .def_property_readonly("output_shape", &Result::output_shape)
      .def_property_readonly("received_splits", &Result::received_splits)
      .def_property_readonly("last_joined_rank", &Result::last_joined_rank)
      .def_property_readonly("process_set_id", &Result::process_set_id)
      .def("take", &Result::take);

  m.def("init", &Init, py::arg("process_sets") = std::vector<std::vector<int32_t>>{},
        py::arg("comm") = 0);
  m.def(
      "shutdown",
      [](const std::string& cause) {
        CallWithoutGil([&] { return chorus_shutdown_because(cause.c_str()); });
      },
      py::arg("cause") = "",
      "Stops chorus; `cause` (why this process stops) reaches the other ranks' failed ops");
  m.def(
      "suspend", [] { CallWithoutGil(&chorus_suspend); },
      "Stops the background loop, keeping the runtime, until reform() (see chorus_suspend)");
  m.def(
      "reform", [] { CallWithoutGil(&chorus_reform); },
      "Re-forms the runtime in place over the world the environment describes now (see "
      "chorus_reform)");
  m.def(
      "elastic_worker", [] { return chorus_elastic_worker() == 1; },
      "True once an init ran with CHORUS_ELASTIC_WORKER_ID set (chorusrun's elastic mode)");
  m.def(
      "elastic_take_host_updates",
      [] {
        int64_t timestamp_us = 0;
        int32_t result = 0;
        Check(chorus_elastic_take_host_updates(&timestamp_us, &result));
        return py::make_tuple(timestamp_us, result);
      },
      "(newest timestamp in us or 0, union of HostUpdateResult bits) of the host updates "
      "chorusrun announced since the last call");
  m.def("elastic_adopt_next", &ElasticAdoptNext, py::arg("timeout_s"),
        "After a shutdown: waits for chorusrun's next generation and sets this worker's "
        "variables for it (C environment); returns the generation");
  m.def("elastic_adopted_env", &ElasticAdoptedEnv,
        "{name: value} of the variables this worker last adopted ({} if none)");
  m.def("is_initialized", [] { return chorus_is_initialized() == 1; });
  m.def("topology", &Topology);
  m.def("controller_name", [] { return std::string(chorus_controller_name()); });
  m.def(
      "metrics_json", [] { return std::string(chorus_metrics_json()); },
      "this process's collectives so far, by op, as JSON (docs/metrics.md); '' before init");
  m.def(
      "cuda_built", [] { return chorus_cuda_built() != 0; },
      "True when this build has the GPU data plane (CUDA + NCCL)");
  m.def(
      "nccl_version", [] { return chorus_nccl_version(); },
      "NCCL_VERSION_CODE of the NCCL this build was compiled with; 0 without the GPU data plane");
  m.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        int code = 0;
        {
          py::gil_scoped_release release;  // waits for the background loop's next cycle
          code = chorus_start_timeline(path.c_str(), mark_cycles ? 1 : 0);
        }
        Check(code);
      },
      py::arg("path"), py::arg("mark_cycles") = false);
  m.def("stop_timeline", [] {
    int code = 0;
    {
      py::gil_scoped_release release;
      code = chorus_stop_timeline();
    }
    Check(code);
  });
  m.def("enqueue", &Enqueue, py::arg("op"));
  m.def("enqueue_group", &EnqueueGroup, py::arg("ops"));
  m.def("poll", &Poll, py::arg("handle"));
  m.def("wait", &Wait, py::arg("handle"));
  m.def("release", &Release, py::arg("handle"));
  for (PyMethodDef* def = g_fast_methods; def->ml_name != nullptr; ++def) {
    py::object fn = py::reinterpret_steal<py::object>(PyCFunction_NewEx(def, nullptr, m.ptr()));
    if (!fn) throw py::error_already_set();
    m.add_object(def->ml_name, fn);
  }
  chorus_python::RegisterDlpack(m);
  chorus_python::RegisterTorchFastPath(m);
}
