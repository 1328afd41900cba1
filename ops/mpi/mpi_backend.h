// File: ops/mpi/mpi_backend.h
//
// CollectiveBackend over one MPI communicator (the CPU data plane under mpirun).
// float16 and bfloat16 reductions use custom MPI ops (ops/mpi/mpi_datatypes.h); message sizes
// above INT_MAX elements are split into several calls. Thread-compatible: background thread
// only (the runtime's only MPI caller after init).
#ifndef CHORUS_OPS_MPI_MPI_BACKEND_H_
#define CHORUS_OPS_MPI_MPI_BACKEND_H_

#include <mpi.h>

#include "ops/collective_backend.h"

namespace chorus::ops {

class MpiBackend : public CollectiveBackend {
 public:
  // Uses `comm`; frees it with MPI_Comm_free at destruction when `owned`.
  // REQUIRES: MPI is initialised and `comm` is valid.
  MpiBackend(MPI_Comm comm, bool owned);
  ~MpiBackend() override;
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  MPI_Comm comm() const { return comm_; }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "MPI"; }
  // Run and the collectives it calls (ops/collective_backend.h).
  CHORUS_TRANSPORT_COLLECTIVES();

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace chorus::ops

#endif  // CHORUS_OPS_MPI_MPI_BACKEND_H_
