#include "launcher/hosts/ssh_command.h"

#include "absl/strings/str_cat.h"

#include "launcher/process/environment.h"
#include "launcher/process/shell_words.h"

namespace chorus::launcher {
namespace {

std::vector<std::string> SshPrefix(const SshOptions& o, const std::string& host) {
  std::vector<std::string> argv = {o.ssh, "-o", "BatchMode=yes", "-o",
                                   absl::StrCat("ConnectTimeout=", o.connect_timeout_s)};
  if (o.port) argv.insert(argv.end(), {"-p", absl::StrCat(*o.port)});
  if (o.identity_file) argv.insert(argv.end(), {"-i", *o.identity_file});
  argv.push_back(host);
  return argv;
}

}  // namespace

std::vector<std::string> SshCheckArgv(const SshOptions& options, const std::string& host) {
  std::vector<std::string> argv = SshPrefix(options, host);
  argv.push_back("true");
  return argv;
}

std::vector<std::string> SshWorkerArgv(const SshOptions& options, const std::string& host,
                                       const std::string& script) {
  std::vector<std::string> argv = SshPrefix(options, host);
  argv.push_back(script);
  return argv;
}

std::string RemoteWorkerScript(const std::string& cwd, const std::vector<std::string>& command,
                               int grace_s) {
  // The exports happen in the worker's subshell only, so the script's own shell (the watcher) is
  // not affected by what they set (PATH, IFS, ...). The subshell walks its positional
  // parameters rather than a named variable, and unsets `e` and `nl`, so that no helper
  // variable the remote login exported reaches the worker holding the line (and the secret).
  // fd 3 keeps the script's stdin for the watcher: an asynchronous list's stdin is /dev/null.
  return absl::StrCat("cd ", ShellJoin({cwd}), " || exit 1; ",                                   //
                      "IFS= read -r e || exit 1; nl=$(printf '\\n_'); nl=${nl%_}; ",             //
                      "exec 3<&0; ",                                                             //
                      "(eval \"set -- $e\"; unset e nl; ",                                       //
                      "while [ $# -gt 0 ]; do export \"$1\"; shift; done; ",                     //
                      "exec ", ShellJoin(command), ") </dev/null 3<&- & w=$!; unset e; ",        //
                      "{ while IFS= read -r _ <&3; do :; done; kill -TERM $w; sleep ", grace_s,  //
                      " 3<&-; kill -KILL $w; } >/dev/null 2>&1 & g=$!; ",                        //
                      "exec 3<&-; wait $w; s=$?; kill $g 2>/dev/null; exit $s");
}

std::string RemoteEnvironmentLine(const std::vector<EnvVar>& vars) {
  std::string line;
  for (const auto& [name, value] : vars) {
    if (!line.empty()) line.push_back(' ');
    line.push_back('\'');
    for (const char c : absl::StrCat(name, "=", value)) {
      if (c == '\'') {
        line.append("'\\''");
      } else if (c == '\n') {
        line.append("'\"$nl\"'");
      } else {
        line.push_back(c);
      }
    }
    line.push_back('\'');
  }
  line.push_back('\n');
  return line;
}

}  // namespace chorus::launcher
