// Fuzzes chorusrun's host lists: -H/--hosts (ParseHosts) and hostfile contents (ParseHostfile),
// both of which come from the user. The whole input is the text of each.
//
// Properties (launcher/hosts/hosts.h): no crash; errors are InvalidArgument; an accepted list has
// valid, unique host names with slot counts in [1, kMaxSlots], and FormatHosts of it parses back
// to the same list (it is what chorusrun hands mpirun -H).
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include "launcher/hosts/hosts.h"
#include "test/fuzz/fuzz_check.h"

namespace chorus::launcher {
namespace {

void CheckHosts(const std::vector<HostSlots>& hosts, absl::string_view what) {
  FUZZ_CHECK(!hosts.empty()) << what << " accepted an empty list";
  std::set<std::string> names;
  for (const HostSlots& h : hosts) {
    FUZZ_CHECK(IsValidHostName(h.host)) << what << " accepted host '" << h.host << "'";
    FUZZ_CHECK(h.slots >= 1 && h.slots <= kMaxSlots) << what << " accepted " << h.slots;
    FUZZ_CHECK(names.insert(h.host).second) << what << " listed '" << h.host << "' twice";
  }
  absl::StatusOr<std::vector<HostSlots>> again = ParseHosts(FormatHosts(hosts));
  FUZZ_CHECK(again.ok()) << "FormatHosts gave '" << FormatHosts(hosts)
                         << "', which ParseHosts refuses: " << again.status();
  FUZZ_CHECK(*again == hosts) << "'" << FormatHosts(hosts) << "' parses to another list";
}

}  // namespace
}  // namespace chorus::launcher

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::launcher;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<std::vector<HostSlots>> hosts = ParseHosts(text);
  if (hosts.ok()) {
    CheckHosts(*hosts, "ParseHosts");
  } else {
    FUZZ_CHECK(absl::IsInvalidArgument(hosts.status())) << hosts.status();
  }

  absl::StatusOr<std::vector<HostSlots>> file = ParseHostfile(text, "fuzz.hosts");
  if (file.ok()) {
    CheckHosts(*file, "ParseHostfile");
  } else {
    FUZZ_CHECK(absl::IsInvalidArgument(file.status())) << file.status();
    FUZZ_CHECK(file.status().message().find("fuzz.hosts") != absl::string_view::npos)
        << "the error does not name the file: " << file.status();
  }
  return 0;
}
