#include "launcher/ucx_launch.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "launcher/executable_search.h"
#include "launcher/job_hosts.h"
#include "launcher/rank_env.h"
#include "launcher/rendezvous_server.h"
#include "launcher/spawn.h"
#include "launcher/ssh_command.h"
#include "launcher/worker_env.h"
#include "launcher/worker_output.h"
#include "launcher/worker_spec.h"

namespace chorus::launcher {
namespace {

constexpr int kUsageError = 2;
constexpr int kStartError = 1;
constexpr int kDefaultStartTimeoutSeconds = 30;  // horovodrun's

int Fail(int status, absl::string_view message) {
  std::cerr << "chorusrun: error: " << message << std::endl;
  return status;
}

// The IPv4 address of network interface `name`.
absl::StatusOr<std::string> InterfaceAddress(const std::string& name) {
  struct ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return absl::InternalError(absl::StrCat("getifaddrs: ", std::strerror(errno)));
  }
  std::optional<std::string> found;
  for (struct ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || name != a->ifa_name) {
      continue;
    }
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const struct sockaddr_in*>(a->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) found = text;
  }
  ::freeifaddrs(list);
  if (!found) {
    return absl::InvalidArgumentError(absl::StrCat("--network-interfaces: interface '", name,
                                                   "' has no IPv4 address on this machine"));
  }
  return *found;
}

// --start-timeout, else HOROVOD_START_TIMEOUT (as horovodrun), else 30.
absl::StatusOr<int> StartTimeoutSeconds(const LaunchOptions& o, const Environment& env) {
  if (o.start_timeout_s) return *o.start_timeout_s;
  auto it = env.find("HOROVOD_START_TIMEOUT");
  if (it == env.end()) return kDefaultStartTimeoutSeconds;
  int seconds = 0;
  if (!absl::SimpleAtoi(it->second, &seconds) || seconds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("HOROVOD_START_TIMEOUT=", it->second, " is not a number of seconds >= 1"));
  }
  return seconds;
}

// Keeps the last line each check printed, for the error message.
class LastLineSink : public OutputSink {
 public:
  explicit LastLineSink(size_t n) : last_(n), lines_(n) {}

  void Write(int index, OutputStream stream, absl::string_view bytes) override {
    lines_[static_cast<size_t>(index)].Append(bytes, [&](absl::string_view l) { Keep(index, l); });
  }
  void Close(int index, OutputStream stream) override {
    lines_[static_cast<size_t>(index)].Finish([&](absl::string_view l) { Keep(index, l); });
  }
  const std::string& last(int index) const { return last_[static_cast<size_t>(index)]; }

 private:
  void Keep(int index, absl::string_view line) {
    if (line.find_first_not_of(" \t\r") != absl::string_view::npos) {
      last_[static_cast<size_t>(index)] = std::string(line);
    }
  }

  std::vector<std::string> last_;
  std::vector<LineSplitter> lines_;  // stdout and stderr share one: only the last line matters
};

// `ssh HOST true` for every host at once, within the start timeout. The failure line, or
// nullopt when every host answered.
std::optional<std::string> CheckHosts(const std::vector<std::string>& hosts, const SshOptions& ssh,
                                      const std::string& ssh_path, const Environment& env,
                                      int timeout_s, int* status) {
  std::vector<WorkerSpec> specs;
  for (const std::string& host : hosts) {
    WorkerSpec spec;
    spec.program = ssh_path;
    spec.argv = SshCheckArgv(ssh, host);
    spec.environment = env;
    specs.push_back(std::move(spec));
  }
  LastLineSink sink(hosts.size());
  WorkerGroupOptions options;
  options.grace = absl::Seconds(1);
  options.deadline = absl::Now() + absl::Seconds(timeout_s);
  WorkerGroup group(options, &sink);
  if (absl::Status s = group.Start(specs); !s.ok()) {
    *status = kStartError;
    return absl::StrCat("cannot check the ssh hosts: ", s.message());
  }
  const GroupResult result = group.Wait();
  if (result.stop_signal) {
    *status = 128 + *result.stop_signal;
    return absl::StrCat("stopped by signal ", SignalName(*result.stop_signal),
                        " while checking the ssh hosts");
  }
  *status = kStartError;
  if (result.first_failure) {
    const int i = *result.first_failure;
    const WorkerExit& e = result.exits[static_cast<size_t>(i)];
    const std::string why = !sink.last(i).empty() ? sink.last(i)
                            : e.signaled
                                ? absl::StrCat("ssh was killed by signal ", SignalName(e.code))
                                : absl::StrCat("ssh exited with code ", e.code);
    return absl::StrCat("cannot reach host ", hosts[static_cast<size_t>(i)], " over ssh (ssh ",
                        hosts[static_cast<size_t>(i)], " true): ", why);
  }
  if (result.timed_out) {
    std::vector<std::string> late;
    for (size_t i = 0; i < hosts.size(); ++i) {
      // Ended by the stop, not by answering in time.
      if (!result.exits[i].ok()) late.push_back(hosts[i]);
    }
    return absl::StrCat(late.size() == 1 ? "host " : "hosts ", absl::StrJoin(late, ", "),
                        " did not answer over ssh within --start-timeout ", timeout_s, " s");
  }
  return std::nullopt;
}

}  // namespace

std::string DescribeRankExit(const RankPlacement& p, bool remote, const WorkerExit& exit) {
  const std::string who = absl::StrCat("rank ", p.rank, " on ", p.host);
  if (exit.signaled) return absl::StrCat(who, " was killed by signal ", SignalName(exit.code));
  std::string text = absl::StrCat(who, " exited with code ", exit.code);
  if (remote && exit.code == 255) {
    absl::StrAppend(&text, " (ssh's code for a failed connection)");
  } else if (remote && exit.code > 128 && exit.code <= 128 + 64) {
    absl::StrAppend(&text, " (the remote shell's code for signal ", SignalName(exit.code - 128),
                    ")");
  }
  return text;
}

int RunUcxJob(const LaunchOptions& o, const Environment& launcher_env) {
  absl::StatusOr<JobHosts> hosts = ResolveJobHosts(o, launcher_env, /*use_slurm=*/true);
  if (!hosts.ok()) return Fail(kUsageError, hosts.status().message());
  absl::StatusOr<std::vector<RankPlacement>> layout = LayoutRanks(hosts->hosts, o.num_proc);
  if (!layout.ok()) return Fail(kUsageError, layout.status().message());
  absl::StatusOr<int> start_timeout = StartTimeoutSeconds(o, launcher_env);
  if (!start_timeout.ok()) return Fail(kUsageError, start_timeout.status().message());

  const std::string this_host = ThisHostname();
  std::vector<bool> remote;               // by rank
  std::vector<std::string> remote_hosts;  // in host order, once each
  for (const RankPlacement& p : *layout) {
    remote.push_back(!IsLocalHost(p.host, this_host));
    if (remote.back() && (remote_hosts.empty() || remote_hosts.back() != p.host)) {
      remote_hosts.push_back(p.host);
    }
  }
  const bool all_local = remote_hosts.empty();

  const auto path_it = launcher_env.find("PATH");
  const std::string path_var = path_it == launcher_env.end() ? "" : path_it->second;
  std::string program;
  if (std::find(remote.begin(), remote.end(), false) != remote.end()) {
    absl::StatusOr<std::string> found = FindExecutable(o.command[0], path_var);
    if (!found.ok()) return Fail(kUsageError, found.status().message());
    program = *std::move(found);
  }
  SshOptions ssh;
  ssh.port = o.ssh_port;
  ssh.identity_file = o.ssh_identity_file;
  ssh.connect_timeout_s = *start_timeout;
  std::string ssh_path;
  if (!all_local) {
    absl::StatusOr<std::string> found = FindExecutable("ssh", path_var);
    if (!found.ok()) {
      return Fail(kUsageError,
                  absl::StrCat("ssh is needed to start workers on ",
                               absl::StrJoin(remote_hosts, ", "), ": ", found.status().message()));
    }
    ssh_path = *std::move(found);
  }
  std::string advertised_host = "127.0.0.1";
  if (!all_local) {
    advertised_host = this_host;
    if (!o.network_interfaces.empty()) {
      absl::StatusOr<std::string> address = InterfaceAddress(o.network_interfaces[0]);
      if (!address.ok()) return Fail(kUsageError, address.status().message());
      advertised_host = *std::move(address);
    }
    if (advertised_host.empty()) {
      return Fail(kUsageError,
                  "this machine has no hostname for remote workers to reach it; "
                  "name an interface with --network-interfaces");
    }
  }
  absl::StatusOr<std::string> cwd = CurrentDirectory();
  if (!cwd.ok()) return Fail(kStartError, cwd.status().message());

  std::vector<int> ranks;
  for (const RankPlacement& p : *layout) ranks.push_back(p.rank);
  std::unique_ptr<OutputSink> sink;
  if (o.output_filename) {
    absl::StatusOr<std::unique_ptr<FileSink>> files = FileSink::Create(*o.output_filename, ranks);
    if (!files.ok()) return Fail(kUsageError, files.status().message());
    sink = *std::move(files);
  } else {
    sink = std::make_unique<TerminalSink>(ranks, o.prefix_output_with_timestamp, stdout, stderr);
  }

  if (!all_local) {
    int status = 0;
    if (std::optional<std::string> failure =
            CheckHosts(remote_hosts, ssh, ssh_path, launcher_env, *start_timeout, &status)) {
      return Fail(status, *failure);
    }
  }

  absl::StatusOr<std::string> secret = GenerateRendezvousSecret();
  if (!secret.ok()) return Fail(kStartError, secret.status().message());
  RendezvousServerOptions server_options;
  server_options.host = all_local ? "127.0.0.1" : "0.0.0.0";
  server_options.secret = *secret;
  absl::StatusOr<std::unique_ptr<RendezvousServer>> server =
      RendezvousServer::Start(server_options);
  if (!server.ok()) return Fail(kStartError, server.status().message());
  RendezvousInfo rendezvous;
  rendezvous.address = absl::StrCat(advertised_host, ":", (*server)->port());
  rendezvous.secret = *secret;
  rendezvous.start_timeout_s = *start_timeout;
  if (o.verbose) {
    std::cout << "chorusrun: rendezvous server at " << rendezvous.address << " (listening on "
              << server_options.host << ")" << std::endl;
  }

  const std::vector<EnvVar> worker_vars = WorkerEnvironment(o);
  const WorkerStart start{program, o.command,    ssh_path, ssh,
                          *cwd,    launcher_env, *secret,  kGraceSeconds};
  std::vector<WorkerSpec> specs;
  for (const RankPlacement& p : *layout) {
    WorkerSpec spec =
        MakeWorkerSpec(start, p.host, remote[static_cast<size_t>(p.rank)],
                       MergeEnvironment(launcher_env, worker_vars, RankEnvironment(p, rendezvous)));
    if (o.verbose) {
      std::cout << "chorusrun: rank " << p.rank << " on " << p.host << ": " << ShellJoin(spec.argv)
                << std::endl;
    }
    specs.push_back(std::move(spec));
  }

  WorkerGroupOptions group_options;
  group_options.grace = absl::Seconds(kGraceSeconds);
  GroupResult result;
  {
    WorkerGroup group(group_options, sink.get());
    if (absl::Status s = group.Start(specs); !s.ok()) {
      (*server)->Shutdown();
      return Fail(kStartError, absl::StrCat("cannot start the workers: ", s.message()));
    }
    result = group.Wait();
  }
  (*server)->Shutdown();
  sink.reset();  // flushes and closes --output-filename files

  if (result.first_failure) {
    const int r = *result.first_failure;
    const WorkerExit& e = result.exits[static_cast<size_t>(r)];
    std::cerr << "chorusrun: job failed: "
              << DescribeRankExit((*layout)[static_cast<size_t>(r)], remote[static_cast<size_t>(r)],
                                  e)
              << std::endl;
    return e.shell_status();
  }
  if (result.stop_signal) {
    std::cerr << "chorusrun: job stopped: chorusrun received signal "
              << SignalName(*result.stop_signal) << std::endl;
    return 128 + *result.stop_signal;
  }
  return 0;
}

}  // namespace chorus::launcher
