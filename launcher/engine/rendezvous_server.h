// File: launcher/engine/rendezvous_server.h
//
// The rendezvous service of MPI-less launches (chorusrun --gloo), run inside chorusrun: a
// key/value store over gRPC (proto/rendezvous.proto) through which workers publish their UCX
// worker addresses and fetch everyone else's (client: runtime/ucx/rendezvous_client.h). Keys
// live in scopes; a key is written once (the same value again is a no-op, another value is
// AlreadyExists), and Gets wait server-side until their keys exist. A call without the job's
// secret is answered Unauthenticated without touching the store; the secret and the values
// travel in clear (the job's network is trusted). Every limit in RendezvousServerOptions is
// answered without harm (InvalidArgument, ResourceExhausted). In elastic jobs the server also
// holds the job's current generation (PublishGeneration), answers the workers' Watch long-polls
// with it, refuses calls of stale generations, and records each Watch as the worker's heartbeat
// (SilentWorkers). Scopes, security, limits and a usage example: docs/launcher.md.
//
// Threads: gRPC's synchronous server; each waiting Get holds one of its threads until its keys
// exist, its timeout (or its caller's deadline) passes, or Shutdown().
// Thread-safety: thread-safe.
#ifndef CHORUS_LAUNCHER_ENGINE_RENDEZVOUS_SERVER_H_
#define CHORUS_LAUNCHER_ENGINE_RENDEZVOUS_SERVER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "proto/rendezvous.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace chorus::launcher {

struct RendezvousServerOptions {
  // Address to listen on; "0.0.0.0" (all IPv4 interfaces), "::", "127.0.0.1", a host name.
  std::string host = "0.0.0.0";
  // 0: an ephemeral port, reported by port().
  int port = 0;
  // Required, non-empty: see GenerateRendezvousSecret().
  std::string secret;
  int64_t max_value_bytes = int64_t{16} << 20;
  int64_t max_keys_per_scope = 65536;
  // Sum over the store of scope + key + value sizes.
  int64_t max_total_bytes = int64_t{1} << 30;
  // Sum of the values one Get answers.
  int64_t max_reply_bytes = int64_t{256} << 20;
};

// 32 random bytes from /dev/urandom as 64 lowercase hex digits. Internal if it cannot be read.
absl::StatusOr<std::string> GenerateRendezvousSecret();

class RendezvousServer {
 public:
  // Listens on options.host:options.port and serves until Shutdown() or destruction.
  // InvalidArgument for bad options; Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(
      const RendezvousServerOptions& options);

  // Shutdown().
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // The bound port (the ephemeral one when options.port was 0).
  int port() const { return port_; }

  // Waiting Gets return Unavailable "rendezvous shutting down" at once, later calls fail, and
  // the listening port is closed. Blocks until every call in progress has returned. Idempotent.
  void Shutdown();

  // Elastic jobs (Watch in proto/rendezvous.proto). Makes `generation` the job's current one
  // and answers every waiting Watch with it; from then on Puts and Gets of older generations are
  // refused (FailedPrecondition "stale generation"), waiting ones at once. InvalidArgument unless
  // its number is above the current one.
  absl::Status PublishGeneration(chorus::rendezvous::Generation generation);
  // The current generation's number; -1 before the first publish (calls of generation 0 are
  // then accepted).
  int64_t generation() const;
  // Worker ids whose last Watch arrived more than `silence` ago, sorted. A worker is tracked
  // from its first Watch until ForgetWorker.
  std::vector<std::string> SilentWorkers(absl::Duration silence) const;
  // Whether worker `worker_id` has called Watch since it was started (or last forgotten): a
  // joining worker is ready once it has (it called chorus init).
  bool Heard(const std::string& worker_id) const;
  void ForgetWorker(const std::string& worker_id);

  // Blocks until at least n Gets are waiting for missing keys (for tests: sequence a Put after
  // a Get without sleeping).
  void TEST_AwaitWaitingGets(int n);
  // Blocks until at least n Watches are waiting for a generation.
  void TEST_AwaitWaitingWatches(int n);

 private:
  class Service;
  RendezvousServer(std::unique_ptr<Service> service, std::unique_ptr<grpc::Server> server,
                   int port);

  // service_ outlives server_ (members are destroyed in reverse order).
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_;
  std::once_flag shutdown_once_;
};

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_ENGINE_RENDEZVOUS_SERVER_H_
