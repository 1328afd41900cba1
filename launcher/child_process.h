// File: launcher/child_process.h
//
// Runs mpirun as a child of chorusrun: its stdout and stderr come back through one pipe (see
// launcher/mpirun_output.h for why one), as read, to `on_output`; SIGINT and SIGTERM sent to
// chorusrun are forwarded to it. Blocks until the child exits. One child at a time per process (the
// signal handlers are process-wide).
//
// Thread-safety: call from the main thread only.
#ifndef CHORUS_LAUNCHER_CHILD_PROCESS_H_
#define CHORUS_LAUNCHER_CHILD_PROCESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "launcher/mpirun_command.h"

namespace chorus::launcher {

// Called with the child's output in the order read, in chunks of any size (lines may be split
// anywhere).
using ByteSink = std::function<void(absl::string_view)>;

// Runs `program` with `argv` (argv[0] included) in `env`. Returns the exit status as a shell
// reports it: the exit code, or 128 + signal number when the child was killed by a signal.
// Internal is returned when the child cannot be started.
absl::StatusOr<int> RunChild(const std::string& program, const std::vector<std::string>& argv,
                             const Environment& env, const ByteSink& on_output);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_CHILD_PROCESS_H_
