#include "runtime/negotiate/wire_codec.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <catch2/catch.hpp>

#include "chorus/types.h"
#include "runtime/message.h"

namespace chorus::runtime {
namespace {

// Every field set to a value other than its default.
Request FullRequest(int32_t rank, const std::string& name) {
  Request r;
  r.request_rank = rank;
  r.type = OpType::kAllgather;
  r.name = name;
  r.dtype = DataType::kBfloat16;
  r.shape = {3, 0, 7};
  r.reduce_op = ReduceOp::kMax;
  r.prescale_factor = 0.25;
  r.postscale_factor = -3.5;
  r.root_rank = 2;
  r.device = 1;
  r.process_set_id = 4;
  r.group_key = "group-a";
  r.group_size = 3;
  r.splits = {1, 0, 5, 1LL << 40};
  r.process_set_ranks = {0, 2, 5};
  r.wire_dtype = static_cast<int32_t>(DataType::kBfloat16);
  return r;
}

Response FullResponse() {
  Response r;
  r.type = OpType::kAllgather;
  r.names = {"w1", "w2", "bias"};
  r.dtype = DataType::kFloat64;
  r.reduce_op = ReduceOp::kProduct;
  r.prescale_factor = 2.0;
  r.postscale_factor = 0.125;
  r.root_rank = 1;
  r.device = 3;
  r.process_set_id = 6;
  r.shapes = {{4, 5}, {}, {2, 3, 1LL << 33}};
  r.first_dims = {4, 1, 0, 7, 2, 2};
  r.error_code = absl::StatusCode::kOk;
  r.last_joined_rank = 1;
  r.new_process_set_id = 9;
  r.process_set_ranks = {1, 3};
  r.group_key = "g";
  r.wire_dtype = static_cast<int32_t>(DataType::kFloat16);
  return r;
}

TEST_CASE("RequestList round-trips every field", "[wire_codec]") {
  RequestList list;
  list.requests = {FullRequest(0, "layer0/weight"), FullRequest(3, "")};
  list.requests[1].type = OpType::kRemoveProcessSet;
  list.requests[1].dtype = DataType::kBool;
  list.requests[1].reduce_op = ReduceOp::kAdasum;
  list.requests[1].shape = {};
  list.shutdown = true;

  auto parsed = ParseRequestList(SerializeRequestList(list));
  REQUIRE(parsed.ok());
  CHECK(parsed->shutdown);
  REQUIRE(parsed->requests.size() == 2);
  CHECK(parsed->requests[0] == list.requests[0]);
  CHECK(parsed->requests[1] == list.requests[1]);
}

TEST_CASE("Empty lists round-trip", "[wire_codec]") {
  auto requests = ParseRequestList(SerializeRequestList(RequestList{}));
  REQUIRE(requests.ok());
  CHECK(requests->requests.empty());
  CHECK_FALSE(requests->shutdown);

  auto responses = ParseResponseList(SerializeResponseList(ResponseList{}));
  REQUIRE(responses.ok());
  CHECK(responses->responses.empty());
  CHECK(responses->joined_ranks.empty());
  CHECK_FALSE(responses->shutdown);

  auto defaults = ParseRequestList(SerializeRequestList(RequestList{{Request{}}, false}));
  REQUIRE(defaults.ok());
  REQUIRE(defaults->requests.size() == 1);
  CHECK(defaults->requests[0] == Request{});
}

TEST_CASE("ResponseList round-trips every field", "[wire_codec]") {
  ResponseList list;
  list.responses.push_back(FullResponse());

  Response error;
  error.type = OpType::kAllreduce;
  error.names = {"grad/a", "grad/b"};
  error.shapes = {{10}, {2, 2}};
  error.error_code = absl::StatusCode::kInvalidArgument;
  error.error_message = "mismatched shapes: [10] vs [11]";
  list.responses.push_back(error);

  Response join;
  join.type = OpType::kJoin;
  join.last_joined_rank = 2;
  list.responses.push_back(join);

  Response unavailable = error;
  unavailable.error_code = absl::StatusCode::kUnauthenticated;  // the largest code
  list.responses.push_back(unavailable);

  list.shutdown = true;
  list.joined_ranks = {2, 0};
  AutotuneUpdate update;
  update.apply = {int64_t{3} << 20, 65536, 0, absl::Microseconds(2500), std::nullopt};
  update.best = {int64_t{1} << 36, 4096, 12345, absl::Nanoseconds(1), true};
  update.done = true;
  list.autotune = update;

  auto parsed = ParseResponseList(SerializeResponseList(list));
  REQUIRE(parsed.ok());
  CHECK(parsed->shutdown);
  CHECK(parsed->joined_ranks == list.joined_ranks);
  CHECK(parsed->autotune == list.autotune);
  CHECK_FALSE(ParseResponseList(SerializeResponseList(ResponseList{}))->autotune.has_value());
  REQUIRE(parsed->responses.size() == list.responses.size());
  for (size_t i = 0; i < list.responses.size(); ++i) {
    INFO("response " << i);
    CHECK(parsed->responses[i] == list.responses[i]);
  }
  CHECK(parsed->responses[1].is_error());
  CHECK(parsed->responses[1].status() ==
        absl::InvalidArgumentError("mismatched shapes: [10] vs [11]"));
  CHECK(parsed->responses[0].shapes[2] == std::vector<int64_t>{2, 3, 1LL << 33});
}

TEST_CASE("SharedConfig round-trips", "[wire_codec]") {
  SharedConfig config;
  config.protocol_version = 7;
  config.fusion_threshold_bytes = 1LL << 36;
  config.pipeline_chunk_bytes = 4096;
  config.inplace_min_bytes = 12345;
  config.cache_capacity = 1 << 20;
  config.num_nccl_streams = 3;
  config.hierarchical_allreduce = GENERATE(false, true);
  config.hierarchical_allgather = GENERATE(false, true);
  auto parsed = ParseSharedConfig(SerializeSharedConfig(config));
  REQUIRE(parsed.ok());
  CHECK(*parsed == config);
  CHECK_FALSE(parsed->autotune_start.has_value());
  config.autotune_start = TunedParameters{1 << 20, 1 << 16, 1 << 10, absl::Milliseconds(3), false};
  config.autotune_generation = 17;
  parsed = ParseSharedConfig(SerializeSharedConfig(config));
  REQUIRE(parsed.ok());
  CHECK(*parsed == config);
}

TEST_CASE("Tuned parameters the runtime cannot run with are rejected", "[wire_codec]") {
  const TunedParameters good{1 << 20, 1 << 16, 1 << 10, absl::Milliseconds(3), std::nullopt};
  auto [bad, reason] = GENERATE_COPY(table<TunedParameters, std::string>({
      {TunedParameters{-1, 1 << 16, 0, absl::Milliseconds(3), std::nullopt}, "fusion threshold -1"},
      {TunedParameters{0, 4095, 0, absl::Milliseconds(3), std::nullopt}, "pipeline chunk 4095"},
      {TunedParameters{0, 4096, -2, absl::Milliseconds(3), std::nullopt}, "in-place minimum -2"},
      {TunedParameters{0, 4096, 0, absl::ZeroDuration(), std::nullopt}, "cycle time 0 ns"},
  }));
  ResponseList list;
  list.autotune = AutotuneUpdate{good, bad, false};
  auto parsed = ParseResponseList(SerializeResponseList(list));
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(parsed.status().message()), Catch::Contains(reason));
  SharedConfig config;
  config.autotune_start = bad;
  CHECK(ParseSharedConfig(SerializeSharedConfig(config)).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

// Bytes that are not a protobuf message: a truncated varint, a field with the invalid wire
// type 7, and a length-delimited field whose length runs past the end.
TEST_CASE("Bytes that do not parse are rejected", "[wire_codec]") {
  const std::string bytes = GENERATE(std::string("\xff\xff\xff", 3), std::string("\x0f\x01", 2),
                                     std::string("\x0a\x10\x01", 3));
  CHECK(ParseRequestList(bytes).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ParseResponseList(bytes).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ParseSharedConfig(bytes).status().code() == absl::StatusCode::kInvalidArgument);
}

// Hand-encoded lists holding one message with one field out of range. Each is (field 1,
// length-delimited, length L) followed by (field N, varint, value).
TEST_CASE("Out-of-range enum values in a request are rejected", "[wire_codec]") {
  auto [bytes, reason] = GENERATE(table<std::string, std::string>({
      {std::string("\x0a\x02\x10\x09", 4), "invalid op type 9"},
      {std::string("\x0a\x02\x20\x0a", 4), "invalid dtype 10"},
      {std::string("\x0a\x02\x30\x06", 4), "invalid reduce op 6"},
      {std::string("\x0a\x0b\x20\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 13), "invalid dtype -1"},
  }));
  auto parsed = ParseRequestList(bytes);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(parsed.status().message()), Catch::Contains(reason));
}

TEST_CASE("Out-of-range values in a response are rejected", "[wire_codec]") {
  auto [bytes, reason] = GENERATE(table<std::string, std::string>({
      {std::string("\x0a\x02\x08\x09", 4), "invalid op type 9"},
      {std::string("\x0a\x02\x18\x0a", 4), "invalid dtype 10"},
      {std::string("\x0a\x02\x20\x07", 4), "invalid reduce op 7"},
      {std::string("\x0a\x02\x68\x11", 4), "invalid error code 17"},
      // shape_ranks (field 10) and shape_dims (field 11) that disagree.
      {std::string("\x0a\x02\x50\x02", 4), "shape_ranks need more"},
      {std::string("\x0a\x04\x50\x00\x58\x05", 6), "not covered by shape_ranks"},
      {std::string("\x0a\x0b\x50\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 13),
       "shape_ranks need more"},
  }));
  auto parsed = ParseResponseList(bytes);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(parsed.status().message()), Catch::Contains(reason));
}

TEST_CASE("A hand-encoded flattened shape is split per tensor", "[wire_codec]") {
  // One response: shape_ranks = [1, 0, 2], shape_dims = [5, 6, 7].
  const std::string bytes("\x0a\x0c\x50\x01\x50\x00\x50\x02\x58\x05\x58\x06\x58\x07", 14);
  auto parsed = ParseResponseList(bytes);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->responses.size() == 1);
  CHECK(parsed->responses[0].shapes == std::vector<std::vector<int64_t>>{{5}, {}, {6, 7}});
}

}  // namespace
}  // namespace chorus::runtime
