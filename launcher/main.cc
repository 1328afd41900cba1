// chorusrun: launches a chorus job, horovodrun-compatible: MPI mode (mpirun starts the workers)
// or, with --gloo or the elastic flags, an MPI-less job run by chorusrun's job engine
// (launcher/job_engine.h). See launcher/README.md.
//
// Exit status: 0 after --help/--version/--check-build; 2 for bad input, before anything starts;
// otherwise mpirun's status (128 + N when it was killed by signal N), or for an MPI-less job the
// status launcher/job_engine.h describes.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "launcher/args.h"
#include "launcher/check_build.h"
#include "launcher/child_process.h"
#include "launcher/executable_search.h"
#include "launcher/job_engine.h"
#include "launcher/job_hosts.h"
#include "launcher/mpirun_command.h"
#include "launcher/mpirun_output.h"
#include "launcher/rank_layout.h"
#include "launcher/worker_env.h"

extern char** environ;

namespace chorus::launcher {
namespace {

constexpr int kUsageError = 2;

int Fail(const absl::Status& status) {
  std::cerr << "chorusrun: error: " << status.message() << std::endl;
  return kUsageError;
}

Environment ProcessEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

int Main(const std::vector<std::string>& args) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine(args);
  if (!cl.ok()) return Fail(cl.status());
  const LaunchOptions& o = cl->options;
  switch (cl->action) {
    case CommandLine::Action::kHelp:
      std::cout << cl->help_text;
      return 0;
    case CommandLine::Action::kVersion:
      std::cout << CurrentBuild().version << std::endl;
      return 0;
    case CommandLine::Action::kCheckBuild:
      std::cout << CheckBuildText(CurrentBuild(), o.verbose) << std::endl;
      return 0;
    case CommandLine::Action::kRun:
      break;
  }

  const Environment launcher_env = ProcessEnvironment();
  if (o.is_elastic || o.gloo) return RunMpiLessJob(o, launcher_env);

  absl::StatusOr<JobHosts> hosts = ResolveJobHosts(o, launcher_env, /*use_slurm=*/true);
  if (!hosts.ok()) return Fail(hosts.status());
  const auto path_it = launcher_env.find("PATH");
  const std::string path_var = path_it == launcher_env.end() ? "" : path_it->second;
  if (absl::StatusOr<std::string> found = FindExecutable(o.command[0], path_var); !found.ok()) {
    return Fail(found.status());
  }
  absl::StatusOr<std::string> mpirun = FindExecutable("mpirun", path_var);
  if (!mpirun.ok()) {
    return Fail(absl::NotFoundError(
        absl::StrCat("mpirun not found in PATH; MPI mode needs Open MPI's mpirun (",
                     mpirun.status().message(), ")")));
  }

  MpirunJob job;
  job.mpirun = "mpirun";
  job.as_root = ::geteuid() == 0;
  job.hosts = std::move(hosts->hosts);
  job.environment = MpirunEnvironment(launcher_env, WorkerEnvironment(o), job.as_root);
  job.this_hostname = ThisHostname();
  job.local_cores = static_cast<int>(std::thread::hardware_concurrency());
  absl::StatusOr<std::vector<std::string>> argv = BuildMpirunArgv(o, job);
  if (!argv.ok()) return Fail(argv.status());
  if (o.verbose) std::cout << ShellJoin(*argv) << std::endl;

  FailureScanner scanner;
  MpirunOutputParser output([&scanner](const OutputLine& line) {
    if (!line.rank) scanner.Feed(line.text);
    FILE* out = line.is_stdout ? stdout : stderr;
    std::fwrite(line.text.data(), 1, line.text.size(), out);
    std::fputc('\n', out);
    std::fflush(out);
  });
  absl::StatusOr<int> status = RunChild(*mpirun, *argv, job.environment,
                                        [&output](absl::string_view bytes) { output.Feed(bytes); });
  output.Finish();
  if (!status.ok()) {
    std::cerr << "chorusrun: error: " << status.status().message() << std::endl;
    return 1;
  }
  if (*status != 0) {
    std::cerr << "chorusrun: job failed (mpirun exit status " << *status
              << "): " << scanner.Cause().value_or("mpirun reported no cause") << std::endl;
  }
  return *status;
}

}  // namespace
}  // namespace chorus::launcher

int main(int argc, char** argv) {
  return chorus::launcher::Main(std::vector<std::string>(argv + 1, argv + argc));
}
