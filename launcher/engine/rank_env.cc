#include "launcher/engine/rank_env.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

#include "base/config_names.h"

namespace chorus::launcher {

std::vector<EnvVar> RankEnvironment(const RankPlacement& p, const RendezvousInfo& rendezvous) {
  const std::pair<const char*, int> numbers[] = {
      {"RANK", p.rank},
      {"SIZE", p.size},
      {"LOCAL_RANK", p.local_rank},
      {"LOCAL_SIZE", p.local_size},
      {"CROSS_RANK", p.cross_rank},
      {"CROSS_SIZE", p.cross_size},
  };
  std::vector<EnvVar> vars;
  for (const char* prefix : {"CHORUS_", "HOROVOD_"}) {
    for (const auto& [name, value] : numbers) {
      vars.emplace_back(absl::StrCat(prefix, name), absl::StrCat(value));
    }
    vars.emplace_back(absl::StrCat(prefix, "HOSTNAME"), p.host);
  }
  vars.emplace_back(config_names::kRendezvousAddr, rendezvous.address);
  vars.emplace_back(config_names::kRendezvousSecret, rendezvous.secret);
  vars.emplace_back(config_names::kRendezvousScope, rendezvous.scope);
  vars.emplace_back(config_names::kStartTimeoutSeconds, absl::StrCat(rendezvous.start_timeout_s));
  return vars;
}

std::vector<EnvVar> JoiningEnvironment(const std::string& host, const RendezvousInfo& rendezvous) {
  return {{config_names::kHostname, host},
          {"HOROVOD_HOSTNAME", host},
          {config_names::kRendezvousAddr, rendezvous.address},
          {config_names::kRendezvousSecret, rendezvous.secret},
          {config_names::kStartTimeoutSeconds, absl::StrCat(rendezvous.start_timeout_s)},
          {config_names::kElasticGeneration, "-1"}};
}

Environment MergeEnvironment(const Environment& launcher_env,
                             const std::vector<EnvVar>& worker_vars,
                             const std::vector<EnvVar>& rank_vars) {
  Environment env = launcher_env;
  for (const auto& [name, value] : worker_vars) env[name] = value;
  for (const auto& [name, value] : rank_vars) env[name] = value;
  return env;
}

bool IsShellName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::vector<EnvVar> RemoteEnvironment(const Environment& env) {
  std::vector<EnvVar> vars;
  for (const std::string& name : ExportedNames(env)) {
    if (IsShellName(name)) vars.emplace_back(name, env.at(name));
  }
  return vars;
}

}  // namespace chorus::launcher
