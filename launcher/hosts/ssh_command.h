// File: launcher/hosts/ssh_command.h
//
// The ssh command lines of chorusrun --gloo for hosts that are not this machine:
//
//   check:  ssh -o BatchMode=yes -o ConnectTimeout=T [-p PORT] [-i FILE] HOST true
//   worker: ssh -o BatchMode=yes -o ConnectTimeout=T [-p PORT] [-i FILE] HOST SCRIPT
//
// SCRIPT is RemoteWorkerScript's (below). Why the worker's variables (the rendezvous secret among
// them) go through stdin and the worker is stopped at stdin's EOF: docs/launcher.md.
//
// Thread-safety: stateless (pure functions).
#ifndef CHORUS_LAUNCHER_HOSTS_SSH_COMMAND_H_
#define CHORUS_LAUNCHER_HOSTS_SSH_COMMAND_H_

#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/worker_env.h"

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
//   2. reads one line from stdin: the worker's variables, RemoteEnvironmentLine's (below);
//   3. starts, in the background with stdin /dev/null, a subshell that exports those variables
//      and execs `command` (found on the PATH just exported);
//   4. watches stdin: at EOF (chorusrun closed it, or ssh's connection ended) the worker gets
//      SIGTERM, then SIGKILL `grace_s` seconds later;
//   5. exits with the worker's status (128 + N when signal N killed it: ssh carries codes only).
// The launcher keeps ssh's stdin open, after writing the variables' line, until it wants the
// worker stopped. Only the worker process itself is signalled, not processes it started. Every
// word of `cwd` and `command` is quoted for sh. No variable's value is on the command line,
// where any user of either machine could read it (ps), and whose length is bounded (one
// argument: 128 KiB on Linux, here and in the remote sshd's exec of the shell).
// REQUIRES: !command.empty(), grace_s >= 1.
std::string RemoteWorkerScript(const std::string& cwd, const std::vector<std::string>& command,
                               int grace_s);

// The line RemoteWorkerScript reads: each NAME=VALUE of `vars` as one sh word in single quotes,
// a newline in a value written as '"$nl"' (the script sets nl to a newline) so that the whole
// set is one line, then '\n'. Values may hold any byte but NUL.
// REQUIRES: every name satisfies IsShellName (launcher/engine/rank_env.h).
std::string RemoteEnvironmentLine(const std::vector<EnvVar>& vars);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_HOSTS_SSH_COMMAND_H_
