// File: test/mpi/world.h
//
// This process's place in MPI_COMM_WORLD, for the MPI-tier tests that drive MPI directly.
#ifndef CHORUS_TEST_MPI_WORLD_H_
#define CHORUS_TEST_MPI_WORLD_H_

#include <mpi.h>

namespace chorus::testing {

inline int WorldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int WorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace chorus::testing

#endif  // CHORUS_TEST_MPI_WORLD_H_
