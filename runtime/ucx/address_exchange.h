// File: runtime/ucx/address_exchange.h
//
// How the ranks of a UCX world learn each other's worker addresses: the rendezvous step of
// MPI-less and elastic launches (Note [Forming a UCX world] in docs/ucx_transport.md). The
// launcher's rendezvous client implements it; tests implement it in memory.
//
// Thread-safety: an implementation is used by one thread at a time.
#ifndef CHORUS_RUNTIME_UCX_ADDRESS_EXCHANGE_H_
#define CHORUS_RUNTIME_UCX_ADDRESS_EXCHANGE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace chorus::runtime {

class AddressExchange {
 public:
  virtual ~AddressExchange() = default;

  // Publishes `mine` (opaque bytes, NULs included, a few hundred bytes) for this rank and
  // returns every rank's bytes in rank order, this rank's own at its index. Collective over the
  // world being formed: blocks until every rank has published. Errors: Unavailable (rendezvous
  // unreachable), DeadlineExceeded (a rank never published), as the implementation sees fit;
  // the caller gives up on this world.
  virtual absl::StatusOr<std::vector<std::string>> AllGather(const std::string& mine) = 0;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_UCX_ADDRESS_EXCHANGE_H_
