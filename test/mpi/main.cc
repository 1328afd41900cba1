// Catch2 runner for the MPI tier: every rank runs the same test cases in the same order (the
// tests are collective). Rank 0 prints the full console report; the other ranks use the compact
// reporter (one line per failure plus a summary) unless -r was given. The exit code is the
// worst over all ranks, so the job fails when any rank failed.
#define CATCH_CONFIG_RUNNER
#include <string>

#include <catch2/catch.hpp>
#include <mpi.h>

#include "chorus/chorus.h"
#include "ops/mpi/mpi_datatypes.h"

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  Catch::Session session;
  int result = session.applyCommandLine(argc, argv);
  if (result == 0) {
    if (rank != 0 && session.configData().reporterName == "console") {
      session.configData().reporterName = "compact";
    }
    // mpirun forwards output through a pty: colour codes would litter logs.
    if (session.configData().useColour == Catch::UseColour::Auto) {
      session.configData().useColour = Catch::UseColour::No;
    }
    session.configData().name = "rank " + std::to_string(rank);
    result = session.run();
  }

  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  // The runtime's background thread uses MPI until it is shut down.
  (void)chorus::Shutdown();
  chorus::ops::FreeMpiCustomOps();
  MPI_Finalize();
  return worst;
}
