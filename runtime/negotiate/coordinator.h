// File: runtime/negotiate/coordinator.h
//
// The coordinator's negotiation state (rank 0 only): readiness counting, cross-rank validation,
// one global execution order, join bookkeeping and the stall inspector. Pure logic with no I/O,
// so it is unit-tested directly (test/unit/coordinator_test.cc).
//
// Protocol (one negotiation round, driven by runtime/loop/background_loop.cc):
//   1. Every rank sends the requests it has not sent before; the loop calls AddRequests once
//      per rank, in rank order.
//   2. BuildResponses() returns, in one order that every rank will execute:
//      a. ops that every required rank has now submitted, in the order they became ready
//         (a group's tensors only when the whole group is ready, adjacent, in group order);
//         a ready op whose requests disagree (type, dtype, shape, reduce op, scale factors,
//         root, device, group, splits rules) becomes an error response with code
//         InvalidArgument naming the tensor, the field and each rank's value;
//      b. a join response once every world rank has joined;
//      c. DeadlineExceeded error responses for ops stalled past the shutdown time.
//   The responses are NOT fused here: every rank fuses the same list identically
//   (runtime/execute/fusion_planner.h).
//
// "Required ranks" of an op are the members of its process set, minus ranks that have joined
// for allreduce (they contribute zeros). Any other op type submitted while a member of its set
// has joined fails with InvalidArgument. A request naming an unknown process set, or sent by a
// rank outside the set, fails with InvalidArgument at once.
//
// Thread-safety: thread-compatible (background-thread-only).
#ifndef CHORUS_RUNTIME_NEGOTIATE_COORDINATOR_H_
#define CHORUS_RUNTIME_NEGOTIATE_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "runtime/message.h"

namespace chorus::runtime {

// One stalled op: submitted by some ranks of its set, not by others, for longer than the
// warning time.
struct StallReport {
  std::string name;
  OpType type = OpType::kAllreduce;
  int32_t process_set_id = kGlobalProcessSetId;
  std::vector<int32_t> submitted_ranks;  // world ranks, ascending
  std::vector<int32_t> missing_ranks;    // world ranks, ascending
  absl::Duration waited;                 // since the first rank submitted
  int report_number = 1;                 // 1 the first time this op is reported, then 2, ...
};

class Coordinator {
 public:
  struct Options {
    absl::Duration stall_warning_time = absl::Seconds(60);
    absl::Duration stall_shutdown_time = absl::ZeroDuration();  // zero: never fail stalled ops
    bool stall_check_disabled = false;
  };

  // The global process set (id 0) holds world ranks 0..world_size-1.
  Coordinator(int world_size, Options options);

  // Process sets known to the coordinator. AddProcessSet/RemoveProcessSet responses built by
  // BuildResponses update this table themselves; these two are for sets created at init.
  void RegisterProcessSet(int32_t id, std::vector<int32_t> world_ranks);
  // Members of set `id`, or null if unknown.
  const std::vector<int32_t>* ProcessSetRanks(int32_t id) const;

  // Records the requests `rank` sent this round. A second request for a name that is still
  // pending from the same rank is an error response for that name.
  void AddRequests(int32_t rank, const std::vector<Request>& requests, absl::Time now);

  // Steps 2a-2c above. Ops returned are forgotten by the table.
  ResponseList BuildResponses(absl::Time now);

  // Ops pending longer than the warning time, each reported once (until it completes).
  // Empty when the stall check is disabled.
  std::vector<StallReport> CheckStalls(absl::Time now);
  // Every op that waits for ranks (not for the rest of its group), in arrival order, as a
  // report (report_number: the reports CheckStalls made of it so far). For the flight
  // recorder's dump (runtime/flight/flight_recorder.h); changes nothing.
  std::vector<StallReport> WaitingOps(absl::Time now) const;

  // World ranks that have joined and wait for the others.
  const std::vector<int32_t>& joined_ranks() const;
  // True when some op waits for ranks (the loop keeps negotiating so stalls are detected).
  bool HasPending() const;

 private:
  // One named op some ranks have submitted. Output order never comes from ops_ (a hash map):
  // it comes from out_ (readiness order) and order_ (arrival order).
  struct Op {
    std::string name;
    OpType type = OpType::kAllreduce;  // of the first request
    bool global = false;               // add/remove process set: required ranks are the world
    int32_t set_id = kGlobalProcessSetId;
    std::string group_key;
    std::map<int32_t, Request> requests;  // by world rank
    size_t submitted_members = 0;         // submitters that are members of the op's set
    absl::Time first_seen;
    uint64_t seq = 0;       // key in order_
    int stall_reports = 0;  // CheckStalls reports made about it
    absl::Time last_stall_report = absl::InfinitePast();
    bool held = false;       // ready, waiting for the rest of its group
    Response held_response;  // valid when held
  };
  struct Group {
    int32_t size = 0;
    std::vector<std::string> members;  // names in first-arrival order
    int32_t ready = 0;
  };

  void AddOne(int32_t rank, const Request& request, absl::Time now);
  void Join(int32_t rank, const Request& request);
  const std::vector<int32_t>* MembersOf(const Op& op) const;
  bool IsJoined(int32_t rank) const;
  // World ranks whose request `op` needs now (members minus joined ranks).
  std::vector<int32_t> RequiredRanks(const Op& op) const;
  // The op as a stall report (missing ranks empty: it waits only for a join to complete).
  StallReport ReportOf(const Op& op, absl::Time now) const;
  bool IsReady(const Op& op) const;
  // Validates a ready op, queues its response (or holds it for its group) and forgets it.
  void MakeReady(const std::string& name);
  // The response of a ready op: its requests validated against each other and this table
  // (ValidateRequests), or an InvalidArgument error response naming the tensor and the problem.
  Response Validate(const Op& op);
  // Checks, in order: one op type; no member of the set has joined (unless allreduce); then the
  // rules of the op's kind. Fills the fields of `response` they decide (the new set's ranks,
  // the set to remove, the root within the set, shapes). The error carries no tensor prefix.
  absl::Status ValidateRequests(const Op& op, Response* response) const;
  // Only allreduce runs while members of its set have joined (they contribute zeros).
  absl::Status CheckNoMemberJoined(const Op& op) const;
  // add_process_set: every rank names the same ranks, and they make a valid set
  // (CheckProcessSetRanks); `response` carries them, on the global set.
  absl::Status ValidateAddProcessSet(const Op& op, Response* response) const;
  // remove_process_set: every rank names the same set, a known one other than the global set;
  // `response` names it in new_process_set_id.
  absl::Status ValidateRemoveProcessSet(const Op& op, Response* response) const;
  // barrier and the data ops: one process set; for data ops also dtype, device kind, group,
  // reduce op, wire dtype, scale factors, broadcast root (translated to its rank within the
  // set), shapes and alltoall splits agree or are valid. Fills shapes and allgather first_dims.
  absl::Status ValidateCollective(const Op& op, Response* response) const;
  void ApplyProcessSetChange(Response* response);
  void EmitGroup(std::string key);  // by value: members holding the key are forgotten
  // Queues an error response for `name` and forgets the op; a grouped op fails its whole
  // group. `request` describes the name when no op is pending for it.
  void Fail(const std::string& name, const absl::Status& status, const Request* request);
  void Forget(const std::string& name);
  // Ready ops re-checked in arrival order, e.g. after a join changed the required ranks.
  void RecheckPending(const std::function<bool(const Op&)>& filter);

  int world_size_;
  Options options_;
  std::vector<int32_t> world_ranks_;                      // 0..world_size-1
  std::map<int32_t, std::vector<int32_t>> process_sets_;  // id -> world ranks, ascending
  int32_t next_set_id_ = 1;
  std::unordered_map<std::string, Op> ops_;  // pending or held, by name
  std::map<uint64_t, std::string> order_;    // arrival seq -> name
  uint64_t next_seq_ = 0;
  std::unordered_map<std::string, Group> groups_;  // by group key
  std::vector<Response> out_;                      // built, in readiness order
  std::vector<int32_t> joined_;                    // ascending
  int32_t last_joined_rank_ = -1;
  std::string join_name_;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_NEGOTIATE_COORDINATOR_H_
