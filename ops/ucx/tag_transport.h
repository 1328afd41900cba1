// File: ops/ucx/tag_transport.h
//
// Point-to-point tagged messaging among the ranks 0 .. size()-1 of one world: the layer the UCX
// collective algorithms (ops/ucx/algorithms/) are written on. Implementations: UcxTransport
// (ops/ucx/ucx_transport.h), InMemoryTransport (N ranks as N threads, for unit tests,
// ops/ucx/testing/) and TagTransportView (a process set's ranks and a private tag space on top
// of a world transport, ops/ucx/tag_transport_view.h). The contract of each call is on the call.
//
// Thread-safety: thread-compatible: one thread at a time (the runtime's background thread).
#ifndef CHORUS_OPS_UCX_TAG_TRANSPORT_H_
#define CHORUS_OPS_UCX_TAG_TRANSPORT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace chorus::ops {

// Names one started Isend/Irecv until Wait releases it.
using RequestId = int64_t;

// A world transport (UcxTransport, InMemoryTransport) accepts tags in [0, kMaxWorldTag]. A
// TagTransportView splits that range into 2^kTagSpaceBits tag spaces of 2^kViewTagBits tags
// each, so that process sets and the control plane never match each other's messages.
inline constexpr int kTagSpaceBits = 16;
inline constexpr int kViewTagBits = 28;
inline constexpr uint64_t kMaxWorldTag = (uint64_t{1} << (kTagSpaceBits + kViewTagBits)) - 1;
inline constexpr uint64_t kMaxViewTag = (uint64_t{1} << kViewTagBits) - 1;
inline constexpr uint32_t kMaxTagSpace = (uint32_t{1} << kTagSpaceBits) - 1;

class TagTransport {
 public:
  virtual ~TagTransport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The largest tag Isend/Irecv accept (tags are 0 .. max_tag()).
  virtual uint64_t max_tag() const = 0;

  // Starts sending `bytes` bytes at `data` to `peer` (this rank included; zero bytes allowed,
  // `data` may then be null). The buffer stays valid and unmodified until Wait has returned for
  // the id. Messages from one rank to another with the same tag are matched in the order they
  // were sent, to receives in the order they were posted (Note [One tag per collective] in
  // ops/ucx/algorithms/common.h relies on this). InvalidArgument for a bad peer or tag
  // (detected locally, before anything is sent).
  virtual absl::StatusOr<RequestId> Isend(int peer, uint64_t tag, const void* data,
                                          int64_t bytes) = 0;
  // Starts receiving a message of exactly `bytes` bytes from `peer` with the same tag into
  // `data`, which stays valid and unread until Wait has returned for the id. A message of any
  // other length fails the receive with Internal (the ranks disagree on a protocol).
  // InvalidArgument for a bad peer or tag.
  virtual absl::StatusOr<RequestId> Irecv(int peer, uint64_t tag, void* data, int64_t bytes) = 0;
  // Blocks until every request in `ids` is finished, driving progress itself (there is no
  // background progress thread), and releases them all, whatever the outcome: an id is waited
  // on exactly once. Requests never waited on are cancelled when the transport is destroyed.
  // Returns OK when all succeeded, else the first error: Unavailable when a peer is lost (the
  // message names its world rank), Internal for a transport failure or a desynchronised
  // protocol, InvalidArgument for a bad id. For UcxTransport an error is final: every later
  // call fails with the same status, since a world that lost a rank must be formed again (with
  // a new transport).
  virtual absl::Status Wait(absl::Span<const RequestId> ids) = 0;
};

}  // namespace chorus::ops

#endif  // CHORUS_OPS_UCX_TAG_TRANSPORT_H_
