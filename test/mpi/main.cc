// Catch2 runner for the MPI tier: every rank runs the same test cases in the same order (the
// tests are collective). Rank 0 prints the full console report; the other ranks use the compact
// reporter (one line per failure plus a summary) unless -r was given. The exit code is the
// worst over all ranks, so the job fails when any rank failed (77, skipped, only when every rank
// skipped every case it ran).
#include <string>

#include <mpi.h>

#include "chorus/chorus.h"
#include "ops/mpi/mpi_datatypes.h"
#include "test/support/catch_session.h"

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  chorus::testing::CatchRunOptions options;
  options.name = "rank " + std::to_string(rank);
  options.compact = rank != 0;
  options.no_colour = true;  // mpirun forwards output through a pty: colour codes litter logs
  const int result = chorus::testing::RunCatch(argc, argv, options);

  // A failure on any rank fails the run; it is skipped only where every rank skipped it all.
  const int failure = result == chorus::testing::kSkipped ? 0 : result;
  const int skipped = result == chorus::testing::kSkipped ? 1 : 0;
  int worst = 0, all_skipped = 0;
  MPI_Allreduce(&failure, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&skipped, &all_skipped, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (worst == 0 && all_skipped == 1) worst = chorus::testing::kSkipped;
  // The runtime's background thread uses MPI until it is shut down.
  (void)chorus::Shutdown();
  chorus::ops::FreeMpiCustomOps();
  MPI_Finalize();
  return worst;
}
