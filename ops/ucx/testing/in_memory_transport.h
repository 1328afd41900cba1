// File: ops/ucx/testing/in_memory_transport.h
//
// N ranks of a TagTransport world as N threads of one process, for unit tests of the UCX
// collective algorithms and the UCX control plane. Test-only: nothing in the runtime references
// it (it is compiled into the static chorus_ops archive, so libchorus.so never links it in).
//
// Semantics (TagTransport's, plus):
// - Isend copies the message into the fabric and finishes at once (buffered sends).
// - Irecv number k from (peer, tag) takes the k-th message sent to this rank by peer with that
//   tag, whatever order Waits come in.
// - Kill(rank): from then on every receive that has no message yet fails with Unavailable naming
//   `rank`, on every rank (as a real world falls apart when one rank dies); messages already
//   sent are still delivered.
// - Deadlock detection: when every live transport of the fabric is blocked in Wait on receives
//   that no live rank can satisfy, each of those Waits fails with Internal ("deadlock"), so an
//   algorithm bug fails a test instead of hanging it. Destroying a transport counts as leaving.
//
// Thread-safety: the fabric is thread-safe; each transport is used by one thread at a time.
#ifndef CHORUS_OPS_UCX_TESTING_IN_MEMORY_TRANSPORT_H_
#define CHORUS_OPS_UCX_TESTING_IN_MEMORY_TRANSPORT_H_

#include <memory>

#include "ops/ucx/tag_transport.h"

namespace chorus::ops::testing {

class InMemoryFabric {
 public:
  explicit InMemoryFabric(int size);
  ~InMemoryFabric();
  InMemoryFabric(const InMemoryFabric&) = delete;
  InMemoryFabric& operator=(const InMemoryFabric&) = delete;

  int size() const { return size_; }

  // The transport of `rank`; call once per rank. The transports share the fabric's state, so
  // they may outlive it.
  std::unique_ptr<TagTransport> CreateTransport(int rank);

  // Simulates the loss of `rank` (see the file comment).
  void Kill(int rank);

  struct Shared;

 private:
  int size_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace chorus::ops::testing

#endif  // CHORUS_OPS_UCX_TESTING_IN_MEMORY_TRANSPORT_H_
