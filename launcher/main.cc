// chorusrun: launches a chorus job, horovodrun-compatible: MPI mode (mpirun starts the workers)
// or, with --gloo or the elastic flags, an MPI-less job run by chorusrun's job engine
// (launcher/engine/job_engine.h). See launcher/README.md.
//
// Exit status: 0 after --help/--version/--check-build; 2 for bad input, before anything starts;
// otherwise, for an MPI-mode job, the status launcher/mpi/mpi_job.h describes, and for an MPI-less
// job the one launcher/engine/job_engine.h describes.
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "launcher/cli/args.h"
#include "launcher/cli/check_build.h"
#include "launcher/engine/job_engine.h"
#include "launcher/mpi/mpi_job.h"

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
  return RunMpiJob(o, launcher_env);
}

}  // namespace
}  // namespace chorus::launcher

int main(int argc, char** argv) {
  return chorus::launcher::Main(std::vector<std::string>(argv + 1, argv + argc));
}
