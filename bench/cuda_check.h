// File: bench/cuda_check.h
//
// Failure handling of the CUDA benchmarks: a benchmark has nothing to recover, so a failed
// CUDA call or Status ends the process with status 1 and a message naming the binary and the
// call that failed.
//
//   BENCH_CUDA(cudaEventCreate(&start));
//   Check(PlanBatchedCopy(entries, 1.0, options, &plan), "PlanBatchedCopy");
//
// Thread-safety: stateless.
#ifndef CHORUS_BENCH_CUDA_CHECK_H_
#define CHORUS_BENCH_CUDA_CHECK_H_

#include <cerrno>  // program_invocation_short_name (glibc)
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include <cuda_runtime_api.h>

namespace chorus::bench {

inline void Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s: %s (%s)\n", program_invocation_short_name, what,
               cudaGetErrorName(err), cudaGetErrorString(err));
  std::exit(1);
}

inline void Check(const absl::Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
               status.ToString().c_str());
  std::exit(1);
}

}  // namespace chorus::bench

#define BENCH_CUDA(call) ::chorus::bench::Check((call), #call)

#endif  // CHORUS_BENCH_CUDA_CHECK_H_
