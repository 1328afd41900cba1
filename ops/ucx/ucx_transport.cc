// File: ops/ucx/ucx_transport.cc
#include "ops/ucx/ucx_transport.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "ops/no_progress.h"

namespace chorus::ops {
namespace {

using Clock = std::chrono::steady_clock;

// WorkerAddress() = kMagic, host length (4 bytes, little endian), host, UCP worker address.
constexpr char kMagic[4] = {'C', 'U', 'X', '1'};
constexpr uint64_t kFullMask = ~uint64_t{0};
// Progress calls without any event before Wait starts yielding the core (a few microseconds).
constexpr uint64_t kIdleSpinsBeforeYield = 256;

std::string HostIdentity() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot_id);
  return std::string(name) + "/" + boot_id;
}

std::string EncodeAddress(const std::string& host, const void* ucp_address, size_t length) {
  std::string out(kMagic, sizeof(kMagic));
  const uint32_t n = static_cast<uint32_t>(host.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += host;
  out.append(static_cast<const char*>(ucp_address), length);
  return out;
}

// Splits an WorkerAddress() into host and UCP address; false when malformed.
bool DecodeAddress(const std::string& in, std::string* host, std::string* ucp_address) {
  if (in.size() < 8 || std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0) return false;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n |= static_cast<uint32_t>(static_cast<unsigned char>(in[4 + i])) << (8 * i);
  if (in.size() <= 8 + static_cast<size_t>(n)) return false;
  *host = in.substr(8, n);
  *ucp_address = in.substr(8 + n);
  return true;
}

std::string UcsError(ucs_status_t status) { return ucs_status_string(status); }

// Statuses that mean the peer is gone. UCS_ERR_SHMEM_SEGMENT: a shared-memory endpoint found
// the peer's segment removed (its worker was destroyed).
bool IsPeerFailure(ucs_status_t status) {
  switch (status) {
    case UCS_ERR_SHMEM_SEGMENT:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_REJECTED:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_CANCELED:
      return true;
    default:
      return false;
  }
}

absl::Status PeerLost(int peer, ucs_status_t why) {
  return absl::UnavailableError("UCX transport: lost rank " + std::to_string(peer) + " (" +
                                UcsError(why) + ")");
}

}  // namespace

struct UcxTransport::Peer {
  UcxTransport* owner = nullptr;
  int rank = 0;
  ucp_ep_h ep = nullptr;
  bool peer_mode = false;      // UCP_ERR_HANDLING_MODE_PEER
  ucs_status_t lost = UCS_OK;  // set by the error callback
};

struct UcxTransport::Request {
  uint32_t index = 0;  // in requests_
  uint32_t generation = 1;
  bool in_use = false;
  bool waiting = false;  // listed in the current Wait
  bool recv = false;
  int peer = 0;
  int64_t bytes = 0;
  void* ucx = nullptr;  // UCP request while in flight
  bool done = false;
  ucs_status_t status = UCS_OK;
  ucp_tag_recv_info_t info{};  // receives: the matched message
};

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(UcxTransportOptions options) {
  std::unique_ptr<UcxTransport> t(new UcxTransport(std::move(options)));
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return absl::InternalError("ucp_config_read: " + UcsError(st));
  absl::Status modified;
  std::vector<std::pair<std::string, std::string>> settings = t->options_.ucx_config;
  if (t->options_.keepalive_interval > absl::ZeroDuration()) {
    settings.emplace_back(
        "KEEPALIVE_INTERVAL",
        std::to_string(absl::ToInt64Microseconds(t->options_.keepalive_interval)) + "us");
  }
  for (const auto& [name, value] : settings) {
    st = ucp_config_modify(config, name.c_str(), value.c_str());
    if (st != UCS_OK) {
      modified =
          absl::InvalidArgumentError("UCX setting " + name + "=" + value + ": " + UcsError(st));
      break;
    }
  }
  if (modified.ok()) {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    st = ucp_init(&params, config, &t->context_);
    if (st != UCS_OK) modified = absl::InternalError("ucp_init: " + UcsError(st));
  }
  ucp_config_release(config);
  if (!modified.ok()) return modified;

  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_FLAGS;
  worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  // The only requests a worker can hold when it is destroyed are those the transport abandoned
  // (every other one is freed once finished); UCX would print a line for each (Note
  // [Abandoning requests] in docs/ucx_transport.md).
  worker_params.flags = UCP_WORKER_FLAG_IGNORE_REQUEST_LEAK;
  st = ucp_worker_create(t->context_, &worker_params, &t->worker_);
  if (st != UCS_OK) return absl::InternalError("ucp_worker_create: " + UcsError(st));

  ucp_address_t* address = nullptr;
  size_t length = 0;
  st = ucp_worker_get_address(t->worker_, &address, &length);
  if (st != UCS_OK) return absl::InternalError("ucp_worker_get_address: " + UcsError(st));
  t->host_ = HostIdentity();
  t->address_ = EncodeAddress(t->host_, address, length);
  ucp_worker_release_address(t->worker_, address);
  return t;
}

UcxTransport::UcxTransport(UcxTransportOptions options) : options_(std::move(options)) {}

UcxTransport::~UcxTransport() {
  if (worker_ != nullptr) {
    // A raised interrupt is a known failure even when no Wait has seen it yet.
    if (failed_.ok() && Interrupted()) Fail(options_.interrupt->reason());
    if (failed_.ok()) CloseGracefully();
    // Left only by CloseGracefully's bound: abandoned like the requests of a failure.
    for (auto& r : requests_) {
      if (r->ucx != nullptr) ucp_request_free(r->ucx);
      r->ucx = nullptr;
    }
    // Endpoints still open (those without peer error handling, after a failure) go with the
    // worker, which releases abandoned requests without running their protocols.
    ucp_worker_destroy(worker_);
  }
  if (context_ != nullptr) ucp_cleanup(context_);
}

void UcxTransport::OnEndpointError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  // Runs inside ucp_worker_progress, on the thread driving this transport.
  auto* peer = static_cast<Peer*>(arg);
  if (peer->lost == UCS_OK) peer->lost = status == UCS_OK ? UCS_ERR_CONNECTION_RESET : status;
}

absl::Status UcxTransport::Connect(int rank, const std::vector<std::string>& addresses) {
  if (connected()) return absl::FailedPreconditionError("UCX transport: already connected");
  const int n = static_cast<int>(addresses.size());
  if (n == 0 || n > kMaxRanks || rank < 0 || rank >= n) {
    return absl::InvalidArgumentError("UCX transport: rank " + std::to_string(rank) +
                                      " of a world of " + std::to_string(n) + " (at most " +
                                      std::to_string(kMaxRanks) + ")");
  }
  if (addresses[static_cast<size_t>(rank)] != address_) {
    return absl::InvalidArgumentError("UCX transport: the address of rank " + std::to_string(rank) +
                                      " is not this worker's");
  }
  std::vector<std::string> hosts(addresses.size()), ucp(addresses.size());
  for (int r = 0; r < n; ++r) {
    if (!DecodeAddress(addresses[static_cast<size_t>(r)], &hosts[static_cast<size_t>(r)],
                       &ucp[static_cast<size_t>(r)])) {
      return absl::InvalidArgumentError("UCX transport: malformed address for rank " +
                                        std::to_string(r));
    }
  }
  std::vector<std::unique_ptr<Peer>> peers;
  absl::Status result;
  for (int r = 0; r < n && result.ok(); ++r) {
    auto peer = std::make_unique<Peer>();
    peer->owner = this;
    peer->rank = r;
    peer->peer_mode = options_.error_handling == PeerErrorHandling::kAllPeers ||
                      hosts[static_cast<size_t>(r)] != host_;
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(ucp[static_cast<size_t>(r)].data());
    params.err_mode = peer->peer_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = &UcxTransport::OnEndpointError;
    params.err_handler.arg = peer.get();
    const ucs_status_t st = ucp_ep_create(worker_, &params, &peer->ep);
    if (st != UCS_OK) {
      peer->ep = nullptr;
      result = absl::UnavailableError("UCX transport: cannot reach rank " + std::to_string(r) +
                                      ": " + UcsError(st));
    }
    peers.push_back(std::move(peer));
  }
  peers_ = std::move(peers);
  if (!result.ok()) {
    ForceCloseEndpoints();
    // The endpoints UCX does not force-close stay open until ucp_worker_destroy, with their
    // Peer as error callback argument.
    for (auto& p : peers_) retired_peers_.push_back(std::move(p));
    peers_.clear();
    return result;
  }
  rank_ = rank;
  size_ = n;
  return absl::OkStatus();
}

bool UcxTransport::peer_error_handling(int peer) const {
  return peers_[static_cast<size_t>(peer)]->peer_mode;
}

absl::Status UcxTransport::CheckCall(int peer, uint64_t tag, const void* data, int64_t bytes) {
  if (!failed_.ok()) return failed_;
  if (!connected()) return absl::FailedPreconditionError("UCX transport: not connected");
  if (peer < 0 || peer >= size_) {
    return absl::InvalidArgumentError("UCX transport: no rank " + std::to_string(peer) +
                                      " in a world of " + std::to_string(size_));
  }
  if (tag > kMaxWorldTag) {
    return absl::InvalidArgumentError("UCX transport: tag " + std::to_string(tag) +
                                      " out of range");
  }
  if (bytes < 0 || (bytes > 0 && data == nullptr)) {
    return absl::InvalidArgumentError("UCX transport: bad buffer (" + std::to_string(bytes) +
                                      " bytes)");
  }
  const Peer& p = *peers_[static_cast<size_t>(peer)];
  if (p.lost != UCS_OK) {
    const absl::Status lost = PeerLost(peer, p.lost);
    Fail(lost);
    return lost;
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestId> UcxTransport::Start(int peer, bool recv, int64_t bytes,
                                              void* ucx_result) {
  if (UCS_PTR_IS_ERR(ucx_result)) {
    const ucs_status_t st = UCS_PTR_STATUS(ucx_result);
    const absl::Status error =
        IsPeerFailure(st) ? PeerLost(peer, st)
                          : absl::InternalError(std::string("UCX transport: ") +
                                                (recv ? "ucp_tag_recv_nbx" : "ucp_tag_send_nbx") +
                                                ": " + UcsError(st));
    Fail(error);
    return error;
  }
  uint32_t index;
  if (free_slots_.empty()) {
    index = static_cast<uint32_t>(requests_.size());
    requests_.push_back(std::make_unique<Request>());
    requests_.back()->index = index;
  } else {
    index = free_slots_.back();
    free_slots_.pop_back();
  }
  Request& r = *requests_[index];
  r.in_use = true;
  r.recv = recv;
  r.peer = peer;
  r.bytes = bytes;
  r.ucx = ucx_result;
  r.done = ucx_result == nullptr;  // finished at once
  r.status = UCS_OK;
  return (static_cast<RequestId>(r.generation) << 32) | index;
}

absl::StatusOr<RequestId> UcxTransport::Isend(int peer, uint64_t tag, const void* data,
                                              int64_t bytes) {
  if (absl::Status st = CheckCall(peer, tag, data, bytes); !st.ok()) return st;
  ucp_request_param_t param{};
  void* r =
      ucp_tag_send_nbx(peers_[static_cast<size_t>(peer)]->ep, data, static_cast<size_t>(bytes),
                       (tag << kSenderBits) | static_cast<uint64_t>(rank_), &param);
  return Start(peer, /*recv=*/false, bytes, r);
}

absl::StatusOr<RequestId> UcxTransport::Irecv(int peer, uint64_t tag, void* data, int64_t bytes) {
  if (absl::Status st = CheckCall(peer, tag, data, bytes); !st.ok()) return st;
  // No immediate completion: UCX 1.13 does not report the length of a message that completes
  // at once (recv_info stays empty), and Finish() checks every length.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  void* r = ucp_tag_recv_nbx(worker_, data, static_cast<size_t>(bytes),
                             (tag << kSenderBits) | static_cast<uint64_t>(peer), kFullMask, &param);
  return Start(peer, /*recv=*/true, bytes, r);
}

UcxTransport::Request* UcxTransport::Lookup(RequestId id) {
  const uint64_t index = static_cast<uint64_t>(id) & 0xffffffffu;
  const uint32_t generation = static_cast<uint32_t>(static_cast<uint64_t>(id) >> 32);
  if (id < 0 || index >= requests_.size()) return nullptr;
  Request* r = requests_[index].get();
  return r->in_use && r->generation == generation ? r : nullptr;
}

void UcxTransport::Release(Request* r) {
  // Finished, or abandoned by Fail: no UCP request is attached any more.
  r->in_use = false;
  r->waiting = false;
  ++r->generation;
  free_slots_.push_back(r->index);
}

bool UcxTransport::Poll(Request* r) {
  if (r->done) return true;
  const ucs_status_t st =
      r->recv ? ucp_tag_recv_request_test(r->ucx, &r->info) : ucp_request_check_status(r->ucx);
  if (st == UCS_INPROGRESS) return false;
  ucp_request_free(r->ucx);
  r->ucx = nullptr;
  r->done = true;
  r->status = st;
  return true;
}

absl::Status UcxTransport::Finish(const Request& r) const {
  if (r.status == UCS_ERR_MESSAGE_TRUNCATED) {
    return absl::InternalError("UCX transport: a message from rank " + std::to_string(r.peer) +
                               " is longer than the " + std::to_string(r.bytes) +
                               " bytes expected");
  }
  if (r.status != UCS_OK) {
    if (IsPeerFailure(r.status)) return PeerLost(r.peer, r.status);
    return absl::InternalError(std::string("UCX transport: ") +
                               (r.recv ? "receive from" : "send to") + " rank " +
                               std::to_string(r.peer) + ": " + UcsError(r.status));
  }
  if (r.recv && static_cast<int64_t>(r.info.length) != r.bytes) {
    return absl::InternalError("UCX transport: a message of " + std::to_string(r.info.length) +
                               " bytes from rank " + std::to_string(r.peer) + ", expected " +
                               std::to_string(r.bytes));
  }
  return absl::OkStatus();
}

absl::Status UcxTransport::Wait(absl::Span<const RequestId> ids) {
  // A bad id is the caller's bug, not the world's: reported, not final, and the valid requests
  // are still waited for (abandoning them would leave UCX using their buffers after the return).
  absl::Status bad_id;
  absl::InlinedVector<Request*, 8> pending;
  for (RequestId id : ids) {
    Request* r = Lookup(id);
    if (r == nullptr || r->waiting) {
      bad_id.Update(absl::InvalidArgumentError("UCX transport: unknown or repeated request id " +
                                               std::to_string(id)));
    } else {
      r->waiting = true;
      pending.push_back(r);
    }
  }
  absl::Status result;
  const auto limit = absl::ToChronoNanoseconds(options_.no_progress_timeout);
  auto last_completion = Clock::now();
  uint64_t spins = 0, idle = 0;
  while (!pending.empty() && failed_.ok()) {
    bool completed = false;
    for (size_t i = 0; i < pending.size();) {
      if (Poll(pending[i])) {
        result.Update(Finish(*pending[i]));
        Release(pending[i]);
        pending[i] = pending.back();
        pending.pop_back();
        completed = true;
      } else {
        ++i;
      }
    }
    if (pending.empty() || !result.ok()) break;
    // A lost peer never finishes the requests that involve it.
    for (const Request* r : pending) {
      const Peer& p = *peers_[static_cast<size_t>(r->peer)];
      if (p.lost != UCS_OK) {
        result = PeerLost(r->peer, p.lost);
        break;
      }
    }
    if (!result.ok()) break;
    const unsigned events = ucp_worker_progress(worker_);
    if (completed) {
      last_completion = Clock::now();
      idle = 0;
      continue;
    }
    idle = events == 0 ? idle + 1 : 0;
    if (++spins % 128 != 0) continue;
    if (Interrupted()) {
      result = options_.interrupt->reason();
      break;
    }
    if (Clock::now() - last_completion > limit) {
      NoProgress what;
      what.bound = options_.no_progress_timeout;
      what.call = "a UCX transfer";
      for (const Request* r : pending) what.peers.push_back(r->peer);
      std::sort(what.peers.begin(), what.peers.end());
      what.peers.erase(std::unique(what.peers.begin(), what.peers.end()), what.peers.end());
      // The runtime words it as every no-progress report (ops/no_progress.h); this text is for
      // other callers.
      result =
          NoProgressError(what, absl::StrCat("UCX transport: no progress for ",
                                             absl::FormatDuration(options_.no_progress_timeout),
                                             " waiting on rank", what.peers.size() > 1 ? "s " : " ",
                                             absl::StrJoin(what.peers, ", "), "; presumed lost"));
      break;
    }
    // Spin while a message may be microseconds away; once idle for long, let other threads
    // (ranks sharing this core) run. (Yielding early costs microseconds per message.)
    if (idle > kIdleSpinsBeforeYield) std::this_thread::yield();
  }
  if (result.ok() && !pending.empty()) result = failed_;
  // Every error of a request is final; Fail abandons what is still pending, before the caller
  // may free its buffers.
  if (!result.ok()) Fail(result);
  for (Request* r : pending) Release(r);
  return result.ok() ? bad_id : result;
}

const UcxTransport::Peer* UcxTransport::LostPeer() const {
  for (const auto& p : peers_) {
    if (p->lost != UCS_OK) return p.get();
  }
  return nullptr;
}

bool UcxTransport::Interrupted() const {
  return options_.interrupt != nullptr && options_.interrupt->raised();
}

void UcxTransport::Fail(const absl::Status& status) {
  if (!failed_.ok()) return;
  failed_ = status;
  // Note [Abandoning requests] in docs/ucx_transport.md. Nothing here progresses the worker,
  // and nothing does after: UCX 1.13 can crash progressing a worker after a force-close.
  for (auto& r : requests_) {
    // Receives not matched yet finish at once (UCS_ERR_CANCELED); matched ones stay in flight.
    if (r->in_use && r->ucx != nullptr && r->recv) ucp_request_cancel(worker_, r->ucx);
  }
  ForceCloseEndpoints();
  // The rest is abandoned: UCX frees each if it ever finishes. (A rendezvous send whose RTS
  // went out on an endpoint without peer error handling is one: nothing in UCX ends it while
  // the peer does not answer.)
  for (auto& r : requests_) {
    if (!r->in_use || r->ucx == nullptr || Poll(r.get())) continue;
    ucp_request_free(r->ucx);
    r->ucx = nullptr;
    r->done = true;
    r->status = UCS_ERR_CANCELED;
  }
}

void UcxTransport::ForceCloseEndpoints() {
  // UCX force-closes only endpoints with peer error handling (it refuses the others:
  // UCS_ERR_INVALID_PARAM in UCX 1.13, and a flushing close waits for the peer); those stay
  // open, unused, until ucp_worker_destroy. It would complete the requests of a force-closed
  // endpoint (UCS_ERR_CANCELED) in later progress calls, which never come.
  for (auto& p : peers_) {
    if (p->ep == nullptr || !p->peer_mode) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* r = ucp_ep_close_nbx(p->ep, &param);
    p->ep = nullptr;
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);
  }
}

void UcxTransport::CloseGracefully() {
  // A lost peer is a failure no Wait has seen yet: it cannot confirm a flush.
  if (const Peer* lost = LostPeer(); lost != nullptr) {
    Fail(PeerLost(lost->rank, lost->lost));
    return;
  }
  for (auto& r : requests_) {
    if (r->in_use && r->ucx != nullptr && r->recv) ucp_request_cancel(worker_, r->ucx);
  }
  std::vector<void*> closing;
  for (auto& p : peers_) {
    if (p->ep == nullptr) continue;
    ucp_request_param_t param{};
    void* r = ucp_ep_close_nbx(p->ep, &param);
    p->ep = nullptr;
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) closing.push_back(r);
  }
  // Requests never waited on finish (sends are flushed to their peers) within the bound, unless
  // the interrupt is raised meanwhile or a peer is lost.
  const auto deadline = Clock::now() + absl::ToChronoNanoseconds(options_.no_progress_timeout);
  while (true) {
    for (size_t i = 0; i < closing.size();) {
      if (ucp_request_check_status(closing[i]) != UCS_INPROGRESS) {
        ucp_request_free(closing[i]);
        closing[i] = closing.back();
        closing.pop_back();
      } else {
        ++i;
      }
    }
    bool in_flight = false;
    for (auto& r : requests_) {
      if (r->in_use && r->ucx != nullptr && !Poll(r.get())) in_flight = true;
    }
    if (closing.empty() && !in_flight) return;
    if (Interrupted()) {
      Fail(options_.interrupt->reason());
      break;
    }
    if (const Peer* lost = LostPeer(); lost != nullptr) {
      Fail(PeerLost(lost->rank, lost->lost));
      break;
    }
    if (Clock::now() > deadline) break;
    ucp_worker_progress(worker_);
  }
  for (void* r : closing) ucp_request_free(r);
}

}  // namespace chorus::ops
