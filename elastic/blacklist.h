// File: elastic/blacklist.h
//
// Hosts the driver stops using after a worker on them failed (exited non-zero or was killed by
// a signal), as horovodrun's blacklist does.
//
// Without a cooldown range, a failed host stays out for the rest of the job. With one
// (horovodrun's --blacklist-cooldown-range MIN MAX, in seconds), the k-th failure of a host keeps
// it out for
//
//     min(MAX, MIN * 2^(k-1) + jitter),   jitter uniform in [0, jitter_fraction * MIN * 2^(k-1))
//
// so MIN, 2 MIN, 4 MIN, ... (each plus up to 10% by default) until MAX; after that the host is
// re-admitted (IsBlacklisted turns false) and the next discovery may bring it back. The jitter
// spreads the return of hosts that failed together. A failure reported while the host is still
// out (a second worker of the same host, the same incident) neither counts again nor extends
// the period.
//
// Time and randomness are injected: every call takes `now`, and the jitter comes from a
// RandomSource, so tests are deterministic.
//
// Thread-safety: thread-compatible.
#ifndef CHORUS_ELASTIC_BLACKLIST_H_
#define CHORUS_ELASTIC_BLACKLIST_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "elastic/host_set.h"

namespace chorus::elastic {

struct CooldownRange {
  absl::Duration min;
  absl::Duration max;
};

// InvalidArgument unless 0 < min <= max.
absl::Status ValidateCooldownRange(const CooldownRange& range);

class Blacklist {
 public:
  // Returns a number uniformly distributed in [0, 1).
  using RandomSource = std::function<double()>;

  struct Options {
    std::optional<CooldownRange> cooldown;  // nullopt: blacklisting is permanent
    double jitter_fraction = 0.1;           // in [0, 1]
  };

  // A RandomSource seeded from std::random_device.
  static RandomSource DefaultRandomSource();

  // InvalidArgument for a bad range (ValidateCooldownRange) or jitter_fraction.
  static absl::StatusOr<Blacklist> Create(Options options,
                                          RandomSource random = DefaultRandomSource());

  // Records a failure of `host` at `now`; returns the time until which it is out
  // (absl::InfiniteFuture() when permanent). See the file comment for repeated reports.
  absl::Time RecordFailure(const std::string& host, absl::Time now);

  bool IsBlacklisted(const std::string& host, absl::Time now) const;

  // `hosts` without the ones blacklisted at `now`.
  HostSet Filter(const HostSet& hosts, absl::Time now) const;

  // How many failures of `host` counted so far (0 for a host never blacklisted).
  int failure_count(const std::string& host) const;

  // The cooldown of the `k`-th failure (k >= 1) for a jitter draw `u` in [0, 1), per the file
  // comment. REQUIRES: a cooldown range.
  absl::Duration CooldownFor(int k, double u) const;

 private:
  struct HostState {
    int failures = 0;
    absl::Time until = absl::InfinitePast();
  };

  Blacklist(Options options, RandomSource random);

  Options options_;
  RandomSource random_;
  std::map<std::string, HostState> hosts_;
};

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_BLACKLIST_H_
