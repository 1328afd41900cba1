// File: runtime/negotiate/coordinator.cc
//
// Rank 0's negotiation table (see runtime/negotiate/coordinator.h for the protocol).
//
// Note [Coordinator output order]
// Responses are built at the moment an op becomes ready (the request that completes it is
// added, or a join lowers its required ranks) and appended to out_; BuildResponses hands out_
// over as is. Ops are looked up by name in a hash map but are only ever iterated through
// order_ (arrival order), so the response list depends only on the sequence of calls.
//
// Note [Failing a name]
// An error response fails the name on every rank that holds it, so the coordinator forgets
// the op as well (dup, unknown set, non-member, stall shutdown): its state then matches the
// ranks'. A group runs as a unit, so failing one member fails every member known so far.
#include "runtime/negotiate/coordinator.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "base/op_kind.h"
#include "base/shortest_double.h"
#include "base/status_macros.h"
#include "chorus/types.h"
#include "runtime/execute/collective_math.h"
#include "runtime/negotiate/process_set_ranks.h"

namespace chorus::runtime {
namespace {

using RequestsByRank = std::map<int32_t, Request>;

const std::vector<int32_t> kNoRanks;

std::string DeviceName(int32_t device) {
  return device == kCpuDevice ? std::string("cpu") : absl::StrCat("gpu:", device);
}

std::string RanksToString(const std::vector<int32_t>& ranks) {
  return absl::StrCat("[", absl::StrJoin(ranks, ", "), "]");
}

std::string SplitsToString(const std::vector<int64_t>& splits) {
  return absl::StrCat("[", absl::StrJoin(splits, ", "), "]");
}

std::string Prefix(OpType type, absl::string_view name) {
  return absl::StrCat(OpTypeName(type), " of tensor '", name, "': ");
}

bool IsGlobalOp(OpType type) { return KindOf(type).global; }

// InvalidArgument "mismatched <field>: rank 0 <v>, rank 1 <v>" when key(request) differs
// between ranks.
template <typename Key, typename Render>
absl::Status CheckAgree(const RequestsByRank& requests, absl::string_view field, Key key,
                        Render render) {
  const auto ref = key(requests.begin()->second);
  bool same = true;
  for (const auto& [rank, request] : requests) {
    if (!(key(request) == ref)) {
      same = false;
      break;
    }
  }
  if (same) return absl::OkStatus();
  std::string message = absl::StrCat("mismatched ", field, ": ");
  bool first = true;
  for (const auto& [rank, request] : requests) {
    absl::StrAppend(&message, first ? "" : ", ", "rank ", rank, " ", render(request));
    first = false;
  }
  return absl::InvalidArgumentError(message);
}

// Dimensions that must agree for allgather and alltoall: the rank and all but the first.
std::vector<int64_t> TrailingShapeKey(const Request& r) {
  std::vector<int64_t> key;
  key.reserve(r.shape.size() + 1);
  key.push_back(static_cast<int64_t>(r.shape.size()));
  if (!r.shape.empty()) key.insert(key.end(), r.shape.begin() + 1, r.shape.end());
  return key;
}

absl::Status CheckSameOpType(const RequestsByRank& requests) {
  return CheckAgree(
      requests, "op type", [](const Request& r) { return r.type; },
      [](const Request& r) { return std::string(OpTypeName(r.type)); });
}

absl::Status CheckSameProcessSet(const RequestsByRank& requests) {
  return CheckAgree(
      requests, "process set", [](const Request& r) { return r.process_set_id; },
      [](const Request& r) { return absl::StrCat(r.process_set_id); });
}

// What the tensors of a collective must agree on besides their shape: dtype, device kind and
// group.
absl::Status CheckTensorsAgree(const RequestsByRank& requests) {
  CHORUS_RETURN_IF_ERROR(CheckAgree(
      requests, "dtype", [](const Request& r) { return r.dtype; },
      [](const Request& r) { return std::string(DataTypeName(r.dtype)); }));
  // CPU against GPU must agree; GPU ordinals may differ (each rank drives its own GPU).
  CHORUS_RETURN_IF_ERROR(CheckAgree(
      requests, "device", [](const Request& r) { return r.device == kCpuDevice; },
      [](const Request& r) { return DeviceName(r.device); }));
  return CheckAgree(
      requests, "group", [](const Request& r) { return std::make_pair(r.group_key, r.group_size); },
      [](const Request& r) {
        return absl::StrCat("'", r.group_key, "' (size ", r.group_size, ")");
      });
}

// How values are combined and scaled: the reduce op (allreduce, reducescatter), the wire dtype
// and the pre- and postscale factors.
absl::Status CheckArithmeticAgrees(OpType type, const RequestsByRank& requests) {
  if (KindOf(type).reduces) {
    CHORUS_RETURN_IF_ERROR(CheckAgree(
        requests, "reduce op", [](const Request& r) { return r.reduce_op; },
        [](const Request& r) { return std::string(ReduceOpName(r.reduce_op)); }));
  }
  CHORUS_RETURN_IF_ERROR(CheckAgree(
      requests, "wire dtype", [](const Request& r) { return r.wire_dtype; },
      [](const Request& r) {
        return r.wire_dtype < 0 ? std::string("none")
                                : std::string(DataTypeName(static_cast<DataType>(r.wire_dtype)));
      }));
  CHORUS_RETURN_IF_ERROR(CheckAgree(
      requests, "prescale factor", [](const Request& r) { return r.prescale_factor; },
      [](const Request& r) { return ShortestDouble(r.prescale_factor); }));
  return CheckAgree(
      requests, "postscale factor", [](const Request& r) { return r.postscale_factor; },
      [](const Request& r) { return ShortestDouble(r.postscale_factor); });
}

// broadcast: every rank names the same root, a member of the set (`members`). Requests name
// the root by world rank; the backends take its rank within the set, set in `response`.
absl::Status TranslateBroadcastRoot(const RequestsByRank& requests,
                                    const std::vector<int32_t>& members, Response* response) {
  CHORUS_RETURN_IF_ERROR(CheckAgree(
      requests, "root rank", [](const Request& r) { return r.root_rank; },
      [](const Request& r) { return absl::StrCat(r.root_rank); }));
  const Request& ref = requests.begin()->second;
  const auto root = std::lower_bound(members.begin(), members.end(), ref.root_rank);
  if (root == members.end() || *root != ref.root_rank) {
    return absl::InvalidArgumentError(absl::StrCat("root rank ", ref.root_rank,
                                                   " is not in process set ", ref.process_set_id,
                                                   " ", RanksToString(members)));
  }
  response->root_rank = static_cast<int32_t>(root - members.begin());
  return absl::OkStatus();
}

// Allgather and alltoall concatenate along the first dimension: all dimensions but the first
// must agree, and there must be a first. Every other op needs one shape on every rank.
absl::Status CheckShapesAgree(OpType type, const RequestsByRank& requests) {
  const auto render_shape = [](const Request& r) { return ShapeToString(r.shape); };
  if (!KindOf(type).first_dim_varies) {
    return CheckAgree(
        requests, "shape", [](const Request& r) { return r.shape; }, render_shape);
  }
  CHORUS_RETURN_IF_ERROR(CheckAgree(requests, "shape (all dimensions but the first must agree)",
                                    TrailingShapeKey, render_shape));
  if (requests.begin()->second.shape.empty()) {
    return absl::InvalidArgumentError(
        "a scalar (0-d tensor) has no first dimension to concatenate");
  }
  return absl::OkStatus();
}

// alltoall: every rank's splits are valid (AreValidSplits); the error names each rank's that
// are not. REQUIRES: the tensors have a first dimension.
absl::Status CheckAlltoallSplits(const RequestsByRank& requests, size_t set_size) {
  std::string bad;
  for (const auto& [rank, r] : requests) {
    const int64_t rows = r.shape[0];
    if (AreValidSplits(r.splits, rows, set_size)) continue;
    absl::StrAppend(&bad, bad.empty() ? "" : ", ", "rank ", rank, " splits ",
                    SplitsToString(r.splits), " for first dimension ", rows);
  }
  if (bad.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid splits (need one non-negative count per rank of the ", set_size,
                   "-rank set summing to the first dimension, or none for an even split): ", bad));
}

// allgather: the first dimension of each member's tensor, in member order. REQUIRES: every
// member has a request with a non-scalar shape.
std::vector<int64_t> FirstDims(const RequestsByRank& requests,
                               const std::vector<int32_t>& members) {
  std::vector<int64_t> first_dims;
  first_dims.reserve(members.size());
  for (int32_t r : members) first_dims.push_back(requests.at(r).shape[0]);
  return first_dims;
}

// The fields every response for `request`'s op carries; names = {name}.
Response BaseResponse(const Request& request, const std::string& name) {
  Response r;
  r.type = request.type;
  r.names = {name};
  r.dtype = request.dtype;
  r.reduce_op = request.reduce_op;
  r.prescale_factor = request.prescale_factor;
  r.wire_dtype = request.wire_dtype;
  r.postscale_factor = request.postscale_factor;
  r.root_rank = request.root_rank;
  r.device = request.device;
  r.process_set_id = request.process_set_id;
  r.group_key = request.group_key;
  return r;
}

// The message of a member failed because another member of its group failed.
Response GroupFailure(Response r, const std::string& key, absl::StatusCode code,
                      absl::string_view cause) {
  r.shapes.clear();
  r.first_dims.clear();
  r.error_code = code;
  r.error_message = absl::StrCat(Prefix(r.type, r.names[0]), "group '", key, "' failed: ", cause);
  return r;
}

}  // namespace

Coordinator::Coordinator(int world_size, Options options)
    : world_size_(world_size), options_(options) {
  for (int32_t r = 0; r < world_size; ++r) world_ranks_.push_back(r);
  process_sets_[kGlobalProcessSetId] = world_ranks_;
}

void Coordinator::RegisterProcessSet(int32_t id, std::vector<int32_t> world_ranks) {
  process_sets_[id] = std::move(world_ranks);
  if (id >= next_set_id_) next_set_id_ = id + 1;
}

const std::vector<int32_t>* Coordinator::ProcessSetRanks(int32_t id) const {
  auto it = process_sets_.find(id);
  return it == process_sets_.end() ? nullptr : &it->second;
}

const std::vector<int32_t>& Coordinator::joined_ranks() const { return joined_; }

bool Coordinator::HasPending() const { return !ops_.empty() || !joined_.empty(); }

void Coordinator::AddRequests(int32_t rank, const std::vector<Request>& requests, absl::Time now) {
  for (const Request& request : requests) AddOne(rank, request, now);
}

void Coordinator::AddOne(int32_t rank, const Request& request, absl::Time now) {
  const auto prefix = [&request] { return Prefix(request.type, request.name); };
  if (rank < 0 || rank >= world_size_) {
    Response r = BaseResponse(request, request.name);
    r.error_code = absl::StatusCode::kInvalidArgument;
    r.error_message =
        absl::StrCat(prefix(), "request from rank ", rank, " outside a world of ", world_size_);
    out_.push_back(std::move(r));
    return;
  }
  if (request.type == OpType::kJoin) {
    Join(rank, request);
    return;
  }
  const bool global = IsGlobalOp(request.type);
  if (!global) {
    const std::vector<int32_t>* members = ProcessSetRanks(request.process_set_id);
    if (members == nullptr) {
      Fail(request.name,
           absl::InvalidArgumentError(
               absl::StrCat(prefix(), "unknown process set ", request.process_set_id)),
           &request);
      return;
    }
    if (!std::binary_search(members->begin(), members->end(), rank)) {
      Fail(request.name,
           absl::InvalidArgumentError(
               absl::StrCat(prefix(), "rank ", rank, " is not a member of process set ",
                            request.process_set_id, " ", RanksToString(*members))),
           &request);
      return;
    }
  }
  if (!request.group_key.empty()) {
    if (!IsDataOp(request.type)) {
      Fail(request.name,
           absl::InvalidArgumentError(absl::StrCat(prefix(), "only collectives can be grouped")),
           &request);
      return;
    }
    if (request.group_size < 1) {
      Fail(request.name,
           absl::InvalidArgumentError(absl::StrCat(prefix(), "group '", request.group_key,
                                                   "' has invalid size ", request.group_size)),
           &request);
      return;
    }
  }

  auto it = ops_.find(request.name);
  const bool is_new = it == ops_.end();
  if (!is_new && it->second.requests.count(rank) != 0) {
    Fail(request.name,
         absl::InvalidArgumentError(absl::StrCat(prefix(), "duplicate name '", request.name,
                                                 "' already pending on rank ", rank)),
         &request);
    return;
  }
  if (is_new) {
    Op op;
    op.name = request.name;
    op.type = request.type;
    op.global = global;
    op.set_id = global ? kGlobalProcessSetId : request.process_set_id;
    op.group_key = request.group_key;
    op.first_seen = now;
    op.seq = next_seq_++;
    order_.emplace(op.seq, op.name);
    it = ops_.emplace(request.name, std::move(op)).first;
  }
  Op& op = it->second;
  Request stored = request;
  stored.request_rank = rank;
  op.requests.emplace(rank, std::move(stored));
  const std::vector<int32_t>* members = MembersOf(op);
  if (members != nullptr && std::binary_search(members->begin(), members->end(), rank)) {
    ++op.submitted_members;
  }

  if (is_new && !op.group_key.empty()) {
    auto [git, inserted] = groups_.try_emplace(op.group_key);
    Group& group = git->second;
    if (inserted) group.size = request.group_size;
    group.members.push_back(op.name);
    if (request.group_size != group.size) {
      Fail(request.name,
           absl::InvalidArgumentError(absl::StrCat(
               prefix(), "mismatched group size: tensor '", group.members.front(), "' has ",
               group.size, ", tensor '", request.name, "' has ", request.group_size)),
           nullptr);
      return;
    }
    if (static_cast<int32_t>(group.members.size()) > group.size) {
      Fail(request.name,
           absl::InvalidArgumentError(absl::StrCat(prefix(), "group '", op.group_key, "' of size ",
                                                   group.size, " got more tensors than its size")),
           nullptr);
      return;
    }
  }
  // A held op (ready, waiting for its group) takes late requests without re-readying.
  if (!op.held && IsReady(op)) MakeReady(op.name);
}

void Coordinator::Join(int32_t rank, const Request& request) {
  if (IsJoined(rank)) return;  // a join is idempotent while it waits
  joined_.insert(std::lower_bound(joined_.begin(), joined_.end(), rank), rank);
  last_joined_rank_ = rank;
  if (join_name_.empty()) join_name_ = request.name;
  // Ops of sets holding `rank` need one rank less now: allreduce may run, others fail.
  RecheckPending([this, rank](const Op& op) {
    const std::vector<int32_t>* members = MembersOf(op);
    return members != nullptr && std::binary_search(members->begin(), members->end(), rank);
  });
}

const std::vector<int32_t>* Coordinator::MembersOf(const Op& op) const {
  return op.global ? &world_ranks_ : ProcessSetRanks(op.set_id);
}

bool Coordinator::IsJoined(int32_t rank) const {
  return std::binary_search(joined_.begin(), joined_.end(), rank);
}

std::vector<int32_t> Coordinator::RequiredRanks(const Op& op) const {
  std::vector<int32_t> required;
  const std::vector<int32_t>* members = MembersOf(op);
  if (members == nullptr) return required;
  for (int32_t r : *members) {
    if (!IsJoined(r)) required.push_back(r);
  }
  return required;
}

bool Coordinator::IsReady(const Op& op) const {
  const std::vector<int32_t>* members = MembersOf(op);
  if (members == nullptr) return false;
  if (joined_.empty()) return op.submitted_members == members->size();
  bool any_required = false;
  for (int32_t r : *members) {
    if (IsJoined(r)) continue;
    any_required = true;
    if (op.requests.count(r) == 0) return false;
  }
  // An op that proceeds with joined ranks (allreduce) needs one live contributor; any other
  // op is ready to fail (CheckNoMemberJoined).
  return any_required || !KindOf(op.type).proceeds_with_joined_ranks;
}

void Coordinator::RecheckPending(const std::function<bool(const Op&)>& filter) {
  std::vector<uint64_t> seqs;
  seqs.reserve(order_.size());
  for (const auto& [seq, name] : order_) seqs.push_back(seq);
  for (uint64_t seq : seqs) {
    auto oit = order_.find(seq);
    if (oit == order_.end()) continue;  // forgotten by an earlier step of this loop
    const Op& op = ops_.at(oit->second);
    if (!op.held && filter(op) && IsReady(op)) MakeReady(op.name);
  }
}

void Coordinator::MakeReady(const std::string& name) {
  Op& op = ops_.at(name);
  Response response = Validate(op);
  if (op.group_key.empty()) {
    int32_t removed_set = -1;
    if (!response.is_error()) {
      ApplyProcessSetChange(&response);
      if (response.type == OpType::kRemoveProcessSet) removed_set = response.new_process_set_id;
    }
    out_.push_back(std::move(response));
    Forget(name);
    if (removed_set >= 0) {
      // Ops of a removed set can never complete.
      std::vector<std::string> doomed;
      for (const auto& [seq, other] : order_) {
        const Op& o = ops_.at(other);
        if (!o.global && o.set_id == removed_set) doomed.push_back(other);
      }
      for (const std::string& d : doomed) {
        if (ops_.count(d) == 0) continue;
        Fail(d,
             absl::InvalidArgumentError(absl::StrCat(Prefix(ops_.at(d).type, d), "process set ",
                                                     removed_set, " was removed")),
             nullptr);
      }
    }
    return;
  }
  op.held = true;
  op.held_response = std::move(response);
  Group& group = groups_.at(op.group_key);
  if (++group.ready >= group.size) EmitGroup(op.group_key);
}

void Coordinator::EmitGroup(std::string key) {
  Group group = std::move(groups_.at(key));
  groups_.erase(key);
  const Response* failed = nullptr;
  for (const std::string& m : group.members) {
    const Response& r = ops_.at(m).held_response;
    if (r.is_error()) {
      failed = &r;
      break;
    }
  }
  std::optional<absl::Status> cause;
  if (failed != nullptr) cause = failed->status();
  for (const std::string& m : group.members) {
    Response& r = ops_.at(m).held_response;
    if (cause.has_value() && !r.is_error()) {
      out_.push_back(GroupFailure(std::move(r), key, cause->code(), cause->message()));
    } else {
      out_.push_back(std::move(r));
    }
    Forget(m);
  }
}

void Coordinator::ApplyProcessSetChange(Response* response) {
  if (response->type == OpType::kAddProcessSet) {
    const int32_t id = next_set_id_++;
    process_sets_[id] = response->process_set_ranks;
    response->new_process_set_id = id;
  } else if (response->type == OpType::kRemoveProcessSet) {
    process_sets_.erase(response->new_process_set_id);
  }
}

Response Coordinator::Validate(const Op& op) {
  const Request& ref = op.requests.begin()->second;
  Response response = BaseResponse(ref, op.name);
  const absl::Status valid = ValidateRequests(op, &response);
  if (!valid.ok()) {
    response.error_code = valid.code();
    response.error_message = absl::StrCat(Prefix(ref.type, op.name), valid.message());
  }
  return response;
}

absl::Status Coordinator::ValidateRequests(const Op& op, Response* response) const {
  CHORUS_RETURN_IF_ERROR(CheckSameOpType(op.requests));
  // From here on every request has the type op.type.
  CHORUS_RETURN_IF_ERROR(CheckNoMemberJoined(op));
  if (op.type == OpType::kAddProcessSet) return ValidateAddProcessSet(op, response);
  if (op.type == OpType::kRemoveProcessSet) {
    return ValidateRemoveProcessSet(op, response);
  }
  return ValidateCollective(op, response);
}

absl::Status Coordinator::CheckNoMemberJoined(const Op& op) const {
  const std::vector<int32_t>* members = MembersOf(op);
  if (KindOf(op.type).proceeds_with_joined_ranks || members == nullptr) {
    return absl::OkStatus();
  }
  std::vector<int32_t> joined_members;
  for (int32_t r : *members) {
    if (IsJoined(r)) joined_members.push_back(r);
  }
  if (joined_members.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("not supported while ranks ", RanksToString(joined_members),
                   " have joined (only allreduce runs with joined ranks)"));
}

absl::Status Coordinator::ValidateAddProcessSet(const Op& op, Response* response) const {
  const RequestsByRank& requests = op.requests;
  response->process_set_id = kGlobalProcessSetId;
  CHORUS_RETURN_IF_ERROR(CheckAgree(
      requests, "process set ranks", [](const Request& r) { return r.process_set_ranks; },
      [](const Request& r) { return RanksToString(r.process_set_ranks); }));
  const std::vector<int32_t>& ranks = requests.begin()->second.process_set_ranks;
  CHORUS_RETURN_IF_ERROR(CheckProcessSetRanks(ranks, world_size_));
  response->process_set_ranks = ranks;
  return absl::OkStatus();
}

absl::Status Coordinator::ValidateRemoveProcessSet(const Op& op, Response* response) const {
  const RequestsByRank& requests = op.requests;
  response->process_set_id = kGlobalProcessSetId;
  CHORUS_RETURN_IF_ERROR(CheckSameProcessSet(requests));
  const int32_t id = requests.begin()->second.process_set_id;
  if (id == kGlobalProcessSetId) {
    return absl::InvalidArgumentError("the global process set 0 cannot be removed");
  }
  if (ProcessSetRanks(id) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown process set ", id));
  }
  response->new_process_set_id = id;
  return absl::OkStatus();
}

absl::Status Coordinator::ValidateCollective(const Op& op, Response* response) const {
  const RequestsByRank& requests = op.requests;
  CHORUS_RETURN_IF_ERROR(CheckSameProcessSet(requests));
  if (op.type == OpType::kBarrier) return absl::OkStatus();
  CHORUS_RETURN_IF_ERROR(CheckTensorsAgree(requests));
  CHORUS_RETURN_IF_ERROR(CheckArithmeticAgrees(op.type, requests));
  const std::vector<int32_t>* set = MembersOf(op);
  const std::vector<int32_t>& members = set != nullptr ? *set : kNoRanks;
  if (KindOf(op.type).has_root) {
    CHORUS_RETURN_IF_ERROR(TranslateBroadcastRoot(requests, members, response));
  }
  CHORUS_RETURN_IF_ERROR(CheckShapesAgree(op.type, requests));
  if (op.type == OpType::kAlltoall) {
    CHORUS_RETURN_IF_ERROR(CheckAlltoallSplits(requests, members.size()));
  }
  response->shapes = {requests.begin()->second.shape};
  if (op.type == OpType::kAllgather) response->first_dims = FirstDims(requests, members);
  return absl::OkStatus();
}

void Coordinator::Fail(const std::string& name, const absl::Status& status,
                       const Request* request) {
  auto it = ops_.find(name);
  Response response;
  std::string key;
  if (it != ops_.end()) {
    response = BaseResponse(it->second.requests.begin()->second, name);
    key = it->second.group_key;
  } else {
    response = BaseResponse(*request, name);
    key = request->group_key;
  }
  response.error_code = status.code();
  response.error_message = std::string(status.message());
  response.group_key = key;

  std::vector<std::string> members;
  if (!key.empty()) {
    auto git = groups_.find(key);
    if (git != groups_.end()) {
      members = std::move(git->second.members);
      groups_.erase(git);
    }
  }
  Forget(name);
  if (std::find(members.begin(), members.end(), name) == members.end()) {
    out_.push_back(std::move(response));
  }
  for (const std::string& m : members) {
    if (m == name) {
      out_.push_back(std::move(response));
      continue;
    }
    auto mit = ops_.find(m);
    if (mit == ops_.end()) continue;
    Response base = BaseResponse(mit->second.requests.begin()->second, m);
    out_.push_back(GroupFailure(std::move(base), key, status.code(), status.message()));
    Forget(m);
  }
}

void Coordinator::Forget(const std::string& name) {
  auto it = ops_.find(name);
  if (it == ops_.end()) return;
  order_.erase(it->second.seq);
  ops_.erase(it);
}

ResponseList Coordinator::BuildResponses(absl::Time now) {
  ResponseList list;
  list.responses = std::move(out_);
  out_.clear();

  if (world_size_ > 0 && static_cast<int>(joined_.size()) == world_size_) {
    Response join;
    join.type = OpType::kJoin;
    join.names = {join_name_};
    join.last_joined_rank = last_joined_rank_;
    list.responses.push_back(std::move(join));
    joined_.clear();
    last_joined_rank_ = -1;
    join_name_.clear();
  }

  if (!options_.stall_check_disabled && options_.stall_shutdown_time > absl::ZeroDuration()) {
    std::vector<std::pair<std::string, absl::Status>> expired;
    for (const auto& [seq, name] : order_) {
      const Op& op = ops_.at(name);
      const absl::Duration waited = now - op.first_seen;
      if (op.held || waited <= options_.stall_shutdown_time) continue;
      std::vector<int32_t> submitted, missing;
      for (const auto& [rank, request] : op.requests) submitted.push_back(rank);
      for (int32_t r : RequiredRanks(op)) {
        if (op.requests.count(r) == 0) missing.push_back(r);
      }
      expired.emplace_back(
          name, absl::DeadlineExceededError(absl::StrCat(
                    Prefix(op.type, name), "stalled for ", absl::FormatDuration(waited),
                    " (shutdown time ", absl::FormatDuration(options_.stall_shutdown_time),
                    "): missing ranks ", RanksToString(missing), ", submitted by ranks ",
                    RanksToString(submitted))));
    }
    for (const auto& [name, status] : expired) {
      if (ops_.count(name) != 0) Fail(name, status, nullptr);
    }
    for (Response& r : out_) list.responses.push_back(std::move(r));
    out_.clear();
  }
  list.joined_ranks = joined_;
  return list;
}

std::vector<StallReport> Coordinator::CheckStalls(absl::Time now) {
  std::vector<StallReport> reports;
  if (options_.stall_check_disabled) return reports;
  for (const auto& [seq, name] : order_) {
    Op& op = ops_.at(name);
    if (op.held) continue;
    const absl::Duration waited = now - op.first_seen;
    // Reported after the warning time, then again every warning time while it stays stalled
    // (as Horovod's stall inspector): a deadlocked job never goes quiet.
    if (waited <= options_.stall_warning_time) continue;
    if (now - op.last_stall_report < options_.stall_warning_time) continue;
    StallReport report = ReportOf(op, now);
    if (report.missing_ranks.empty()) continue;  // waits only for a join to complete
    report.report_number = ++op.stall_reports;
    op.last_stall_report = now;
    reports.push_back(std::move(report));
  }
  return reports;
}

std::vector<StallReport> Coordinator::WaitingOps(absl::Time now) const {
  std::vector<StallReport> reports;
  for (const auto& [seq, name] : order_) {
    const Op& op = ops_.at(name);
    if (!op.held) reports.push_back(ReportOf(op, now));
  }
  return reports;
}

StallReport Coordinator::ReportOf(const Op& op, absl::Time now) const {
  StallReport report;
  for (int32_t r : RequiredRanks(op)) {
    if (op.requests.count(r) == 0) report.missing_ranks.push_back(r);
  }
  for (const auto& [rank, request] : op.requests) report.submitted_ranks.push_back(rank);
  report.name = op.name;
  report.type = op.type;
  report.process_set_id = op.set_id;
  report.waited = now - op.first_seen;
  report.report_number = op.stall_reports;
  return report;
}

}  // namespace chorus::runtime
