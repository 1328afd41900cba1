#include "elastic/blacklist.h"

#include <algorithm>
#include <memory>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chorus::elastic {

absl::Status ValidateCooldownRange(const CooldownRange& range) {
  if (range.min <= absl::ZeroDuration() || range.max < range.min) {
    return absl::InvalidArgumentError(
        absl::StrCat("blacklist cooldown range [", absl::FormatDuration(range.min), ", ",
                     absl::FormatDuration(range.max), "] is invalid; expected 0 < MIN <= MAX"));
  }
  return absl::OkStatus();
}

Blacklist::RandomSource Blacklist::DefaultRandomSource() {
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [engine]() { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
}

absl::StatusOr<Blacklist> Blacklist::Create(Options options, RandomSource random) {
  if (options.cooldown) {
    if (absl::Status s = ValidateCooldownRange(*options.cooldown); !s.ok()) return s;
  }
  if (!(options.jitter_fraction >= 0.0 && options.jitter_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("blacklist jitter fraction ", options.jitter_fraction, " is outside [0, 1]"));
  }
  return Blacklist(std::move(options), std::move(random));
}

Blacklist::Blacklist(Options options, RandomSource random)
    : options_(std::move(options)), random_(std::move(random)) {}

absl::Duration Blacklist::CooldownFor(int k, double u) const {
  const CooldownRange& range = *options_.cooldown;
  // Doubling stops at MAX: no overflow however many failures a host has.
  absl::Duration base = range.min;
  for (int i = 1; i < k && base < range.max; ++i) base *= 2;
  const absl::Duration jitter = base * (options_.jitter_fraction * std::clamp(u, 0.0, 1.0));
  return std::min(range.max, base + jitter);
}

absl::Time Blacklist::RecordFailure(const std::string& host, absl::Time now) {
  HostState& state = hosts_[host];
  if (now < state.until) return state.until;  // still out: the same incident
  ++state.failures;
  state.until =
      options_.cooldown ? now + CooldownFor(state.failures, random_()) : absl::InfiniteFuture();
  return state.until;
}

bool Blacklist::IsBlacklisted(const std::string& host, absl::Time now) const {
  auto it = hosts_.find(host);
  return it != hosts_.end() && now < it->second.until;
}

HostSet Blacklist::Filter(const HostSet& hosts, absl::Time now) const {
  HostSet kept;
  for (const auto& [host, slots] : hosts) {
    if (!IsBlacklisted(host, now)) kept.emplace(host, slots);
  }
  return kept;
}

int Blacklist::failure_count(const std::string& host) const {
  auto it = hosts_.find(host);
  return it == hosts_.end() ? 0 : it->second.failures;
}

}  // namespace chorus::elastic
