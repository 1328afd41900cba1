#include "runtime/negotiate/cache_bit_vector.h"

#include <algorithm>

namespace chorus::runtime {

CacheBitVector::CacheBitVector(int32_t capacity)
    : w_((capacity + 63) / 64), words_(1 + 3 * w_, 0), foreign_(w_, 0) {}

uint64_t CacheBitVector::ShutdownFlags(int rank) {
  uint64_t flags = kShutdown;
  if (rank >= 0 && rank < kNamedShutdownRanks) flags |= uint64_t{1} << (32 + rank);
  return flags;
}

std::vector<int> CacheBitVector::ShutdownRanks() const {
  std::vector<int> ranks;
  for (int r = 0; r < kNamedShutdownRanks; ++r) {
    if ((flags_ >> (32 + r)) & 1) ranks.push_back(r);
  }
  return ranks;
}

void CacheBitVector::SetForeign(int32_t bit, bool foreign) {
  const uint64_t mask = uint64_t{1} << (bit % 64);
  uint64_t& word = foreign_[bit / 64];
  word = foreign ? (word | mask) : (word & ~mask);
}

void CacheBitVector::ClearForeign() { std::fill(foreign_.begin(), foreign_.end(), 0); }

void CacheBitVector::Begin(uint64_t flags) {
  std::fill(words_.begin(), words_.end(), 0);
  words_[0] = flags;
  flags_ = 0;
  pending_after_ = false;
}

void CacheBitVector::Hold(int32_t bit) {
  SetBit(kReady, bit);
  SetBit(kHeld, bit);
}

void CacheBitVector::Invalidate(int32_t bit) { SetBit(kInvalid, bit); }

absl::Span<uint64_t> CacheBitVector::Pack() {
  for (int i = 0; i < w_; ++i) words_[1 + kReady * w_ + i] |= foreign_[i];
  words_[0] = ~words_[0];
  ComplementOrSections();
  return absl::MakeSpan(words_);
}

void CacheBitVector::Unpack() {
  words_[0] = ~words_[0];
  ComplementOrSections();
  flags_ = words_[0];
  pending_after_ = any(kUncachedPending);
  for (int i = 0; i < w_; ++i) {
    uint64_t& ready = words_[1 + kReady * w_ + i];
    const uint64_t invalid = words_[1 + kInvalid * w_ + i];
    const uint64_t held = words_[1 + kHeld * w_ + i];
    pending_after_ = pending_after_ || invalid != 0 || (held & ~ready) != 0;
    ready &= ~invalid;
    foreign_[i] &= ~invalid;
  }
}

void CacheBitVector::ComplementOrSections() {
  for (int i = w_; i < 3 * w_; ++i) words_[1 + i] = ~words_[1 + i];
}

}  // namespace chorus::runtime
