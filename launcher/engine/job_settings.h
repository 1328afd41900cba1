// File: launcher/engine/job_settings.h
//
// An MPI-less job's settings, resolved once from chorusrun's flags and environment, for both
// kinds of job the engine runs (launcher/engine/job_engine.h):
//
// - fixed-size (--gloo without elastic flags): min = max = -np, the hosts of -H / --hostfile /
//   the Slurm allocation / localhost, no reset;
// - elastic: --min-np (default -np), --max-np, --slots-per-host (default 1), --reset-limit,
//   --blacklist-cooldown-range, --elastic-timeout (else HOROVOD_ELASTIC_TIMEOUT, else 600 s),
//   CHORUS_ELASTIC_DISCOVERY_INTERVAL (seconds, fractional allowed, default 1).
//
// Both: --start-timeout (else HOROVOD_START_TIMEOUT, else 30 s: how long ssh may take to answer
// and a worker to reach the rendezvous). MPI mode uses only this one, for its ssh checks.
//
// Pure functions.
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_ENGINE_JOB_SETTINGS_H_
#define CHORUS_LAUNCHER_ENGINE_JOB_SETTINGS_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "elastic/blacklist.h"
#include "elastic/next_generation.h"
#include "launcher/options.h"
#include "launcher/process/environment.h"

namespace chorus::launcher {

inline constexpr int kDefaultElasticTimeoutSeconds = 600;  // horovodrun's
inline constexpr int kDefaultStartTimeoutSeconds = 30;     // horovodrun's
inline constexpr char kDiscoveryIntervalVar[] = "CHORUS_ELASTIC_DISCOVERY_INTERVAL";
inline constexpr char kElasticTimeoutVar[] = "HOROVOD_ELASTIC_TIMEOUT";
inline constexpr char kStartTimeoutVar[] = "HOROVOD_START_TIMEOUT";

struct JobSettings {
  elastic::JobRules rules;
  int slots_per_host = 1;
  absl::Duration discovery_interval = absl::Seconds(1);
  absl::Duration start_timeout = absl::Seconds(kDefaultStartTimeoutSeconds);
  std::optional<elastic::CooldownRange> cooldown;
};

// InvalidArgument naming the variable for a malformed HOROVOD_ELASTIC_TIMEOUT or
// HOROVOD_START_TIMEOUT (seconds >= 1) or CHORUS_ELASTIC_DISCOVERY_INTERVAL (a finite number of
// seconds > 0, at most 3600).
absl::StatusOr<JobSettings> ResolveJobSettings(const LaunchOptions& options,
                                               const Environment& env);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_ENGINE_JOB_SETTINGS_H_
