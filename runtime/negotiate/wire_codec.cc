// Conversion between runtime/message.h structs and proto/negotiation.proto messages.
#include "runtime/negotiate/wire_codec.h"

#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "base/op_kind.h"
#include "base/status_macros.h"
#include "chorus/types.h"
#include "proto/negotiation.pb.h"
#include "runtime/message.h"

namespace chorus::runtime {
namespace {

bool IsValidStatusCode(int32_t value) {
  return value >= static_cast<int32_t>(absl::StatusCode::kOk) &&
         value <= static_cast<int32_t>(absl::StatusCode::kUnauthenticated);
}

template <typename Message>
absl::Status ParseMessage(std::string_view bytes, const char* what, Message* message) {
  if (bytes.size() > static_cast<size_t>(INT_MAX) ||
      !message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed ", what, " (", bytes.size(), " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckEnums(const char* what, int32_t type, int32_t dtype, int32_t reduce_op) {
  if (!IsValidOpType(type)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid op type ", type));
  }
  if (!IsValidDataType(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid dtype ", dtype));
  }
  if (!IsValidReduceOp(reduce_op)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid reduce op ", reduce_op));
  }
  return absl::OkStatus();
}

// The wire dtype from its encoding (DataType + 1; 0 = none, which is -1).
absl::StatusOr<int32_t> WireDtype(const char* what, int32_t plus_one) {
  if (plus_one != 0 && !IsValidDataType(plus_one - 1)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid wire dtype ", plus_one - 1));
  }
  return plus_one - 1;
}

void ToWire(const Request& in, wire::Request* out) {
  out->set_request_rank(in.request_rank);
  out->set_type(static_cast<int32_t>(in.type));
  out->set_name(in.name);
  out->set_dtype(static_cast<int32_t>(in.dtype));
  out->mutable_shape()->Add(in.shape.begin(), in.shape.end());
  out->set_reduce_op(static_cast<int32_t>(in.reduce_op));
  out->set_prescale_factor(in.prescale_factor);
  out->set_postscale_factor(in.postscale_factor);
  out->set_root_rank(in.root_rank);
  out->set_device(in.device);
  out->set_process_set_id(in.process_set_id);
  out->set_group_key(in.group_key);
  out->set_group_size(in.group_size);
  out->mutable_splits()->Add(in.splits.begin(), in.splits.end());
  out->mutable_process_set_ranks()->Add(in.process_set_ranks.begin(), in.process_set_ranks.end());
  out->set_wire_dtype_plus_one(in.wire_dtype + 1);
}

// Shapes feed every rank's size arithmetic (fusion, buffers): one no rank could have submitted
// (a negative dimension, too many elements) is malformed.
absl::Status CheckShape(const char* what, const std::vector<int64_t>& shape) {
  if (IsValidShape(shape)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": invalid shape ", ShapeToString(shape)));
}

absl::StatusOr<Request> FromWire(const wire::Request& in) {
  CHORUS_RETURN_IF_ERROR(CheckEnums("request", in.type(), in.dtype(), in.reduce_op()));
  Request out;
  out.request_rank = in.request_rank();
  out.type = static_cast<OpType>(in.type());
  out.name = in.name();
  out.dtype = static_cast<DataType>(in.dtype());
  out.shape.assign(in.shape().begin(), in.shape().end());
  CHORUS_RETURN_IF_ERROR(CheckShape("request", out.shape));
  out.reduce_op = static_cast<ReduceOp>(in.reduce_op());
  out.prescale_factor = in.prescale_factor();
  out.postscale_factor = in.postscale_factor();
  out.root_rank = in.root_rank();
  out.device = in.device();
  out.process_set_id = in.process_set_id();
  out.group_key = in.group_key();
  out.group_size = in.group_size();
  out.splits.assign(in.splits().begin(), in.splits().end());
  out.process_set_ranks.assign(in.process_set_ranks().begin(), in.process_set_ranks().end());
  CHORUS_ASSIGN_OR_RETURN(out.wire_dtype, WireDtype("request", in.wire_dtype_plus_one()));
  return out;
}

void ToWire(const Response& in, wire::Response* out) {
  out->set_type(static_cast<int32_t>(in.type));
  for (const std::string& name : in.names) out->add_names(name);
  out->set_dtype(static_cast<int32_t>(in.dtype));
  out->set_reduce_op(static_cast<int32_t>(in.reduce_op));
  out->set_prescale_factor(in.prescale_factor);
  out->set_postscale_factor(in.postscale_factor);
  out->set_root_rank(in.root_rank);
  out->set_device(in.device);
  out->set_process_set_id(in.process_set_id);
  for (const std::vector<int64_t>& shape : in.shapes) {
    out->add_shape_ranks(static_cast<int32_t>(shape.size()));
    out->mutable_shape_dims()->Add(shape.begin(), shape.end());
  }
  out->mutable_first_dims()->Add(in.first_dims.begin(), in.first_dims.end());
  out->set_error_code(static_cast<int32_t>(in.error_code));
  out->set_error_message(in.error_message);
  out->set_last_joined_rank(in.last_joined_rank);
  out->set_new_process_set_id(in.new_process_set_id);
  out->mutable_process_set_ranks()->Add(in.process_set_ranks.begin(), in.process_set_ranks.end());
  out->set_group_key(in.group_key);
  out->set_wire_dtype_plus_one(in.wire_dtype + 1);
}

absl::StatusOr<Response> FromWire(const wire::Response& in) {
  CHORUS_RETURN_IF_ERROR(CheckEnums("response", in.type(), in.dtype(), in.reduce_op()));
  if (!IsValidStatusCode(in.error_code())) {
    return absl::InvalidArgumentError(
        absl::StrCat("response: invalid error code ", in.error_code()));
  }
  Response out;
  out.type = static_cast<OpType>(in.type());
  out.names.assign(in.names().begin(), in.names().end());
  out.dtype = static_cast<DataType>(in.dtype());
  out.reduce_op = static_cast<ReduceOp>(in.reduce_op());
  out.prescale_factor = in.prescale_factor();
  out.postscale_factor = in.postscale_factor();
  out.root_rank = in.root_rank();
  out.device = in.device();
  out.process_set_id = in.process_set_id();
  out.shapes.reserve(in.shape_ranks_size());
  int64_t next_dim = 0;
  for (int32_t rank : in.shape_ranks()) {
    if (rank < 0 || rank > in.shape_dims_size() - next_dim) {
      return absl::InvalidArgumentError(absl::StrCat("response: shape_ranks need more than the ",
                                                     in.shape_dims_size(), " shape_dims sent"));
    }
    out.shapes.emplace_back(in.shape_dims().begin() + next_dim,
                            in.shape_dims().begin() + next_dim + rank);
    CHORUS_RETURN_IF_ERROR(CheckShape("response", out.shapes.back()));
    next_dim += rank;
  }
  if (next_dim != in.shape_dims_size()) {
    return absl::InvalidArgumentError(absl::StrCat("response: ", in.shape_dims_size() - next_dim,
                                                   " shape_dims not covered by shape_ranks"));
  }
  out.first_dims.assign(in.first_dims().begin(), in.first_dims().end());
  for (int64_t d : out.first_dims) {
    if (d < 0 || d > kMaxElements) {
      return absl::InvalidArgumentError(absl::StrCat("response: invalid first dimension ", d));
    }
  }
  out.error_code = static_cast<absl::StatusCode>(in.error_code());
  out.error_message = in.error_message();
  out.last_joined_rank = in.last_joined_rank();
  out.new_process_set_id = in.new_process_set_id();
  out.process_set_ranks.assign(in.process_set_ranks().begin(), in.process_set_ranks().end());
  out.group_key = in.group_key();
  CHORUS_ASSIGN_OR_RETURN(out.wire_dtype, WireDtype("response", in.wire_dtype_plus_one()));
  return out;
}

void ToWire(const TunedParameters& in, wire::TunedParameters* out) {
  out->set_fusion_threshold_bytes(in.fusion_threshold_bytes);
  out->set_pipeline_chunk_bytes(in.pipeline_chunk_bytes);
  out->set_inplace_min_bytes(in.inplace_min_bytes);
  out->set_cycle_time_ns(absl::ToInt64Nanoseconds(in.cycle_time));
  if (in.hierarchical_allreduce.has_value()) {
    out->set_hierarchical_allreduce(*in.hierarchical_allreduce);
  }
}

// The values every rank applies as they are: each must be one the runtime runs with.
absl::StatusOr<TunedParameters> FromWire(const wire::TunedParameters& in) {
  if (in.fusion_threshold_bytes() < 0 || in.pipeline_chunk_bytes() < 4096 ||
      in.inplace_min_bytes() < 0 || in.cycle_time_ns() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tuned parameters out of range: fusion threshold ", in.fusion_threshold_bytes(),
        ", pipeline chunk ", in.pipeline_chunk_bytes(), ", in-place minimum ",
        in.inplace_min_bytes(), ", cycle time ", in.cycle_time_ns(), " ns"));
  }
  TunedParameters out;
  out.fusion_threshold_bytes = in.fusion_threshold_bytes();
  out.pipeline_chunk_bytes = in.pipeline_chunk_bytes();
  out.inplace_min_bytes = in.inplace_min_bytes();
  out.cycle_time = absl::Nanoseconds(in.cycle_time_ns());
  if (in.has_hierarchical_allreduce()) out.hierarchical_allreduce = in.hierarchical_allreduce();
  return out;
}

}  // namespace

std::string SerializeRequestList(const RequestList& list) {
  wire::RequestList message;
  message.mutable_requests()->Reserve(static_cast<int>(list.requests.size()));
  for (const Request& request : list.requests) ToWire(request, message.add_requests());
  message.set_shutdown(list.shutdown);
  return message.SerializeAsString();
}

absl::StatusOr<RequestList> ParseRequestList(std::string_view bytes) {
  wire::RequestList message;
  CHORUS_RETURN_IF_ERROR(ParseMessage(bytes, "request list", &message));
  RequestList list;
  list.requests.reserve(message.requests_size());
  for (const wire::Request& request : message.requests()) {
    CHORUS_ASSIGN_OR_RETURN(Request parsed, FromWire(request));
    list.requests.push_back(std::move(parsed));
  }
  list.shutdown = message.shutdown();
  return list;
}

std::string SerializeResponseList(const ResponseList& list) {
  wire::ResponseList message;
  message.mutable_responses()->Reserve(static_cast<int>(list.responses.size()));
  for (const Response& response : list.responses) ToWire(response, message.add_responses());
  message.set_shutdown(list.shutdown);
  message.mutable_joined_ranks()->Add(list.joined_ranks.begin(), list.joined_ranks.end());
  if (list.autotune.has_value()) {
    wire::AutotuneUpdate* update = message.mutable_autotune();
    ToWire(list.autotune->apply, update->mutable_apply());
    ToWire(list.autotune->best, update->mutable_best());
    update->set_done(list.autotune->done);
  }
  return message.SerializeAsString();
}

absl::StatusOr<ResponseList> ParseResponseList(std::string_view bytes) {
  wire::ResponseList message;
  CHORUS_RETURN_IF_ERROR(ParseMessage(bytes, "response list", &message));
  ResponseList list;
  list.responses.reserve(message.responses_size());
  for (const wire::Response& response : message.responses()) {
    CHORUS_ASSIGN_OR_RETURN(Response parsed, FromWire(response));
    list.responses.push_back(std::move(parsed));
  }
  list.shutdown = message.shutdown();
  list.joined_ranks.assign(message.joined_ranks().begin(), message.joined_ranks().end());
  if (message.has_autotune()) {
    AutotuneUpdate update;
    CHORUS_ASSIGN_OR_RETURN(update.apply, FromWire(message.autotune().apply()));
    CHORUS_ASSIGN_OR_RETURN(update.best, FromWire(message.autotune().best()));
    update.done = message.autotune().done();
    list.autotune = std::move(update);
  }
  return list;
}

std::string SerializeSharedConfig(const SharedConfig& config) {
  wire::SharedConfig message;
  message.set_protocol_version(config.protocol_version);
  message.set_fusion_threshold_bytes(config.fusion_threshold_bytes);
  message.set_pipeline_chunk_bytes(config.pipeline_chunk_bytes);
  message.set_inplace_min_bytes(config.inplace_min_bytes);
  message.set_cache_capacity(config.cache_capacity);
  message.set_num_nccl_streams(config.num_nccl_streams);
  message.set_hierarchical_allreduce(config.hierarchical_allreduce);
  message.set_hierarchical_allgather(config.hierarchical_allgather);
  if (config.autotune_start.has_value()) {
    ToWire(*config.autotune_start, message.mutable_autotune_start());
  }
  message.set_autotune_generation(config.autotune_generation);
  return message.SerializeAsString();
}

absl::StatusOr<SharedConfig> ParseSharedConfig(std::string_view bytes) {
  wire::SharedConfig message;
  CHORUS_RETURN_IF_ERROR(ParseMessage(bytes, "shared config", &message));
  SharedConfig config;
  config.protocol_version = message.protocol_version();
  config.fusion_threshold_bytes = message.fusion_threshold_bytes();
  config.pipeline_chunk_bytes = message.pipeline_chunk_bytes();
  config.inplace_min_bytes = message.inplace_min_bytes();
  config.cache_capacity = message.cache_capacity();
  config.num_nccl_streams = message.num_nccl_streams();
  config.hierarchical_allreduce = message.hierarchical_allreduce();
  config.hierarchical_allgather = message.hierarchical_allgather();
  if (message.has_autotune_start()) {
    CHORUS_ASSIGN_OR_RETURN(config.autotune_start, FromWire(message.autotune_start()));
  }
  config.autotune_generation = message.autotune_generation();
  return config;
}

}  // namespace chorus::runtime
