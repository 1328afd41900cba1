// File: runtime/negotiate/wire_codec.h
//
// The one place where negotiation messages meet protobuf (proto/negotiation.proto). Parse
// functions validate enum values and shapes (IsValidShape in runtime/message.h; allgather first
// dimensions in [0, kMaxElements]) and return InvalidArgument (never crash) on malformed input.
// Thread-safety: stateless.
#ifndef CHORUS_RUNTIME_NEGOTIATE_WIRE_CODEC_H_
#define CHORUS_RUNTIME_NEGOTIATE_WIRE_CODEC_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "runtime/message.h"

namespace chorus::runtime {

std::string SerializeRequestList(const RequestList& list);
absl::StatusOr<RequestList> ParseRequestList(std::string_view bytes);

std::string SerializeResponseList(const ResponseList& list);
absl::StatusOr<ResponseList> ParseResponseList(std::string_view bytes);

std::string SerializeSharedConfig(const SharedConfig& config);
absl::StatusOr<SharedConfig> ParseSharedConfig(std::string_view bytes);

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_NEGOTIATE_WIRE_CODEC_H_
