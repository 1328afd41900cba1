# CUDA/NCCL detection for CHORUS_WITH_CUDA=AUTO|ON|OFF. Sets CHORUS_HAVE_CUDA.
# The GPU data plane itself (ops/nccl, ops/cuda) arrives with the GPU issue; this file only
# decides whether it can be built here.
set(CHORUS_HAVE_CUDA OFF)
if(NOT CHORUS_WITH_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "CHORUS_WITH_CUDA must be AUTO, ON or OFF, not '${CHORUS_WITH_CUDA}'")
endif()
if(NOT CHORUS_WITH_CUDA STREQUAL "OFF")
  # FindCUDAToolkit looks under CUDAToolkit_ROOT (and nvcc on PATH); default to /usr/local/cuda.
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  find_library(CHORUS_NCCL_LIBRARY nccl
    HINTS /usr/local/cuda/lib /usr/local/cuda/lib64 ${CUDAToolkit_LIBRARY_DIR})
  find_path(CHORUS_NCCL_INCLUDE_DIR nccl.h
    HINTS /usr/local/cuda/include ${CUDAToolkit_INCLUDE_DIRS})
  if(CUDAToolkit_FOUND AND CHORUS_NCCL_LIBRARY AND CHORUS_NCCL_INCLUDE_DIR)
    set(CHORUS_HAVE_CUDA ON)
    message(STATUS "chorus: CUDA ${CUDAToolkit_VERSION} and NCCL (${CHORUS_NCCL_LIBRARY}) found")
  elseif(CHORUS_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "CHORUS_WITH_CUDA=ON but CUDA (${CUDAToolkit_FOUND}) or NCCL "
                        "(${CHORUS_NCCL_LIBRARY}, ${CHORUS_NCCL_INCLUDE_DIR}) was not found")
  else()
    message(STATUS "chorus: CUDA/NCCL not found; building the CPU data plane only")
  endif()
endif()
