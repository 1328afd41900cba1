#include "launcher/engine/job_settings.h"

#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace chorus::launcher {
namespace {

// A whole number of seconds >= 1 from variable `name` of `env`, or `fallback` when unset.
absl::StatusOr<absl::Duration> SecondsVar(const Environment& env, const char* name,
                                          absl::Duration fallback) {
  auto it = env.find(name);
  if (it == env.end()) return fallback;
  int seconds = 0;
  if (!absl::SimpleAtoi(it->second, &seconds) || seconds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", it->second, " is not a number of seconds >= 1"));
  }
  return absl::Seconds(seconds);
}

}  // namespace

absl::StatusOr<JobSettings> ResolveJobSettings(const LaunchOptions& o, const Environment& env) {
  JobSettings s;
  if (o.start_timeout_s) {
    s.start_timeout = absl::Seconds(*o.start_timeout_s);
  } else {
    absl::StatusOr<absl::Duration> start = SecondsVar(env, kStartTimeoutVar, s.start_timeout);
    if (!start.ok()) return start.status();
    s.start_timeout = *start;
  }
  elastic::JobRules& r = s.rules;
  if (!o.is_elastic) {
    r.fixed = true;
    r.limits.min_np = o.num_proc;
    r.limits.max_np = o.num_proc;
    r.elastic_timeout = absl::InfiniteDuration();
    return s;
  }
  const LaunchOptions::Elastic& e = o.elastic;
  r.limits.min_np = e.min_np.value_or(o.num_proc);
  r.limits.max_np = e.max_np;
  r.num_proc = o.num_proc;
  r.reset_limit = e.reset_limit;
  s.slots_per_host = e.slots_per_host.value_or(1);
  if (e.blacklist_cooldown_s) {
    s.cooldown = elastic::CooldownRange{absl::Seconds(e.blacklist_cooldown_s->first),
                                        absl::Seconds(e.blacklist_cooldown_s->second)};
    r.blacklist_cooldown = true;
  }
  if (e.elastic_timeout_s) {
    r.elastic_timeout = absl::Seconds(*e.elastic_timeout_s);
  } else {
    absl::StatusOr<absl::Duration> timeout =
        SecondsVar(env, kElasticTimeoutVar, absl::Seconds(kDefaultElasticTimeoutSeconds));
    if (!timeout.ok()) return timeout.status();
    r.elastic_timeout = *timeout;
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

}  // namespace chorus::launcher
