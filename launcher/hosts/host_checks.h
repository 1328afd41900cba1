// File: launcher/hosts/host_checks.h
//
// `ssh HOST true` (launcher/hosts/ssh_command.h) for every remote host of an MPI-less job, once,
// before any worker is placed on it, as horovodrun checks its hosts: a host ssh cannot reach is
// named with ssh's last line (the fixed-size job ends, an elastic one blacklists the host)
// instead of failing a worker later. Each check runs under the job's Supervisor and is bounded
// by the start timeout (ssh's ConnectTimeout, then SIGTERM and SIGKILL).
//
// CheckHostsOverSsh runs the same checks at once for a job that needs every host before it
// starts (MPI mode, where mpirun reaches its hosts with ssh), under a Supervisor of its own.
//
// Thread-safety: thread-compatible; the engine's thread, with its Supervisor.
#ifndef CHORUS_LAUNCHER_HOSTS_HOST_CHECKS_H_
#define CHORUS_LAUNCHER_HOSTS_HOST_CHECKS_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "launcher/hosts/ssh_command.h"
#include "launcher/process/environment.h"
#include "launcher/process/supervisor.h"

namespace chorus::launcher {

class HostChecks {
 public:
  // `ssh_path` empty: ssh was not found (`ssh_missing` says why); every check fails with that.
  HostChecks(SshOptions ssh, std::string ssh_path, std::string ssh_missing, Environment env,
             absl::Duration timeout);
  ~HostChecks();

  // Starts the check of each host of `hosts` not checked yet.
  void Check(const std::vector<std::string>& hosts, Supervisor& supervisor, absl::Time now);
  // True once every host of `hosts` has a verdict.
  bool Settled(const std::vector<std::string>& hosts) const;
  bool Passed(const std::string& host) const;

  // Enforces the deadlines; returns when it must be called again at the latest.
  absl::Time Tick(Supervisor& supervisor, absl::Time now);
  // Takes the events of its checks out of `events`; returns the hosts whose check failed since
  // the last call, each with a sentence saying so ("cannot reach host H over ssh (ssh H true):
  // <ssh's last line>", "host H did not answer over ssh within --start-timeout N s").
  std::vector<std::pair<std::string, std::string>> Take(Supervisor::Events& events);

  void Stop(Supervisor& supervisor);

 private:
  struct Probe;

  SshOptions ssh_;
  std::string ssh_path_;
  std::string ssh_missing_;
  Environment env_;
  absl::Duration timeout_;
  std::map<std::string, std::unique_ptr<Probe>> running_;    // by host
  std::map<std::string, bool> verdicts_;                     // host -> passed
  std::vector<std::pair<std::string, std::string>> failed_;  // not yet taken
};

struct SshCheckOutcome {
  std::optional<std::string> failure;  // the first failure's sentence (HostChecks::Take's)
  std::optional<int> signal;           // SIGINT/SIGTERM that reached chorusrun meanwhile
};

// Checks every host of `hosts` with `ssh HOST true` at once and returns when every check
// passed, at the first failure (the other checks are killed), or when SIGINT/SIGTERM reaches
// chorusrun; it sleeps in the Supervisor's poll meanwhile. `ssh_path`: ssh, found on PATH;
// `timeout`: --start-timeout (ssh's ConnectTimeout, then each check's deadline). Internal when
// the Supervisor cannot be created.
absl::StatusOr<SshCheckOutcome> CheckHostsOverSsh(const std::vector<std::string>& hosts,
                                                  const SshOptions& ssh,
                                                  const std::string& ssh_path,
                                                  const Environment& env, absl::Duration timeout);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_HOSTS_HOST_CHECKS_H_
