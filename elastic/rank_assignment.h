// File: elastic/rank_assignment.h
//
// Ranks for the next generation of an elastic job. Input: the previous generation's workers
// (host, slot, rank, and whether each is still alive) and the new ordered host list
// (elastic/host_set.h, blacklisted hosts already filtered out). Rules:
//
// 1. A survivor is a previous worker that is alive, whose host is still listed, and whose slot
//    is below the host's new slot count. Survivors take the lowest ranks, in their previous
//    rank order: rank 0 stays rank 0 unless it died; then the lowest surviving rank becomes 0.
//    A survivor keeps its slot.
// 2. Free slots get the following ranks: hosts in list order, each host's free slots in
//    increasing slot order.
// 3. --max-np caps the world: past it, free slots stay empty and, should the survivors alone
//    exceed it, those with the highest previous ranks are released.
// 4. local_rank: the worker's index among its host's workers ordered by slot; local_size: their
//    count. cross_rank: among the hosts (in list order) with a worker of this local_rank, the
//    index of this worker's host; cross_size: how many such hosts (horovodrun's numbers; with no
//    previous generation the result equals LayoutRanks).
//
//   previous  a:0 r0 dead, a:1 r1, b:0 r2, b:1 r3      hosts [a:2, b:2, c:1]
//   next      a:1 r0 (was 1), b:0 r1 (was 2), b:1 r2 (was 3), a:0 r3, c:0 r4
//
// Keeping each survivor's slot keeps its local_rank (and so its GPU) unless a lower slot of its
// host stays empty.
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_ELASTIC_RANK_ASSIGNMENT_H_
#define CHORUS_ELASTIC_RANK_ASSIGNMENT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "elastic/host_set.h"

namespace chorus::elastic {

// Where one rank runs, and its numbers (horovodrun's get_host_assignments):
//
//   -H a:2,b:1 -np 3   rank 0: a local 0/2 cross 0/2   rank 1: a local 1/2 cross 0/1
//                      rank 2: b local 0/1 cross 1/2
//
// local_rank/local_size: the rank's index among the ranks on its host, and their count.
// cross_rank/cross_size: among the hosts that have a rank with this local_rank, the index of
// this rank's host (in host order) and their count.
struct RankPlacement {
  std::string host;  // as the host list names it
  int rank = 0;
  int size = 0;
  int local_rank = 0;
  int local_size = 0;
  int cross_rank = 0;
  int cross_size = 0;

  friend bool operator==(const RankPlacement&, const RankPlacement&) = default;
};

struct PreviousWorker {
  std::string host;
  int slot = 0;  // its slot on the host
  int rank = 0;
  bool alive = true;  // false: it exited or failed

  friend bool operator==(const PreviousWorker&, const PreviousWorker&) = default;
};

struct WorkerAssignment {
  RankPlacement placement;           // host, rank, size, local and cross numbers
  int slot = 0;                      // the slot it occupies on its host
  std::optional<int> previous_rank;  // set for a survivor

  friend bool operator==(const WorkerAssignment&, const WorkerAssignment&) = default;
};

struct RankLimits {
  int min_np = 1;
  std::optional<int> max_np;  // nullopt: every slot is used
};

struct RankAssignment {
  std::vector<WorkerAssignment> workers;  // by rank
  // Alive previous workers without a place in this generation (host gone or blacklisted, slot
  // removed, over --max-np), by previous rank: the driver stops them.
  std::vector<PreviousWorker> released;
  bool min_np_met = false;  // workers.size() >= min_np
};

// InvalidArgument when min_np < 1, max_np < min_np, a host is listed twice or has fewer than 1
// slot, or two previous workers share a rank or a (host, slot), or one has a negative rank or
// slot.
absl::StatusOr<RankAssignment> AssignRanks(const std::vector<PreviousWorker>& previous,
                                           const std::vector<HostSlots>& hosts,
                                           const RankLimits& limits);

// The ranks of a job without a previous generation that uses exactly `num_proc` slots: ranks
// fill the hosts in order, each host's slots in order (AssignRanks with min_np = max_np =
// num_proc). InvalidArgument when num_proc < 1, a host has fewer than 1 slot or is listed twice,
// or the slots add up to fewer than num_proc.
absl::StatusOr<std::vector<RankPlacement>> LayoutRanks(const std::vector<HostSlots>& hosts,
                                                       int num_proc);

// Sets size, local and cross numbers of `workers` (in rank order, their placement.rank already
// set, hosts and slots distinct) as rule 4 above says, with hosts ordered as in `hosts` (hosts
// not listed there come after, by name).
void NumberWorkers(const std::vector<HostSlots>& hosts, std::vector<WorkerAssignment>& workers);

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_RANK_ASSIGNMENT_H_
