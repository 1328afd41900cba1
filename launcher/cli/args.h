// File: launcher/cli/args.h
//
// chorusrun's command line: horovodrun's flags, names and defaults (horovod/runner/launch.py).
// Everything up to the first word that is neither a flag nor a flag's value belongs to chorusrun;
// that word and all after it are the worker command, verbatim ("--" also ends chorusrun's flags).
// Horovod's single-dash long names (-np, -cb, -hostfile, -prefix-timestamp) are accepted.
//
// --config-file FILE is read here (launcher/cli/config_file.h); flags given win over its values,
// and its values pass the same range checks as flags.
//
// The elastic flags (--min-np, --max-np, --host-discovery-script, ...) make the job elastic and
// imply --gloo; with --mpi given they are InvalidArgument (Open MPI cannot resize a world).
// Flags chorus does not support yet (--jsrun) parse, and are then rejected with an
// Unimplemented status saying so. Every other problem (unknown flag, missing or
// malformed value, value out of range, no command) is InvalidArgument; its message is one line.
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_CLI_ARGS_H_
#define CHORUS_LAUNCHER_CLI_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "launcher/options.h"

namespace chorus::launcher {

struct CommandLine {
  enum class Action { kRun, kHelp, kVersion, kCheckBuild };
  Action action = Action::kRun;
  LaunchOptions options;
  std::string help_text;  // set for kHelp
};

// `args` excludes the program name.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_CLI_ARGS_H_
