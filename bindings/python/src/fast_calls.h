// The pieces of chorus._C's raw CPython calls (METH_FASTCALL, vectorcall) that more than one
// file uses: argument readers, error raising and op release. The per-op calls skip pybind11's
// dispatch, which costs about as much as the op itself (see torch_fast_path.cc).
//
// Thread-safety: every function needs the GIL.
#ifndef CHORUS_BINDINGS_PYTHON_FAST_CALLS_H_
#define CHORUS_BINDINGS_PYTHON_FAST_CALLS_H_

#include <Python.h>

#include <cstdint>
#include <vector>

#include "pybind11/pybind11.h"

#include "chorus/c_api.h"

namespace chorus_python {

// Reads an int argument; false with a Python error set when `o` is no integer.
bool ArgInt(PyObject* o, int64_t* out);
// float(o), as Python's float() would convert it; false with a Python error set.
bool ArgDouble(PyObject* o, double* out);
// Reads (data, dtype, shape, device) into `t`; `shape_store` backs t->shape. A null `device`
// is the host (-1). False with a Python error set.
bool ArgTensor(PyObject* data, PyObject* dtype, PyObject* shape, PyObject* device,
               std::vector<int64_t>* shape_store, chorus_tensor_t* t);

// Sets the Python exception of a failed C ABI call made on this thread (ChorusError with
// `.code`, ChorusValueError for InvalidArgument) and returns nullptr.
PyObject* SetChorusError(int code);
// chorus._C.ChorusError (borrowed).
PyObject* ChorusErrorType();

// release_status(handle) -> None when the op succeeded, else (code, message). Waits for the op
// (without the GIL unless it has already completed) and frees its result; raises only when no
// result exists (unknown handle).
PyObject* ReleaseStatus(PyObject* module, PyObject* handle);

// Adds chorus.torch's fast path (setup_torch_fast_path, front_door) to the module.
void RegisterTorchFastPath(pybind11::module_& m);

}  // namespace chorus_python

#endif  // CHORUS_BINDINGS_PYTHON_FAST_CALLS_H_
