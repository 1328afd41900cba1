// File: elastic/driver_settings.h
//
// The elastic driver's settings, resolved once from chorusrun's flags and environment:
// --elastic-timeout (else HOROVOD_ELASTIC_TIMEOUT, else 600 s), CHORUS_ELASTIC_DISCOVERY_INTERVAL
// (seconds, fractional allowed, default 1), --min-np (default -np), --max-np,
// --slots-per-host (default 1), --reset-limit, --blacklist-cooldown-range.
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_ELASTIC_DRIVER_SETTINGS_H_
#define CHORUS_ELASTIC_DRIVER_SETTINGS_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "elastic/blacklist.h"
#include "elastic/rank_assignment.h"
#include "launcher/mpirun_command.h"
#include "launcher/options.h"

namespace chorus::elastic {

inline constexpr int kDefaultElasticTimeoutSeconds = 600;  // horovodrun's
inline constexpr char kDiscoveryIntervalVar[] = "CHORUS_ELASTIC_DISCOVERY_INTERVAL";
inline constexpr char kElasticTimeoutVar[] = "HOROVOD_ELASTIC_TIMEOUT";

struct DriverSettings {
  RankLimits limits;
  int slots_per_host = 1;
  absl::Duration elastic_timeout = absl::Seconds(kDefaultElasticTimeoutSeconds);
  absl::Duration discovery_interval = absl::Seconds(1);
  std::optional<int> reset_limit;
  std::optional<CooldownRange> cooldown;
};

// InvalidArgument naming the variable for a malformed HOROVOD_ELASTIC_TIMEOUT (seconds >= 1) or
// CHORUS_ELASTIC_DISCOVERY_INTERVAL (a finite number of seconds > 0, at most 3600).
absl::StatusOr<DriverSettings> ResolveDriverSettings(const launcher::LaunchOptions& options,
                                                     const launcher::Environment& env);

}  // namespace chorus::elastic

#endif  // CHORUS_ELASTIC_DRIVER_SETTINGS_H_
