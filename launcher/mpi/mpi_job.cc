#include "launcher/mpi/mpi_job.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "elastic/worker_exit.h"
#include "launcher/cli/worker_env.h"
#include "launcher/engine/job_engine.h"
#include "launcher/engine/job_settings.h"
#include "launcher/hosts/host_checks.h"
#include "launcher/hosts/job_hosts.h"
#include "launcher/hosts/rank_layout.h"
#include "launcher/hosts/rendezvous_address.h"
#include "launcher/hosts/ssh_command.h"
#include "launcher/mpi/mpirun_output.h"
#include "launcher/mpi/mpirun_verdict.h"
#include "launcher/mpi/no_progress_report.h"
#include "launcher/process/child_process.h"
#include "launcher/process/executable_search.h"
#include "launcher/process/failure_report.h"
#include "launcher/process/shell_words.h"

namespace chorus::launcher {
namespace {

// After the first no-progress report (launcher/mpi/no_progress_report.h), how long mpirun has to
// end the job by itself before chorusrun stops it. The reporting rank's MPI_Abort makes mpirun kill
// every rank, which takes well under a second when every host's daemon answers; when one does
// not (its host lost, its link cut: the very case the report is about), Open MPI 4.1's mpirun
// waits for it forever, and a job that lost a host would never end.
constexpr absl::Duration kMpirunAbortGrace = absl::Seconds(2);
// mpirun's time to end after a stop signal (chorusrun's SIGTERM, or a SIGINT/SIGTERM passed on)
// before SIGKILL: what --gloo gives its workers.
constexpr absl::Duration kMpirunStopGrace = absl::Seconds(kGraceSeconds);

int UsageError(const absl::Status& status) {
  std::cerr << "chorusrun: error: " << status.message() << std::endl;
  return 2;
}

// The hosts of `hosts` that mpirun reaches over ssh: not this machine, by name (IsLocalHost) or
// by address (a name that resolves to one of this machine's IPv4 addresses, which Open MPI takes
// for this machine too), each once.
std::vector<std::string> SshHosts(const std::vector<HostSlots>& hosts,
                                  const std::string& this_hostname) {
  const absl::StatusOr<std::vector<InterfaceAddress>> interfaces = ListInterfaceAddresses();
  std::vector<std::string> remote;
  for (const HostSlots& h : hosts) {
    if (IsLocalHost(h.host, this_hostname) || absl::c_linear_search(remote, h.host)) continue;
    const HostRoute route = LookUpHostRoute(h.host);
    if (route.resolved.ok()) {
      if (absl::StartsWith(*route.resolved, "127.")) continue;
      if (interfaces.ok() && absl::c_any_of(*interfaces, [&](const InterfaceAddress& a) {
            return a.address == *route.resolved;
          })) {
        continue;
      }
    }
    remote.push_back(h.host);
  }
  return remote;
}

// Checks ssh to every host mpirun reaches with it: nullopt when all answered, else chorusrun's
// exit status (the reason printed). mpirun's own ssh to a host that cannot be reached ends in
// "ORTE was unable to reliably start one or more daemons", after ssh's line; as horovodrun does,
// every host is checked first.
std::optional<int> CheckHosts(const LaunchOptions& o, const MpirunJob& job,
                              const std::string& path_var, const Environment& launcher_env,
                              absl::Duration timeout) {
  if (!MpirunUsesSsh(o, job.environment)) return std::nullopt;
  const std::vector<std::string> remote = SshHosts(job.hosts, job.this_hostname);
  if (remote.empty()) return std::nullopt;
  absl::StatusOr<std::string> ssh = FindExecutable("ssh", path_var);
  if (!ssh.ok()) {
    return UsageError(absl::FailedPreconditionError(
        absl::StrCat("mpirun starts its daemon on ", remote.front(),
                     " with ssh, which is not found (", ssh.status().message(), ")")));
  }
  SshOptions ssh_options;
  ssh_options.port = o.ssh_port;
  ssh_options.identity_file = o.ssh_identity_file;
  absl::StatusOr<SshCheckOutcome> checked =
      CheckHostsOverSsh(remote, ssh_options, *ssh, launcher_env, timeout);
  if (!checked.ok()) {
    std::cerr << "chorusrun: error: " << checked.status().message() << std::endl;
    return 1;
  }
  if (checked->signal) {
    std::cerr << "chorusrun: job stopped: chorusrun received signal "
              << elastic::SignalName(*checked->signal) << std::endl;
    return 128 + *checked->signal;
  }
  if (checked->failure) {
    std::cerr << "chorusrun: error: " << *checked->failure << std::endl;
    return 1;
  }
  return std::nullopt;
}

// Runs mpirun (`program`, `argv`), prints its output, watches for no-progress reports and stops
// it when it cannot end the job; chorusrun's exit status.
int RunMpirun(const LaunchOptions& o, const MpirunJob& job, const std::string& program,
              const std::vector<std::string>& argv) {
  MpirunJobEnd end;
  end.host_of_rank = MpirunRankHosts(o, job);
  end.grace = kMpirunStopGrace;
  std::optional<absl::Time> first_report;
  FailureScanner scanner;
  MpirunOutputParser output([&](const OutputLine& line) {
    if (!line.rank) {
      scanner.Feed(line.text);
    } else if (!line.is_stdout) {
      if (std::optional<NoProgressReport> report = ParseNoProgressReport(line.rank_text())) {
        // A rank that is not the MPI_COMM_WORLD rank of its line: the application gave chorus
        // a communicator of its own, whose ranks chorusrun cannot place.
        if (report->rank != *line.rank) end.host_of_rank.reset();
        if (end.reports.empty()) first_report = absl::Now();
        end.reports.push_back(*std::move(report));
      } else if (std::optional<FailureReport> failure =
                     ParseWorkerFailureReport(line.rank_text(), *line.rank)) {
        end.failure_reports.push_back(*std::move(failure));
      }
    }
    FILE* out = line.is_stdout ? stdout : stderr;
    std::fwrite(line.text.data(), 1, line.text.size(), out);
    std::fputc('\n', out);
    std::fflush(out);
  });
  ChildOptions child_options;
  child_options.grace = kMpirunStopGrace;
  child_options.stop_at = [&]() -> std::optional<absl::Time> {
    if (!first_report) return std::nullopt;
    return *first_report + kMpirunAbortGrace;
  };
  child_options.on_stop = [&](int sig) {
    if (sig == SIGTERM) {
      std::cerr << "chorusrun: mpirun is still running " << absl::FormatDuration(kMpirunAbortGrace)
                << " after rank " << end.reports.front().rank
                << " reported no progress (it cannot end the job while a host's daemon does not "
                   "answer): stopping it (SIGTERM)"
                << std::endl;
    } else {
      std::cerr << "chorusrun: mpirun is still running " << absl::FormatDuration(kMpirunStopGrace)
                << " after it was asked to stop: killing it (SIGKILL)" << std::endl;
    }
  };
  child_options.on_dump_request = [] {
    std::cerr << "chorusrun: SIGUSR2: passed to mpirun, which passes it to every rank; each "
                 "writes its flight recorder dump (CHORUS_FLIGHT_RECORDER_DIR, default "
                 "/tmp/chorus-flight on each host)"
              << std::endl;
  };
  absl::StatusOr<ChildEnd> child = RunChild(
      program, argv, job.environment, [&output](absl::string_view bytes) { output.Feed(bytes); },
      child_options);
  output.Finish();
  if (!child.ok()) {
    std::cerr << "chorusrun: error: " << child.status().message() << std::endl;
    return 1;
  }
  end.child = *child;
  end.mpirun_cause = scanner.Cause();
  const MpirunVerdict verdict = JudgeMpirunJob(end);
  if (verdict.line) std::cerr << *verdict.line << std::endl;
  return verdict.status;
}

}  // namespace

int RunMpiJob(const LaunchOptions& o, const Environment& launcher_env) {
  absl::StatusOr<JobHosts> hosts = ResolveJobHosts(o, launcher_env, /*use_slurm=*/true);
  if (!hosts.ok()) return UsageError(hosts.status());
  const auto path_it = launcher_env.find("PATH");
  const std::string path_var = path_it == launcher_env.end() ? "" : path_it->second;
  if (absl::StatusOr<std::string> found = FindExecutable(o.command[0], path_var); !found.ok()) {
    return UsageError(found.status());
  }
  absl::StatusOr<std::string> mpirun = FindExecutable("mpirun", path_var);
  if (!mpirun.ok()) {
    return UsageError(absl::NotFoundError(
        absl::StrCat("mpirun not found in PATH; MPI mode needs Open MPI's mpirun (",
                     mpirun.status().message(), ")")));
  }

  absl::StatusOr<JobSettings> settings = ResolveJobSettings(o, launcher_env);
  if (!settings.ok()) return UsageError(settings.status());

  MpirunJob job;
  job.mpirun = "mpirun";
  job.as_root = ::geteuid() == 0;
  job.hosts = std::move(hosts->hosts);
  job.environment = MpirunEnvironment(launcher_env, WorkerEnvironment(o), job.as_root);
  job.this_hostname = ThisHostname();
  job.local_cores = static_cast<int>(std::thread::hardware_concurrency());
  absl::StatusOr<std::vector<std::string>> argv = BuildMpirunArgv(o, job);
  if (!argv.ok()) return UsageError(argv.status());

  if (std::optional<int> failed =
          CheckHosts(o, job, path_var, launcher_env, settings->start_timeout)) {
    return *failed;
  }
  if (o.verbose) std::cout << ShellJoin(*argv) << std::endl;
  return RunMpirun(o, job, *mpirun, *argv);
}

}  // namespace chorus::launcher
