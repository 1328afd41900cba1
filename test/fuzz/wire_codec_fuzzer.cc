// Fuzzes the negotiation wire format (runtime/negotiate/wire_codec.h) in both directions:
// - decoding: the input's bytes as a RequestList (rank 0 gathers one from every rank), a
//   ResponseList (every rank receives rank 0's) and a SharedConfig (rank 0's at init);
// - encoding: a RequestList and a ResponseList built field by field from the input
//   (FuzzedDataProvider), with any bytes in names, group keys and error messages (a tensor's
//   name is whatever its framework or the C ABI passed) and shapes a rank can submit, encoded,
//   then decoded as a peer would.
// The first byte chooses: even, decoding; odd, encoding.
//
// Properties: no crash; a malformed message is InvalidArgument; a decoded message encodes to
// bytes that decode to the same message; every message a rank encodes decodes on its peers to
// what it sent.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

#include "chorus/types.h"
#include "runtime/message.h"
#include "runtime/negotiate/wire_codec.h"
#include "test/fuzz/fuzz_check.h"

namespace chorus::runtime {
namespace {

template <typename T>
void RoundTrip(std::string_view bytes, absl::StatusOr<T> (*parse)(std::string_view),
               std::string (*serialize)(const T&), const char* what) {
  absl::StatusOr<T> decoded = parse(bytes);
  if (!decoded.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(decoded.status())) << what << ": " << decoded.status();
    return;
  }
  const std::string encoded = serialize(*decoded);
  absl::StatusOr<T> again = parse(encoded);
  FUZZ_CHECK(again.ok()) << what << " does not decode after encoding: " << again.status();
  FUZZ_CHECK(serialize(*again) == encoded) << what << " changes in a round trip";
}

template <typename T>
std::vector<T> Values(FuzzedDataProvider& in) {
  std::vector<T> values(in.ConsumeIntegralInRange<size_t>(0, 4));
  for (T& v : values) v = in.ConsumeIntegral<T>();
  return values;
}

// A shape a rank can send (IsValidShape): up to 3 dimensions of at most 2^18.
std::vector<int64_t> Shape(FuzzedDataProvider& in) {
  std::vector<int64_t> shape(in.ConsumeIntegralInRange<size_t>(0, 3));
  for (int64_t& d : shape) d = in.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 18);
  return shape;
}

// A valid enum value of the wire's (the encoder only ever sends those).
template <typename E>
E Enum(FuzzedDataProvider& in, int32_t max) {
  return static_cast<E>(in.ConsumeIntegralInRange<int32_t>(0, max));
}

Request MakeRequest(FuzzedDataProvider& in) {
  Request r;
  r.request_rank = in.ConsumeIntegral<int32_t>();
  r.type = Enum<OpType>(in, static_cast<int32_t>(OpType::kRemoveProcessSet));
  r.name = in.ConsumeRandomLengthString(32);
  r.dtype = Enum<DataType>(in, 0);
  r.shape = Shape(in);
  r.reduce_op = Enum<ReduceOp>(in, 0);
  r.prescale_factor = in.ConsumeFloatingPoint<double>();
  r.postscale_factor = in.ConsumeFloatingPoint<double>();
  r.root_rank = in.ConsumeIntegral<int32_t>();
  r.device = in.ConsumeIntegral<int32_t>();
  r.process_set_id = in.ConsumeIntegral<int32_t>();
  r.group_key = in.ConsumeRandomLengthString(16);
  r.group_size = in.ConsumeIntegral<int32_t>();
  r.splits = Values<int64_t>(in);
  r.process_set_ranks = Values<int32_t>(in);
  r.wire_dtype = in.ConsumeBool() ? -1 : 0;
  return r;
}

Response MakeResponse(FuzzedDataProvider& in) {
  Response r;
  r.type = Enum<OpType>(in, static_cast<int32_t>(OpType::kRemoveProcessSet));
  r.names.resize(in.ConsumeIntegralInRange<size_t>(0, 3));
  for (std::string& name : r.names) name = in.ConsumeRandomLengthString(32);
  r.dtype = Enum<DataType>(in, 0);
  r.reduce_op = Enum<ReduceOp>(in, 0);
  r.prescale_factor = in.ConsumeFloatingPoint<double>();
  r.postscale_factor = in.ConsumeFloatingPoint<double>();
  r.root_rank = in.ConsumeIntegral<int32_t>();
  r.device = in.ConsumeIntegral<int32_t>();
  r.process_set_id = in.ConsumeIntegral<int32_t>();
  r.shapes.resize(r.names.size());
  for (std::vector<int64_t>& shape : r.shapes) shape = Shape(in);
  r.first_dims.resize(in.ConsumeIntegralInRange<size_t>(0, 4));
  for (int64_t& d : r.first_dims) d = in.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 40);
  r.error_code =
      Enum<absl::StatusCode>(in, static_cast<int32_t>(absl::StatusCode::kUnauthenticated));
  r.error_message = in.ConsumeRandomLengthString(64);
  r.last_joined_rank = in.ConsumeIntegral<int32_t>();
  r.new_process_set_id = in.ConsumeIntegral<int32_t>();
  r.process_set_ranks = Values<int32_t>(in);
  r.group_key = in.ConsumeRandomLengthString(16);
  r.wire_dtype = in.ConsumeBool() ? -1 : 0;
  return r;
}

void Encode(FuzzedDataProvider& in) {
  RequestList requests;
  requests.requests.resize(in.ConsumeIntegralInRange<size_t>(0, 3));
  for (Request& r : requests.requests) r = MakeRequest(in);
  requests.shutdown = in.ConsumeBool();
  const std::string request_bytes = SerializeRequestList(requests);
  absl::StatusOr<RequestList> got_requests = ParseRequestList(request_bytes);
  FUZZ_CHECK(got_requests.ok()) << "a peer cannot decode a request list: " << got_requests.status();
  FUZZ_CHECK(SerializeRequestList(*got_requests) == request_bytes) << "request list changed";
  FUZZ_CHECK(got_requests->requests.size() == requests.requests.size());
  for (size_t i = 0; i < requests.requests.size(); ++i) {
    FUZZ_CHECK(got_requests->requests[i].name == requests.requests[i].name) << "name changed";
  }

  ResponseList responses;
  responses.responses.resize(in.ConsumeIntegralInRange<size_t>(0, 3));
  for (Response& r : responses.responses) r = MakeResponse(in);
  responses.shutdown = in.ConsumeBool();
  responses.joined_ranks = Values<int32_t>(in);
  const std::string response_bytes = SerializeResponseList(responses);
  absl::StatusOr<ResponseList> got_responses = ParseResponseList(response_bytes);
  FUZZ_CHECK(got_responses.ok()) << "a peer cannot decode a response list: "
                                 << got_responses.status();
  FUZZ_CHECK(SerializeResponseList(*got_responses) == response_bytes) << "response list changed";
  FUZZ_CHECK(got_responses->responses.size() == responses.responses.size());
  for (size_t i = 0; i < responses.responses.size(); ++i) {
    FUZZ_CHECK(got_responses->responses[i].names == responses.responses[i].names);
    FUZZ_CHECK(got_responses->responses[i].error_message == responses.responses[i].error_message);
  }
}

}  // namespace
}  // namespace chorus::runtime

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::runtime;
  if (size < 1) return 0;
  if (data[0] & 1) {
    FuzzedDataProvider in(data + 1, size - 1);
    Encode(in);
    return 0;
  }
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  RoundTrip<RequestList>(bytes, &ParseRequestList, &SerializeRequestList, "request list");
  RoundTrip<ResponseList>(bytes, &ParseResponseList, &SerializeResponseList, "response list");
  RoundTrip<SharedConfig>(bytes, &ParseSharedConfig, &SerializeSharedConfig, "shared config");
  return 0;
}
