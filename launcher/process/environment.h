// File: launcher/process/environment.h
//
// A process's environment as chorusrun handles it (its own, mpirun's, a worker's), and which of
// its variables travel to workers on other hosts, in both modes (mpirun's -x in MPI mode, the
// ssh start of --gloo).
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_PROCESS_ENVIRONMENT_H_
#define CHORUS_LAUNCHER_PROCESS_ENVIRONMENT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace chorus::launcher {

using Environment = std::map<std::string, std::string>;

// Whether chorusrun's variable `name` travels to the workers on other hosts (mpirun's -x; the
// ssh start of --gloo). Every variable does, as with horovodrun, except:
//   - horovodrun's exclusions (IGNORE_REGEXES of its runner/common/util/env.py, matched at the
//     start of the name as Python's re.match does): names beginning with BASH_FUNC_ (bash's
//     exported functions), OLDPWD, or _HOROVOD_SECRET_KEY (horovodrun's job secret);
//   - CHORUS_RENDEZVOUS_SECRET: a job's secret goes only where chorusrun sends it itself;
//   - what describes the caller's own shell session on this host, whose value would be wrong on
//     another and would replace the one the worker's host gives it: HOSTNAME, PWD, `_` (the
//     program the caller's shell ran), SSH_AUTH_SOCK and SSH_AGENT_PID (ssh-agent's socket
//     here), SSH_CLIENT, SSH_CONNECTION and SSH_TTY (the caller's ssh session).
// Local workers inherit chorusrun's whole environment regardless.
bool IsForwarded(absl::string_view name);

// The names of `env` for which IsForwarded holds, sorted: what mpirun exports with -x,
// and what the ssh start of --gloo sends.
std::vector<std::string> ExportedNames(const Environment& env);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_PROCESS_ENVIRONMENT_H_
