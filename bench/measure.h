// File: bench/measure.h
//
// Timing and cross-rank agreement helpers shared by the chorus_bench subcommands. Everything
// here calls MPI on MPI_COMM_WORLD from the calling thread: call it from the benchmark's main
// thread only, and only while no chorus op is in flight (chorus's background thread uses its
// own duplicated communicators, so world collectives then cannot interleave with its traffic).
// Every function is collective over MPI_COMM_WORLD unless it says otherwise.
#ifndef CHORUS_BENCH_MEASURE_H_
#define CHORUS_BENCH_MEASURE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <mpi.h>

#include "base/status_macros.h"
#include "ops/mpi/mpi_datatypes.h"

namespace chorus::bench {

// Order statistics of a sample, in the sample's unit.
struct Summary {
  double median = 0;
  double p10 = 0;
  double p90 = 0;
  double min = 0;
  double max = 0;
};

// Linear-interpolated percentiles of `samples` (taken by value: sorted in place). Local.
// REQUIRES: !samples.empty().
Summary Summarize(std::vector<double> samples);

// Element-wise maximum over all ranks of `local` (same length on every rank).
absl::StatusOr<std::vector<double>> MaxOverRanks(const std::vector<double>& local);

// True on every rank when `local_ok` is true on every rank.
absl::StatusOr<bool> AllRanksOk(bool local_ok);

int WorldRank();
int WorldSize();

// Runs `body` once between an MPI_Barrier and a second MPI_Wtime and returns the elapsed
// seconds on this rank; body's error is returned as is (then the ranks may disagree).
template <typename Body>
absl::StatusOr<double> TimeOnce(Body&& body) {
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Barrier(MPI_COMM_WORLD));
  const double start = MPI_Wtime();
  CHORUS_RETURN_IF_ERROR(body());
  return MPI_Wtime() - start;
}

// Writes `text` to `path`. Local. Errors: Unavailable when the file cannot be written.
absl::Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace chorus::bench

#endif  // CHORUS_BENCH_MEASURE_H_
