// Fuzzes the UCX worker addresses a rank receives from its peers (ops/ucx/ucx_transport.h):
// UcxTransport::Connect decodes every rank's bytes (chorus's header: magic, host length, host)
// and hands the UCP part to UCX. Every other rank's address is a real peer's WorkerAddress():
// as it is, re-encoded with another host identity, with a host length reaching past its end, cut
// short within the header or the host, or with a broken magic.
//
// Input (FuzzedDataProvider): the world size (1-4) and this rank, then for every other rank how
// its address is made (and the bytes for it).
//
// Properties: no crash; Connect answers OK, InvalidArgument (malformed) or Unavailable (UCX cannot
// reach the rank); a connected endpoint asks for UCX's peer-failure handling exactly when the
// rank's host identity differs from this worker's.
//
// The UCP part is opaque: UCX parses it with no length (ucp_ep_create), so this target never
// hands UCX bytes other than a real address, or a real address with a changed header.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "base/interrupt.h"
#include "ops/ucx/ucx_transport.h"
#include "test/fuzz/fuzz_check.h"

namespace chorus::ops {
namespace {

constexpr size_t kHeader = 8;  // "CUX1", host length (4 bytes, little endian)

// A worker of this input, whose endpoints are abandoned, not flushed, when it goes: `done` is
// raised first. (Flushing would wait the no-progress bound for peers that never progress.) On the
// loopback device only: interfaces that come and go on the machine must not fail the target.
std::unique_ptr<UcxTransport> Worker(const std::shared_ptr<chorus::Interrupt>& done) {
  UcxTransportOptions options;
  options.interrupt = done;
  options.ucx_config = {{"NET_DEVICES", "lo"}};
  absl::StatusOr<std::unique_ptr<UcxTransport>> t = UcxTransport::Create(options);
  FUZZ_CHECK(t.ok()) << t.status();
  return *std::move(t);
}

uint32_t HostLength(const std::string& address) {
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) {
    n |= static_cast<uint32_t>(static_cast<unsigned char>(address[4 + i])) << (8 * i);
  }
  return n;
}

std::string Encode(const std::string& host, uint32_t declared, const std::string& ucp) {
  std::string out = "CUX1";
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((declared >> (8 * i)) & 0xff));
  return out + host + ucp;
}

}  // namespace
}  // namespace chorus::ops

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::ops;
  FuzzedDataProvider in(data, size);
  // The worker every other rank's address comes from: one per input, as this rank's own, so
  // that neither keeps the other's connections once the input is done (a worker never driven
  // holds every connection made to it).
  auto done = std::make_shared<chorus::Interrupt>();
  const std::unique_ptr<UcxTransport> peer_worker = Worker(done);
  const std::unique_ptr<UcxTransport> self = Worker(done);
  const std::string& peer = peer_worker->WorkerAddress();
  const uint32_t peer_host_length = HostLength(peer);
  const std::string peer_host = peer.substr(kHeader, peer_host_length);
  const std::string peer_ucp = peer.substr(kHeader + peer_host_length);

  const int n = in.ConsumeIntegralInRange<int>(1, 4);
  const int rank = in.ConsumeIntegralInRange<int>(0, n - 1);
  std::vector<std::string> addresses(n);
  // Whether rank r's bytes are a well-formed address, and its host identity then.
  std::vector<bool> well_formed(n, true);
  std::vector<std::string> hosts(n, peer_host);
  for (int r = 0; r < n; ++r) {
    if (r == rank) {
      addresses[r] = self->WorkerAddress();
      hosts[r] = addresses[r].substr(kHeader, HostLength(addresses[r]));
      continue;
    }
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0:
        addresses[r] = peer;
        break;
      case 1: {  // another host identity, declared with its true length
        hosts[r] = in.ConsumeRandomLengthString(300);
        addresses[r] = Encode(hosts[r], static_cast<uint32_t>(hosts[r].size()), peer_ucp);
        break;
      }
      case 2: {  // a host length reaching past the end: the UCP part would be missing
        const uint32_t shown = static_cast<uint32_t>(peer_host.size() + peer_ucp.size());
        const uint32_t declared = in.ConsumeIntegralInRange<uint32_t>(shown, UINT32_MAX);
        addresses[r] = Encode(peer_host, declared, peer_ucp);
        well_formed[r] = false;
        break;
      }
      case 3: {  // cut short within the header or the host
        addresses[r] =
            peer.substr(0, in.ConsumeIntegralInRange<size_t>(0, kHeader + peer_host_length));
        well_formed[r] = false;
        break;
      }
      case 4: {  // the magic changed
        addresses[r] = peer;
        addresses[r][in.ConsumeIntegralInRange<size_t>(0, 3)] ^=
            static_cast<char>(in.ConsumeIntegralInRange<int>(1, 255));
        well_formed[r] = false;
        break;
      }
    }
  }
  bool any_misdeclared = false;
  for (int r = 0; r < n; ++r) any_misdeclared = any_misdeclared || !well_formed[r];

  const absl::Status connected = self->Connect(rank, addresses);
  if (connected.ok()) {
    FUZZ_CHECK(!any_misdeclared) << "Connect accepted a malformed address";
    for (int r = 0; r < n; ++r) {
      FUZZ_CHECK(self->peer_error_handling(r) == (hosts[r] != hosts[rank]))
          << "rank " << r << ": peer-failure handling does not follow the host identity";
    }
  } else {
    FUZZ_CHECK(absl::IsInvalidArgument(connected) || absl::IsUnavailable(connected)) << connected;
  }
  done->Raise(absl::CancelledError("input done"));
  return 0;
}
