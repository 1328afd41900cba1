// The numeric codes the Python package passes through the C ABI (chorus_op_t.type, .reduce_op,
// chorus_tensor_t.dtype), exported once as dicts of _C so that no Python file or fast path
// repeats the values of chorus/types.h.
#ifndef CHORUS_BINDINGS_PYTHON_CONSTANTS_H_
#define CHORUS_BINDINGS_PYTHON_CONSTANTS_H_

#include "pybind11/pybind11.h"

namespace chorus_python {

// Adds to `m`: OP_TYPES {"allreduce": 0, ...}, REDUCE_OPS {"Sum": 0, ..., "Adasum": 5} and
// DTYPES {"uint8": 0, ..., "bool": 9}, the names being Horovod's (reduce ops) and torch's
// (dtypes) spellings.
void AddConstants(pybind11::module_& m);

}  // namespace chorus_python

#endif  // CHORUS_BINDINGS_PYTHON_CONSTANTS_H_
