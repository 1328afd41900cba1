#include "launcher/ssh_command.h"

#include "absl/strings/str_cat.h"

#include "launcher/mpirun_command.h"
#include "launcher/rank_env.h"

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

std::string RemoteWorkerScript(const std::string& cwd, const std::vector<EnvVar>& env,
                               const std::vector<std::string>& command, int grace_s) {
  std::vector<std::string> worker = {"env"};
  for (const auto& [name, value] : env) worker.push_back(absl::StrCat(name, "=", value));
  worker.insert(worker.end(), command.begin(), command.end());
  const std::string secret = kRendezvousSecretVar;
  // fd 3 keeps the script's stdin for the watcher: an asynchronous list's stdin is /dev/null.
  return absl::StrCat("cd ", ShellJoin({cwd}), " || exit 1; ",                                   //
                      "IFS= read -r ", secret, " || exit 1; export ", secret, "; ",              //
                      "exec 3<&0; ",                                                             //
                      ShellJoin(worker), " </dev/null 3<&- & w=$!; ",                            //
                      "{ while IFS= read -r _ <&3; do :; done; kill -TERM $w; sleep ", grace_s,  //
                      " 3<&-; kill -KILL $w; } >/dev/null 2>&1 & g=$!; ",                        //
                      "exec 3<&-; wait $w; s=$?; kill $g 2>/dev/null; exit $s");
}

}  // namespace chorus::launcher
