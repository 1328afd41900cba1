#include "elastic/driver_settings.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace chorus::elastic {

absl::StatusOr<DriverSettings> ResolveDriverSettings(const launcher::LaunchOptions& o,
                                                     const launcher::Environment& env) {
  const launcher::LaunchOptions::Elastic& e = o.elastic;
  DriverSettings s;
  s.limits.min_np = e.min_np.value_or(o.num_proc);
  s.limits.max_np = e.max_np;
  s.slots_per_host = e.slots_per_host.value_or(1);
  s.reset_limit = e.reset_limit;
  if (e.blacklist_cooldown_s) {
    s.cooldown = CooldownRange{absl::Seconds(e.blacklist_cooldown_s->first),
                               absl::Seconds(e.blacklist_cooldown_s->second)};
  }
  if (e.elastic_timeout_s) {
    s.elastic_timeout = absl::Seconds(*e.elastic_timeout_s);
  } else if (auto it = env.find(kElasticTimeoutVar); it != env.end()) {
    int seconds = 0;
    if (!absl::SimpleAtoi(it->second, &seconds) || seconds < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kElasticTimeoutVar, "=", it->second, " is not a number of seconds >= 1"));
    }
    s.elastic_timeout = absl::Seconds(seconds);
  }
  if (auto it = env.find(kDiscoveryIntervalVar); it != env.end()) {
    double seconds = 0;
    if (!absl::SimpleAtod(it->second, &seconds) || !std::isfinite(seconds) || seconds <= 0 ||
        seconds > 3600) {
      return absl::InvalidArgumentError(absl::StrCat(kDiscoveryIntervalVar, "=", it->second,
                                                     " is not a number of seconds in (0, 3600]"));
    }
    s.discovery_interval = absl::Seconds(seconds);
  }
  return s;
}

}  // namespace chorus::elastic
