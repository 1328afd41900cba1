// DLPack (https://github.com/dmlc/dlpack, v0.8 ABI, unversioned DLManagedTensor) for chorus._C,
// and the registration of chorus._C's DLPack functions.
//
// The struct definitions are written out here because the system ships no dlpack.h; they match
// dlpack/dlpack.h v0.8 field for field (and share its include guard, so the two cannot both be
// defined in one translation unit).
//
// Capsule protocol (the Python array API's __dlpack__): a producer returns a PyCapsule named
// "dltensor" holding a DLManagedTensor*. A consumer renames it "used_dltensor" and from then on
// owns the tensor: it calls `deleter` once when done. The capsule's destructor calls `deleter`
// only while the capsule is still named "dltensor" (never consumed).
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#include <cstdint>

#define DLPACK_VERSION 80
#define DLPACK_ABI_VERSION 1

extern "C" {

typedef enum : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
} DLDataTypeCode;

typedef struct {
  uint8_t code;  // a DLDataTypeCode
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL = compact row-major
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

}  // extern "C"

#endif  // DLPACK_DLPACK_H_

#ifndef CHORUS_BINDINGS_PYTHON_SRC_DLPACK_H_
#define CHORUS_BINDINGS_PYTHON_SRC_DLPACK_H_

#include "pybind11/pybind11.h"

namespace chorus_python {

// Adds to `m` (chorus._C, which must already have its Result class):
//   tensor_from_dlpack(capsule, dtype=-1) -> (data, dtype, shape, device, keepalive)
//   result_to_dlpack(result, dtype) -> "dltensor" capsule
//   DlpackTensor: the type of `keepalive`.
// See dlpack.cc for their contracts.
void RegisterDlpack(pybind11::module_& m);

}  // namespace chorus_python

#endif  // CHORUS_BINDINGS_PYTHON_SRC_DLPACK_H_
