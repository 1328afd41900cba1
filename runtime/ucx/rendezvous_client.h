// File: runtime/ucx/rendezvous_client.h
//
// The worker side of the rendezvous service of MPI-less launches (the server runs in chorusrun:
// launcher/engine/rendezvous_server.h; the protocol is proto/rendezvous.proto): publish this
// process's UCX worker address, fetch everyone else's. Every call sends the job's secret in the
// clear over plain TCP (the job's network is trusted). No call waits longer than its timeout plus
// the client's call_timeout. Errors (absl codes equal gRPC's; every message names the server's
// address and what failed): Unavailable when no connection can be made or the server shuts down
// while a Get waits; DeadlineExceeded when a Get's timeout passes first, naming the keys not yet
// published; Unauthenticated for a wrong secret; InvalidArgument / ResourceExhausted /
// AlreadyExists as the server answers them. The messages, and a usage example: docs/launcher.md.
//
// Thread-safety: thread-safe (calls from several threads run concurrently).
#ifndef CHORUS_RUNTIME_UCX_RENDEZVOUS_CLIENT_H_
#define CHORUS_RUNTIME_UCX_RENDEZVOUS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "proto/rendezvous.pb.h"
#include "runtime/ucx/address_exchange.h"

namespace chorus::runtime {

class RendezvousClient {
 public:
  // `address` is "host:port" (IPv6: "[::1]:port"); `secret` the job's (non-empty).
  // `call_timeout` bounds each call beyond the wait a Get asks for: connecting, sending,
  // answering. `generation` (an elastic job's; 0 otherwise) goes with every Put and Get: the
  // server refuses a stale one with FailedPrecondition. Does not connect yet (the first call
  // does). InvalidArgument for empty arguments or a non-positive call_timeout.
  static absl::StatusOr<std::unique_ptr<RendezvousClient>> Create(
      const std::string& address, const std::string& secret,
      absl::Duration call_timeout = absl::Seconds(30), int64_t generation = 0);

  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  const std::string& address() const { return address_; }
  int64_t generation() const { return generation_; }

  // Stores `value` under (scope, key); the same value again is OK, another one AlreadyExists.
  absl::Status Put(const std::string& scope, const std::string& key, const std::string& value);

  // The value of (scope, key), waiting up to `timeout` for it to be published (ZeroDuration:
  // only what is there now).
  absl::StatusOr<std::string> Get(const std::string& scope, const std::string& key,
                                  absl::Duration timeout);

  // The values of `keys` (non-empty) in their order, in one call that waits up to `timeout`
  // for all of them.
  absl::StatusOr<std::vector<std::string>> GetMany(const std::string& scope,
                                                   absl::Span<const std::string> keys,
                                                   absl::Duration timeout);

  // Elastic jobs: the job's current generation once it is above `known_generation` (-1: none
  // known), else after `timeout` the current one (nullopt while none was published). Each call is
  // a heartbeat of `worker_id`.
  absl::StatusOr<std::optional<chorus::rendezvous::Generation>> Watch(const std::string& worker_id,
                                                                      int64_t known_generation,
                                                                      absl::Duration timeout);

  // Publishes `mine` under key str(rank) of `scope`, then returns the values of keys
  // "0" .. str(size - 1) in rank order, all within `timeout`. InvalidArgument unless
  // 0 <= rank < size.
  absl::StatusOr<std::vector<std::string>> AllGather(const std::string& scope, int rank, int size,
                                                     const std::string& mine,
                                                     absl::Duration timeout);

 private:
  struct Connection;  // the gRPC channel and stub
  RendezvousClient(std::string address, std::string secret, absl::Duration call_timeout,
                   int64_t generation, std::unique_ptr<Connection> connection);

  const std::string address_;
  const std::string secret_;
  const absl::Duration call_timeout_;
  const int64_t generation_;
  const std::unique_ptr<Connection> connection_;
};

// AddressExchange over a RendezvousClient, for one world: `scope` names the world ("world/0";
// an elastic reset uses a new one), `rank` and `size` are this process's place in it, and each
// AllGather waits up to `timeout` for every rank. AllGather is collective: every rank of the
// world calls it the same number of times; the n-th call (from 0) gathers in scope
// "<scope>/<n>", so that a later call never sees values of an earlier one.
// Thread-safety: thread-compatible.
class RendezvousAddressExchange final : public AddressExchange {
 public:
  RendezvousAddressExchange(std::shared_ptr<RendezvousClient> client, std::string scope, int rank,
                            int size, absl::Duration timeout);

  absl::StatusOr<std::vector<std::string>> AllGather(const std::string& mine) override;

 private:
  std::shared_ptr<RendezvousClient> client_;
  std::string scope_;
  int rank_;
  int size_;
  absl::Duration timeout_;
  int64_t calls_ = 0;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_UCX_RENDEZVOUS_CLIENT_H_
