#include "bench/measure.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include <mpi.h>

#include "ops/mpi/mpi_datatypes.h"

namespace chorus::bench {
namespace {

// Percentile `q` in [0, 1] of sorted, non-empty `s`, interpolating between neighbours.
double Percentile(const std::vector<double>& s, double q) {
  const double pos = q * static_cast<double>(s.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return s[lo] + (s[hi] - s[lo]) * frac;
}

}  // namespace

Summary Summarize(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  Summary s;
  s.median = Percentile(samples, 0.5);
  s.p10 = Percentile(samples, 0.1);
  s.p90 = Percentile(samples, 0.9);
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

absl::StatusOr<std::vector<double>> MaxOverRanks(const std::vector<double>& local) {
  std::vector<double> out(local.size());
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Allreduce(local.data(), out.data(), static_cast<int>(local.size()),
                                           MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

absl::StatusOr<bool> AllRanksOk(bool local_ok) {
  int mine = local_ok ? 1 : 0;
  int all = 0;
  CHORUS_MPI_RETURN_IF_ERROR(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return all == 1;
}

int WorldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int WorldSize() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write \"", path, "\""));
  return absl::OkStatus();
}

}  // namespace chorus::bench
