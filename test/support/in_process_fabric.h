// File: test/support/in_process_fabric.h
//
// N simulated ranks in one process, for the unit tier: InProcessFabric hands out one
// runtime::Controller per rank; each rank drives its controller (and the backends it creates)
// from its own thread, exactly as a real rank's background thread would. Collectives meet in
// shared memory: each call blocks until every member of the communicator has made the matching
// call (the k-th collective call of a communicator on every member), computes its result from
// all members' buffers, and returns only when every member has read them.
//
// Topology: `host_of_rank[r]` is the simulated host of rank r (default: all on host 0), from
// which local/cross ranks are derived as MPI's split would.
//
// Fault injection: Kill(rank) makes every later (and every currently blocked) collective of
// every other rank return Unavailable naming the lost rank, so error paths are tested without
// sleeps or timeouts.
//
// Thread-safety: InProcessFabric is thread-safe; each Controller/Backend is used by one thread.
#ifndef CHORUS_TEST_SUPPORT_IN_PROCESS_FABRIC_H_
#define CHORUS_TEST_SUPPORT_IN_PROCESS_FABRIC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/controller.h"

namespace chorus::testing {

class InProcessFabric {
 public:
  explicit InProcessFabric(int world_size, std::vector<int> host_of_rank = {});
  ~InProcessFabric();
  InProcessFabric(const InProcessFabric&) = delete;
  InProcessFabric& operator=(const InProcessFabric&) = delete;

  int world_size() const;

  // The controller of `rank`. Call once per rank (per runtime instance). The fabric must
  // outlive every controller and backend it created.
  std::unique_ptr<runtime::Controller> CreateController(int rank);

  // Simulates the death of `rank` (see above).
  void Kill(int rank);

  // Collective calls made so far on backends of CreateGroupBackend (each member's call counts
  // once): whether hierarchical collectives ran.
  int64_t group_collectives() const;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace chorus::testing

#endif  // CHORUS_TEST_SUPPORT_IN_PROCESS_FABRIC_H_
