// File: ops/hierarchical/hierarchy_layout.h
//
// The decisions of hierarchical allreduce and allgather (Horovod's HOROVOD_HIERARCHICAL_*), as
// pure functions: which host each rank runs on (from the local and cross numbers every rank
// has), whether a process set can run hierarchically (its layout), and, per collective call,
// whether it does. The composition that runs them is HierarchicalBackend
// (ops/hierarchical/hierarchical_backend.h); why and what it costs: docs/hierarchical.md.
//
// Thread-safety: stateless functions over plain values.
#ifndef CHORUS_OPS_HIERARCHICAL_HIERARCHY_LAYOUT_H_
#define CHORUS_OPS_HIERARCHICAL_HIERARCHY_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace chorus::ops {

// One rank's numbers, as the launcher (chorusrun, in both launch modes and every elastic
// generation) or MPI (MPI_Comm_split_type SHARED, then a split by local rank) gives them:
// local_rank/local_size among the ranks of its host; cross_rank/cross_size among the hosts that
// have a rank with this local_rank, in one host order.
struct RankPlace {
  int32_t local_rank = 0;
  int32_t local_size = 1;
  int32_t cross_rank = 0;
  int32_t cross_size = 1;
  friend bool operator==(const RankPlace&, const RankPlace&) = default;
};

// The host of every rank (places[r] is rank r's): hosts are numbered by the cross_rank of their
// local rank 0 (every host has one), and the rank with local rank k and cross rank c runs on the
// c-th host, in that order, of those with more than k ranks. That is how both chorusrun and MPI
// number them (one host order for every local rank), and in a layout where every host runs the
// same number of ranks it is simply the cross rank.
// InvalidArgument, saying what is inconsistent, when the numbers do not describe hosts (a
// local rank 0 missing, two ranks in one place, a host whose ranks disagree on its size).
absl::StatusOr<std::vector<int32_t>> HostsOfRanks(absl::Span<const RankPlace> places);

// A process set laid out as a grid of hosts x ranks per host. Hosts are numbered by their
// lowest set rank; a member's local index is its position among its host's members in set-rank
// order. So the members with local index 0, in set-rank order, are the hosts in host order.
struct HierarchyLayout {
  int32_t local_size = 1;       // members per host
  int32_t cross_size = 1;       // hosts
  std::vector<int32_t> host;    // [set rank] -> host, 0 .. cross_size - 1
  std::vector<int32_t> local;   // [set rank] -> local index, 0 .. local_size - 1
  std::vector<int32_t> member;  // [host * local_size + local index] -> set rank
  // member[i] == i: each host's members are consecutive set ranks, hosts in order (chorusrun's
  // first generation, mpirun by slot). Allgather then needs no reordering.
  bool host_major = true;
};

struct HierarchyPlan {
  enum class Kind {
    kHierarchical,   // several hosts, several members on each, the same number on every one
    kSingleHost,     // all members on one host: the flat algorithm is the local one
    kOnePerHost,     // one member per host: the flat algorithm is the cross one
    kHeterogeneous,  // hosts run different numbers of members: flat (Horovod's condition)
    kUnknownHosts,   // the ranks' local and cross numbers do not describe hosts: flat
  };
  Kind kind = Kind::kSingleHost;
  HierarchyLayout layout;  // kHierarchical only
  // kHeterogeneous, kUnknownHosts: why, for the one warning ("2 hosts run 3 and 1 of its
  // ranks", ...).
  std::string reason;
};

// The plan of a process set whose member i (set rank i) runs on host host_of_member[i] (any
// host ids, e.g. from HostsOfRanks).
HierarchyPlan PlanHierarchy(absl::Span<const int32_t> host_of_member);

// Which algorithm one collective call runs. `enabled`: the configuration asks for the
// hierarchical one (CHORUS_HIERARCHICAL_ALLREDUCE / _ALLGATHER, read per batch).
enum class CollectiveAlgorithm { kFlat, kHierarchical };

// An allreduce of `count` elements (one piece of a fused batch) is hierarchical when enabled,
// the set's plan is kHierarchical and every member of a host gets at least one element of the
// reduce-scatter (count >= local_size); a smaller piece gains nothing from it.
CollectiveAlgorithm ChooseAllreduce(bool enabled, const HierarchyPlan& plan, int64_t count);
// An allgather of `total_bytes` (all ranks' blocks) is hierarchical when enabled, the plan is
// kHierarchical and there is something to move.
CollectiveAlgorithm ChooseAllgather(bool enabled, const HierarchyPlan& plan, int64_t total_bytes);

// How the cross step of a hierarchical allreduce reduces one member's block (`count` elements,
// `bytes` bytes) among the `hosts` members with its local index: one Allreduce of the cross
// backend for a block of at most kCrossAllreduceMaxBytes (latency-bound: the transport's
// recursive doubling takes log2(hosts) steps) or with fewer elements than hosts; otherwise a
// ReduceScatter then an Allgatherv, which carry 2 (hosts - 1) / hosts of the block over each
// host's link whatever the transport's own allreduce would do (Open MPI 4.1's allreduce of 2 MiB
// among 3 ranks sends 2.5 times that over the first host's link: docs/hierarchical.md).
enum class CrossStep { kAllreduce, kReduceScatterAllgather };
inline constexpr int64_t kCrossAllreduceMaxBytes = int64_t{64} << 10;
CrossStep ChooseCrossStep(int64_t count, int64_t bytes, int32_t hosts);

}  // namespace chorus::ops

#endif  // CHORUS_OPS_HIERARCHICAL_HIERARCHY_LAYOUT_H_
