// File: runtime/negotiate/cache_bit_vector.h
//
// The per-cycle vector every rank ANDs with every other (Controller::AllreduceBitAnd) to learn,
// without the coordinator, which cached responses are ready everywhere, which cache entries
// must be erased everywhere, the OR of the ranks' flags, and whether some rank will still have
// ops pending after the cycle.
//
// Note [Cache bit vector]
// Each cycle every rank contributes one vector of 1 + 3W words (W = ceil(capacity / 64)):
//   word 0          flags, complemented, so that the AND over ranks yields their OR (bits
//                   32..63: which ranks below 32 are shutting down, see ShutdownFlags);
//   words 1..W      bit b set: "I have the cached tensor at bit b pending" (or: it belongs to a
//                   process set I am not in); the AND says "ready on every rank";
//   words W+1..2W   bit b set: "entry b must be erased" (a request under that name changed, or
//                   it waited too long), complemented, so that the AND yields the OR;
//   words 2W+1..3W  bit b set: "I have the cached tensor at bit b pending" (mine only),
//                   complemented: the OR says which cached tensors some rank holds.
// After the cycle some rank still has ops pending exactly when one has ops that are not cache
// hits (kUncachedPending), a cache entry was erased (its holders renegotiate), or a cached
// tensor is held somewhere but not ready everywhere. Ranks with nothing pending then wake at
// the cycle time to take part in the next cycles; otherwise only for local work (or the idle
// cycle time). Reading "some rank has ops pending" before this cycle's execution instead would
// count the tensors this very cycle completes: every rank would run an empty cycle after each
// step and meet the next step's burst out of step.
//
// Use per cycle: Begin(flags); Hold(bit) / Invalidate(bit) ...; AND Pack() with the other
// ranks; Unpack(); then read flags(), pending_after(), ForEachInvalid, ForEachReady. The foreign
// bits (tensors of process sets this rank is not a member of) persist across cycles.
//
// Thread-safety: none; the background loop's thread owns it.
#ifndef CHORUS_RUNTIME_NEGOTIATE_CACHE_BIT_VECTOR_H_
#define CHORUS_RUNTIME_NEGOTIATE_CACHE_BIT_VECTOR_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace chorus::runtime {

class CacheBitVector {
 public:
  // Flags of one rank; after Unpack, flags() holds their OR over all ranks.
  enum Flag : uint64_t {
    kUncached = 1,           // this rank has requests for the coordinator
    kShutdown = 2,           // this rank is shutting down
    kUncachedPending = 4,    // this rank has pending ops that are not cache hits
    kStallRound = 8,         // rank 0 wants a round to time out stalled ops
    kGpuFailed = 16,         // this rank's GPU data plane failed: all ranks stop
    kAutotune = 32,          // rank 0 sends new autotune parameters with this cycle's responses
    kShutdownCause = 64,     // a rank shutting down gave a cause (Note [Shutdown causes])
    kFlightDump = 128,       // rank 0 saw a stall: every rank dumps its flight recorder
    kFlightDumpAsked = 256,  // a rank got SIGUSR2: every rank dumps its flight recorder
  };

  // The flags of rank `rank` shutting down: kShutdown, and for a rank below kNamedShutdownRanks
  // its own bit among the flags' upper 32, so that the ranks it stops can name it.
  static constexpr int kNamedShutdownRanks = 32;
  static uint64_t ShutdownFlags(int rank);
  // After Unpack: the ranks below kNamedShutdownRanks shutting down this cycle, ascending.
  std::vector<int> ShutdownRanks() const;

  // `capacity`: the response cache's (bits 0 .. capacity-1); may be 0.
  explicit CacheBitVector(int32_t capacity);

  // Foreign bits: the cached response at `bit` is on a process set this rank is not in, so this
  // rank counts as ready for it in every cycle.
  void SetForeign(int32_t bit, bool foreign);
  void ClearForeign();

  // Starts this rank's contribution to a cycle with its `flags` (Flag values ORed).
  void Begin(uint64_t flags);
  // This rank has the cached tensor at `bit` pending.
  void Hold(int32_t bit);
  // The cache entry at `bit` must be erased on every rank.
  void Invalidate(int32_t bit);
  // The words to AND with every rank's (valid until the next Begin).
  absl::Span<uint64_t> Pack();
  // Reads the ANDed words back. Invalidated bits are dropped from the ready and foreign bits.
  void Unpack();

  uint64_t flags() const { return flags_; }
  bool any(uint64_t flags) const { return (flags_ & flags) != 0; }
  // Whether some rank will still have ops pending after this cycle (see the Note).
  bool pending_after() const { return pending_after_; }

  // Calls f(bit) for every bit some rank invalidated, ascending.
  template <typename F>
  void ForEachInvalid(F f) const {
    ForEachBit(kInvalid, f);
  }
  // Calls f(bit) for every bit that is ready on every rank and not invalidated, ascending.
  template <typename F>
  void ForEachReady(F f) const {
    ForEachBit(kReady, f);
  }

  // The raw words (for tests).
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  // First word of each section (see the Note).
  static constexpr int kReady = 0;
  static constexpr int kInvalid = 1;
  static constexpr int kHeld = 2;
  uint64_t& Word(int section, int32_t bit) { return words_[1 + section * w_ + bit / 64]; }
  void SetBit(int section, int32_t bit) { Word(section, bit) |= uint64_t{1} << (bit % 64); }
  void ComplementOrSections();

  template <typename F>
  void ForEachBit(int section, F f) const {
    for (int i = 0; i < w_; ++i) {
      uint64_t word = words_[1 + section * w_ + i];
      while (word != 0) {
        const int b = __builtin_ctzll(word);
        word &= word - 1;
        f(static_cast<int32_t>(i * 64 + b));
      }
    }
  }

  int w_;
  std::vector<uint64_t> words_;
  std::vector<uint64_t> foreign_;
  uint64_t flags_ = 0;
  bool pending_after_ = false;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_NEGOTIATE_CACHE_BIT_VECTOR_H_
