#include "launcher/process/executable_search.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace chorus::launcher {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsExecutable(const std::string& path) {
  return IsRegularFile(path) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

absl::StatusOr<std::string> FindExecutable(const std::string& name, const std::string& path_var) {
  if (name.empty()) return absl::NotFoundError("empty command name");
  if (name.find('/') != std::string::npos) {
    if (IsExecutable(name)) return name;
    if (IsRegularFile(name)) {
      return absl::NotFoundError(absl::StrCat("command '", name, "' is not executable"));
    }
    return absl::NotFoundError(absl::StrCat("command '", name, "' does not exist"));
  }
  std::string not_executable;
  for (absl::string_view dir : absl::StrSplit(path_var, ':')) {
    const std::string candidate =
        dir.empty() ? name : absl::StrCat(dir, dir.back() == '/' ? "" : "/", name);
    if (IsExecutable(candidate)) return candidate;
    if (not_executable.empty() && IsRegularFile(candidate)) not_executable = candidate;
  }
  if (!not_executable.empty()) {
    return absl::NotFoundError(
        absl::StrCat("command '", name, "' found as ", not_executable, " is not executable"));
  }
  return absl::NotFoundError(
      absl::StrCat("command '", name, "' not found in PATH (", path_var, ")"));
}

}  // namespace chorus::launcher
