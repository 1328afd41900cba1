// File: launcher/ssh_command.h
//
// The ssh command lines of chorusrun --gloo for hosts that are not this machine:
//
//   check:  ssh -o BatchMode=yes -o ConnectTimeout=T [-p PORT] [-i FILE] HOST true
//   worker: ssh -o BatchMode=yes -o ConnectTimeout=T [-p PORT] [-i FILE] HOST SCRIPT
//
// SCRIPT is RemoteWorkerScript's (below). Why the secret goes through stdin and the worker is
// stopped at stdin's EOF: docs/launcher.md.
//
// Thread-safety: stateless (pure functions).
#ifndef CHORUS_LAUNCHER_SSH_COMMAND_H_
#define CHORUS_LAUNCHER_SSH_COMMAND_H_

#include <optional>
#include <string>
#include <vector>

#include "launcher/worker_env.h"

namespace chorus::launcher {

struct SshOptions {
  std::string ssh = "ssh";  // argv[0]
  std::optional<int> port;
  std::optional<std::string> identity_file;
  int connect_timeout_s = 30;
};

std::vector<std::string> SshCheckArgv(const SshOptions& options, const std::string& host);

std::vector<std::string> SshWorkerArgv(const SshOptions& options, const std::string& host,
                                       const std::string& script);

// SCRIPT, which runs in the remote user's login shell; that shell must read POSIX sh (sh, bash,
// dash, zsh, ksh). It:
//   1. cd's to `cwd` (the launcher's working directory; exit 1 when it cannot);
//   2. reads one line from stdin into CHORUS_RENDEZVOUS_SECRET and exports it: the secret never
//      appears on a command line, where any user of either machine could read it;
//   3. starts `env NAME=VALUE... COMMAND ARGS...` in the background (stdin /dev/null);
//   4. watches stdin: at EOF (chorusrun closed it, or ssh's connection ended) the worker gets
//      SIGTERM, then SIGKILL `grace_s` seconds later;
//   5. exits with the worker's status (128 + N when signal N killed it: ssh carries codes only).
// The launcher keeps ssh's stdin open, after writing the secret line, until it wants the worker
// stopped. Only the worker process itself is signalled, not processes it started. Every word of
// `cwd`, `env` and `command` is quoted for sh.
// REQUIRES: !command.empty(), grace_s >= 1.
std::string RemoteWorkerScript(const std::string& cwd, const std::vector<EnvVar>& env,
                               const std::vector<std::string>& command, int grace_s);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_SSH_COMMAND_H_
