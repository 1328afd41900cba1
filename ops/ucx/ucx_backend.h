// File: ops/ucx/ucx_backend.h
//
// CollectiveBackend over a TagTransport (in production a TagTransportView of one process set on
// the process's UcxTransport): the CPU data plane of MPI-less launches. Each call runs one
// algorithm of ops/ucx/algorithms/, chosen by message size (table in docs/ucx_transport.md),
// with one fresh tag per call (Note [One tag per collective] in ops/ucx/algorithms/common.h).
// Semantics are MpiBackend's (ops/collective_backend.h), except that there is no INT_MAX limit
// on counts. Arguments are validated before anything is sent; they are identical on every rank
// (negotiated), so every rank rejects them alike and nobody is left waiting. Reductions are
// bitwise identical on every rank (Note [Bitwise-identical results] in common.h).
//
// Errors: InvalidArgument for bad arguments; Unavailable (lost peer) and Internal from the
// transport, after which the transport (and so this backend) is unusable.
// Thread-safety: thread-compatible: background thread only.
#ifndef CHORUS_OPS_UCX_UCX_BACKEND_H_
#define CHORUS_OPS_UCX_UCX_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/collective_backend.h"
#include "ops/ucx/algorithms/common.h"
#include "ops/ucx/tag_transport.h"

namespace chorus::ops {

// Defaults chosen by measurement on one host (2 ranks, shared memory, float32 sum; figures in
// docs/perf.md): recursive doubling beats the ring up to 64 KiB and ties it there; 256 KiB
// pieces beat 1 MiB ones at 4 MiB, the size the executor's pipeline hands over.
struct UcxBackendOptions {
  // Allreduces of at most this many bytes use recursive doubling (latency log2 n), larger ones
  // the ring (bandwidth 2 (n-1)/n of the data per rank).
  int64_t recursive_doubling_max_bytes = int64_t{64} << 10;
  // Broadcasts of at most this many bytes use the binomial tree, larger ones the chain.
  int64_t tree_broadcast_max_bytes = int64_t{64} << 10;
  // Largest message of the pipelined algorithms (ring, chain).
  int64_t piece_bytes = int64_t{256} << 10;
  // Ring reduce-scatter: pieces received ahead of the reduction (scratch slots).
  int ring_depth = 4;
};

class UcxBackend : public CollectiveBackend {
 public:
  // Ranks of the set are `transport`'s ranks; every member builds its backend with the same
  // options.
  explicit UcxBackend(std::unique_ptr<TagTransport> transport, UcxBackendOptions options = {});

  int rank() const override { return transport_->rank(); }
  int size() const override { return transport_->size(); }
  std::string name() const override { return "UCX"; }
  // Run and the collectives it calls (ops/collective_backend.h).
  CHORUS_TRANSPORT_COLLECTIVES();

 private:
  uint64_t NextTag();

  std::unique_ptr<TagTransport> transport_;
  UcxBackendOptions options_;
  uint64_t calls_ = 0;  // collective calls so far: the next call's tag
  // Kept from one collective to the next (the algorithms' buffers): a steady loop allocates
  // nothing here. Recursive doubling's partner vector; the ring algorithms' buffers.
  std::vector<std::byte> scratch_;
  ucx::RingScratch ring_scratch_;
};

}  // namespace chorus::ops

#endif  // CHORUS_OPS_UCX_UCX_BACKEND_H_
