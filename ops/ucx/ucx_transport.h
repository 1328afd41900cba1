// File: ops/ucx/ucx_transport.h
//
// UcxTransport: the TagTransport of MPI-less launches, on UCP tag messaging (one UCP context and
// worker per transport, one endpoint per rank). Usable once Connect has every rank's
// WorkerAddress(); a world that loses a rank is not repaired: form a new one with a new
// transport (Note [Forming a UCX world] in docs/ucx_transport.md).
// Guarantees: TagTransport's matching and ordering; a Wait in which no request finishes for
// `no_progress_timeout` fails with Unavailable naming the ranks it waited on, so a dead peer UCX
// does not report cannot hang the job; a raised `interrupt` fails it with its reason; errors are
// final: the first error of a request (a lost peer, the no-progress bound, the interrupt, a
// transport failure) ends every request at once and is returned by every later call.
//
// Buffers: a request's buffer stays valid until Wait has returned for its id, or, for an id
// never waited on, until the transport has failed or is destroyed. Once a Wait, Isend or Irecv
// has returned a final error (any but InvalidArgument and FailedPrecondition), every buffer of
// every request may be freed at once: the transport never touches them again, nor lets UCX do
// so in this process (it never progresses the worker after a failure). A peer that is still running
// may go on reading an abandoned send buffer (a rendezvous GET by CMA or RDMA), and so receive
// whatever it then holds. Note [Abandoning requests] in docs/ucx_transport.md.
//
// Threading: one thread at a time, not necessarily the creating one (UCS_THREAD_MODE_SERIALIZED,
// no locks); no progress thread: Wait polls. Tags, peer-failure handling, UCX's memory hooks
// (TSan needs UCX_MEM_MMAP_HOOK_MODE=none): docs/ucx_transport.md.
#ifndef CHORUS_OPS_UCX_UCX_TRANSPORT_H_
#define CHORUS_OPS_UCX_UCX_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include <ucp/api/ucp.h>

#include "base/interrupt.h"
#include "ops/ucx/tag_transport.h"

namespace chorus::ops {

// Which endpoints ask UCX to report a lost peer (Note [UCX peer failure and shared memory] in
// docs/ucx_transport.md).
enum class PeerErrorHandling {
  kRemotePeers,  // ranks on other hosts; ranks on this host use shared memory
  kAllPeers,     // every rank (ranks on this host then use TCP loopback)
};

struct UcxTransportOptions {
  // Longest a single Wait may go without any of its requests finishing before it fails with
  // Unavailable. Generous by default: it must exceed the slowest legitimate message.
  absl::Duration no_progress_timeout = absl::Seconds(60);
  PeerErrorHandling error_handling = PeerErrorHandling::kRemotePeers;
  // UCX keepalive period on PEER endpoints (UCX's KEEPALIVE_INTERVAL); zero keeps UCX's default.
  absl::Duration keepalive_interval = absl::ZeroDuration();
  // Extra UCP context settings, as UCX_<name> would set them, e.g. {"TLS", "tcp"}. (UCX also
  // reads its own UCX_* environment variables; these override them.) A bad value is an error;
  // UCX only warns about an unknown name.
  std::vector<std::pair<std::string, std::string>> ucx_config;
  // When set and raised (by any thread), a Wait in progress fails within about a millisecond
  // with the interrupt's reason, and so does every later one (errors are final); a destructor
  // then abandons what is in flight instead of flushing it. An elastic job's worker raises it
  // when chorusrun aborts the generation this world belongs to.
  std::shared_ptr<const Interrupt> interrupt;
};

class UcxTransport : public TagTransport {
 public:
  // Rank fields: the low kSenderBits of a UCP tag carry the sender.
  static constexpr int kSenderBits = 20;
  static constexpr int kMaxRanks = 1 << kSenderBits;

  // Opens a UCP context and worker. InvalidArgument for a bad ucx_config entry, Internal when
  // UCX fails.
  static absl::StatusOr<std::unique_ptr<UcxTransport>> Create(UcxTransportOptions options = {});
  // Releases UCX. Requests never waited on: when the transport has failed, or its interrupt is
  // raised (before or during the destruction), they are ended at once as a failure ends them;
  // otherwise receives are cancelled and sends flushed to their peers as the endpoints close,
  // bounded by the no-progress timeout (their buffers must stay valid until this returns).
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  // The bytes every rank passes to Connect: this worker's UCP address and host identity.
  const std::string& WorkerAddress() const { return address_; }

  // Connects to the world: `addresses[r]` is rank r's WorkerAddress() (this one at `rank`). Local
  // and non-blocking. InvalidArgument for malformed or mismatched addresses, Unavailable when UCX
  // cannot reach a rank, FailedPrecondition when already connected.
  absl::Status Connect(int rank, const std::vector<std::string>& addresses);
  bool connected() const { return size_ > 0; }

  // Whether the endpoint to `peer` uses UCP_ERR_HANDLING_MODE_PEER. REQUIRES: connected().
  bool peer_error_handling(int peer) const;

  // Before Connect: rank 0 of a world of 0 ranks (every Isend/Irecv fails).
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t max_tag() const override { return kMaxWorldTag; }
  absl::StatusOr<RequestId> Isend(int peer, uint64_t tag, const void* data, int64_t bytes) override;
  absl::StatusOr<RequestId> Irecv(int peer, uint64_t tag, void* data, int64_t bytes) override;
  absl::Status Wait(absl::Span<const RequestId> ids) override;

 private:
  struct Peer;
  struct Request;

  explicit UcxTransport(UcxTransportOptions options);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

  absl::Status CheckCall(int peer, uint64_t tag, const void* data, int64_t bytes);
  absl::StatusOr<RequestId> Start(int peer, bool recv, int64_t bytes, void* ucx_result);
  Request* Lookup(RequestId id);
  void Release(Request* request);
  bool Poll(Request* request);  // true once finished
  absl::Status Finish(const Request& request) const;
  bool Interrupted() const;
  const Peer* LostPeer() const;  // one whose endpoint reported an error, if any
  // Makes `status` final and ends every request at once: cancels, force-closes, abandons the
  // rest (Note [Abandoning requests]). Called only where the caller's buffers are still valid.
  void Fail(const absl::Status& status);
  // Force-closes the endpoints with peer error handling; the others stay open.
  void ForceCloseEndpoints();
  // The destructor of a transport that has not failed: cancels receives, closes the endpoints
  // flushing them, and lets sends finish, within the no-progress bound and until the interrupt
  // is raised (then Fail).
  void CloseGracefully();

  UcxTransportOptions options_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::string host_;     // "hostname/boot id"
  std::string address_;  // what Connect expects from every rank
  int rank_ = 0;
  int size_ = 0;
  // By rank. A Peer is the error callback argument of its endpoint, so it lives as long as the
  // worker (retired_peers_: those of a failed Connect).
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<std::unique_ptr<Peer>> retired_peers_;
  std::vector<std::unique_ptr<Request>> requests_;  // slots; RequestId = generation:index
  std::vector<uint32_t> free_slots_;
  absl::Status failed_;  // the final error, once there is one
};

}  // namespace chorus::ops

#endif  // CHORUS_OPS_UCX_UCX_TRANSPORT_H_
