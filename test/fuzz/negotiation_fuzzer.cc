// Fuzzes rank 0's side of negotiation over what its peers send (runtime/negotiate/coordinator.h):
// request lists (the input's bytes, or lists built field by field and encoded) decoded as rank 0
// decodes a peer's bytes (runtime/negotiate/wire_codec.h), fed to the Coordinator round after
// round, its ResponseList encoded and decoded as every rank does, and fused
// (runtime/execute/fusion_planner.h) as every rank does.
//
// Input (FuzzedDataProvider): the world size (1-4), init-time process sets, stall times, then
// rounds until the input ends: per rank its requests (as protobuf bytes, or as fields drawn from
// small sets so that names, groups and process sets meet), and the time that passed.
//
// Properties: no crash, no undefined behaviour; every response of a known op type; an OK data
// response carries one name and its shape (allgather: a first dimension per set rank); the
// response list survives encoding; fusion planning keeps every name exactly once.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "chorus/types.h"
#include "runtime/execute/fusion_planner.h"
#include "runtime/message.h"
#include "runtime/negotiate/coordinator.h"
#include "runtime/negotiate/wire_codec.h"
#include "test/fuzz/fuzz_check.h"

namespace chorus::runtime {
namespace {

int64_t Dimension(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      return in.ConsumeIntegral<int64_t>();
    case 1:
      return in.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 40);
    default:
      return in.ConsumeIntegralInRange<int64_t>(0, 4);
  }
}

std::vector<int64_t> Shape(FuzzedDataProvider& in) {
  std::vector<int64_t> shape(in.ConsumeIntegralInRange<size_t>(0, 3));
  for (int64_t& d : shape) d = Dimension(in);
  return shape;
}

std::vector<int32_t> Ranks(FuzzedDataProvider& in, int world_size) {
  std::vector<int32_t> ranks;
  const size_t n = in.ConsumeIntegralInRange<size_t>(0, 4);
  for (size_t i = 0; i < n; ++i)
    ranks.push_back(in.ConsumeIntegralInRange<int32_t>(-1, world_size));
  return ranks;
}

double Factor(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      return in.ConsumeFloatingPoint<double>();
    case 1:
      return 0.5;
    default:
      return 1.0;
  }
}

Request BuildRequest(FuzzedDataProvider& in, int world_size) {
  static const char* const kNames[] = {"grad.0", "grad.1", "grad.2", "w", "join", ""};
  Request r;
  r.type = static_cast<OpType>(in.ConsumeIntegralInRange<int32_t>(0, 8));
  r.name = kNames[in.ConsumeIntegralInRange<size_t>(0, std::size(kNames) - 1)];
  r.dtype = static_cast<DataType>(in.ConsumeIntegralInRange<int32_t>(0, 11));
  if (!IsValidDataType(static_cast<int32_t>(r.dtype))) r.dtype = DataType::kFloat32;
  r.shape = Shape(in);
  r.reduce_op = static_cast<ReduceOp>(in.ConsumeIntegralInRange<int32_t>(0, 5));
  if (!IsValidReduceOp(static_cast<int32_t>(r.reduce_op))) r.reduce_op = ReduceOp::kSum;
  r.prescale_factor = Factor(in);
  r.postscale_factor = Factor(in);
  r.root_rank = in.ConsumeIntegralInRange<int32_t>(-1, world_size);
  r.device = in.ConsumeBool() ? kCpuDevice : in.ConsumeIntegralInRange<int32_t>(0, 1);
  r.process_set_id = in.ConsumeIntegralInRange<int32_t>(-1, 3);
  if (in.ConsumeProbability<float>() < 0.2f) {
    r.group_key = in.ConsumeBool() ? "g" : "h";
    r.group_size = in.ConsumeIntegralInRange<int32_t>(-1, 3);
  }
  if (in.ConsumeProbability<float>() < 0.3f) {
    const size_t n = in.ConsumeIntegralInRange<size_t>(0, 5);
    for (size_t i = 0; i < n; ++i) r.splits.push_back(Dimension(in));
  }
  if (r.type == OpType::kAddProcessSet) r.process_set_ranks = Ranks(in, world_size);
  if (in.ConsumeProbability<float>() < 0.2f) {
    r.wire_dtype = in.ConsumeIntegralInRange<int32_t>(-1, 11);
    if (r.wire_dtype >= 0 && !IsValidDataType(r.wire_dtype)) r.wire_dtype = -1;
  }
  return r;
}

void CheckResponses(const Coordinator& coordinator, const ResponseList& list) {
  for (const Response& r : list.responses) {
    FUZZ_CHECK(static_cast<int32_t>(r.type) >= 0 && static_cast<int32_t>(r.type) <= 8);
    FUZZ_CHECK(!r.names.empty());
    if (r.is_error() || !IsDataOp(r.type)) continue;
    FUZZ_CHECK(r.names.size() == 1 && r.shapes.size() == 1)
        << r.names.size() << " names, " << r.shapes.size() << " shapes";
    if (r.type == OpType::kAllgather) {
      // The set may be gone already: a later response of the same list can remove it.
      const std::vector<int32_t>* set = coordinator.ProcessSetRanks(r.process_set_id);
      if (set != nullptr) {
        FUZZ_CHECK(r.first_dims.size() == set->size()) << r.first_dims.size() << " first dims";
      }
    }
  }
  // Every rank decodes rank 0's bytes.
  const std::string bytes = SerializeResponseList(list);
  absl::StatusOr<ResponseList> decoded = ParseResponseList(bytes);
  FUZZ_CHECK(decoded.ok()) << decoded.status();
  FUZZ_CHECK(SerializeResponseList(*decoded) == bytes);
}

void CheckFusion(const Coordinator& coordinator, const ResponseList& list, int64_t threshold) {
  std::vector<const Response*> in;
  std::map<std::string, int> names;
  for (const Response& r : list.responses) {
    in.push_back(&r);
    for (const std::string& name : r.names) ++names[name];
  }
  const std::vector<Response> plan = PlanFusion(in, threshold, [&](int32_t id) {
    const std::vector<int32_t>* set = coordinator.ProcessSetRanks(id);
    return set == nullptr ? 1 : static_cast<int>(set->size());
  });
  std::map<std::string, int> planned;
  for (const Response& r : plan) {
    for (const std::string& name : r.names) ++planned[name];
  }
  FUZZ_CHECK(planned == names) << "fusion planning lost or duplicated a name";
}

}  // namespace
}  // namespace chorus::runtime

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::runtime;
  FuzzedDataProvider in(data, size);
  const int world_size = in.ConsumeIntegralInRange<int>(1, 4);
  Coordinator::Options options;
  options.stall_warning_time = absl::Seconds(in.ConsumeIntegralInRange<int>(1, 60));
  options.stall_shutdown_time = absl::Seconds(in.ConsumeIntegralInRange<int>(0, 120));
  options.stall_check_disabled = in.ConsumeBool();
  Coordinator coordinator(world_size, options);
  const int32_t init_sets = in.ConsumeIntegralInRange<int32_t>(0, 2);
  for (int32_t id = 1; id <= init_sets; ++id) {
    // Init-time sets are checked by every rank before they reach the coordinator.
    std::vector<int32_t> ranks;
    for (int32_t r = 0; r < world_size; ++r) {
      if (in.ConsumeBool()) ranks.push_back(r);
    }
    if (ranks.empty()) ranks.push_back(0);
    coordinator.RegisterProcessSet(id, ranks);
  }
  const int64_t threshold = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<int64_t>(0, 1 << 20);

  absl::Time now = absl::UnixEpoch();
  while (in.remaining_bytes() > 0) {
    for (int32_t rank = 0; rank < world_size; ++rank) {
      // What the rank sent, as bytes: the input's, or a list built field by field.
      std::string bytes;
      if (in.ConsumeProbability<float>() < 0.1f) {
        bytes = in.ConsumeRandomLengthString(256);
      } else {
        RequestList sent;
        const int n = in.ConsumeIntegralInRange<int>(0, 3);
        for (int i = 0; i < n; ++i) sent.requests.push_back(BuildRequest(in, world_size));
        bytes = SerializeRequestList(sent);
      }
      // Rank 0 decodes it; a malformed list stops the job before the coordinator sees it.
      absl::StatusOr<RequestList> decoded = ParseRequestList(bytes);
      if (decoded.ok()) coordinator.AddRequests(rank, decoded->requests, now);
    }
    now += absl::Seconds(in.ConsumeIntegralInRange<int>(0, 90));
    const ResponseList list = coordinator.BuildResponses(now);
    coordinator.CheckStalls(now);
    CheckResponses(coordinator, list);
    CheckFusion(coordinator, list, threshold);
  }
  return 0;
}
