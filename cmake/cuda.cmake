# CUDA/NCCL detection for CHORUS_WITH_CUDA=AUTO|ON|OFF. Sets CHORUS_HAVE_CUDA.
# When it is ON, the CUDA language is enabled for ops/cuda (kernels) and test/gpu.
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
    # The CUDA language for ops/cuda. Ampere and Hopper unless the user chose
    # (-DCMAKE_CUDA_ARCHITECTURES=...); nvcc 13 dropped everything before Turing.
    if(NOT DEFINED CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to build for")
    endif()
    # CMake 3.25 knows nvcc's standards only up to C++17.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    # The shared runtime, as the frameworks use: one CUDA runtime per process.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(CMAKE_CUDA_VISIBILITY_PRESET hidden)
    enable_language(CUDA)
  elseif(CHORUS_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "CHORUS_WITH_CUDA=ON but CUDA (${CUDAToolkit_FOUND}) or NCCL "
                        "(${CHORUS_NCCL_LIBRARY}, ${CHORUS_NCCL_INCLUDE_DIR}) was not found")
  else()
    message(STATUS "chorus: CUDA/NCCL not found; building the CPU data plane only")
  endif()
endif()
