#include "launcher/process/environment.h"

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"

#include "base/config_names.h"

namespace chorus::launcher {

bool IsForwarded(absl::string_view name) {
  // horovodrun's IGNORE_REGEXES, anchored at the start only (re.match).
  for (absl::string_view prefix : {"BASH_FUNC_", "OLDPWD", "_HOROVOD_SECRET_KEY"}) {
    if (absl::StartsWith(name, prefix)) return false;
  }
  // The rest of IsForwarded's list (launcher/process/environment.h).
  static const absl::string_view kNotForwarded[] = {config_names::kRendezvousSecret,
                                                    "HOSTNAME",
                                                    "PWD",
                                                    "_",
                                                    "SSH_AUTH_SOCK",
                                                    "SSH_AGENT_PID",
                                                    "SSH_CLIENT",
                                                    "SSH_CONNECTION",
                                                    "SSH_TTY"};
  return !name.empty() && !absl::c_linear_search(kNotForwarded, name);
}

std::vector<std::string> ExportedNames(const Environment& env) {
  std::vector<std::string> names;
  for (const auto& [name, value] : env) {
    if (IsForwarded(name)) names.push_back(name);
  }
  return names;  // std::map iterates in sorted order
}

}  // namespace chorus::launcher
