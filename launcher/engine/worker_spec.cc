#include "launcher/engine/worker_spec.h"

#include "base/config_names.h"
#include "launcher/engine/rank_env.h"

namespace chorus::launcher {

WorkerSpec MakeWorkerSpec(const WorkerStart& start, const std::string& host, bool remote,
                          const Environment& env) {
  WorkerSpec spec;
  if (!remote) {
    spec.program = start.program;
    spec.argv = start.command;
    spec.environment = env;
    return spec;
  }
  spec.program = start.ssh_path;
  spec.argv = SshWorkerArgv(start.ssh, host,
                            RemoteWorkerScript(start.cwd, start.command, start.grace_seconds));
  spec.environment = start.launcher_env;
  std::vector<EnvVar> vars = RemoteEnvironment(env);
  vars.emplace_back(config_names::kRendezvousSecret, start.secret);
  spec.stdin_text = RemoteEnvironmentLine(vars);
  return spec;
}

}  // namespace chorus::launcher
