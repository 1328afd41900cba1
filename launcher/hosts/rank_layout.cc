#include "launcher/hosts/rank_layout.h"

#include <unistd.h>

#include "absl/strings/match.h"

namespace chorus::launcher {

bool IsLocalHost(absl::string_view host, absl::string_view this_hostname) {
  if (absl::EqualsIgnoreCase(host, "localhost") || host == "127.0.0.1" || host == "::1") {
    return true;
  }
  if (this_hostname.empty()) return false;
  const absl::string_view short_name = this_hostname.substr(0, this_hostname.find('.'));
  return absl::EqualsIgnoreCase(host, this_hostname) || absl::EqualsIgnoreCase(host, short_name);
}

std::string ThisHostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace chorus::launcher
