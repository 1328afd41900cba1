// File: ops/cuda/batched_copy_reference.h
//
// The reference executor of a BatchedCopyPlan: runs every chunk on the host, element by
// element, with the CPU path's kernels (ops/cpu/reduce_kernels.h). It defines what the device
// kernel (ops/cuda/batched_copy.h) must produce, bit for bit except for NaN payloads (see
// ops/cuda/batched_copy_plan.h), and is the oracle of the unit and GPU tests. Not for
// production use: it is a plain loop on one thread.
//
// Thread-safety: stateless.
#ifndef CHORUS_OPS_CUDA_BATCHED_COPY_REFERENCE_H_
#define CHORUS_OPS_CUDA_BATCHED_COPY_REFERENCE_H_

#include "ops/cuda/batched_copy_plan.h"

namespace chorus::ops::gpu {

// Executes `plan` on the host. REQUIRES: the plan was built for host pointers, which are valid
// for the planned ranges.
void RunBatchedCopyOnHost(const BatchedCopyPlan& plan);

}  // namespace chorus::ops::gpu

#endif  // CHORUS_OPS_CUDA_BATCHED_COPY_REFERENCE_H_
