// File: launcher/process/executable_search.h
//
// Finds the program a command names, as execvp would: a name with a '/' is used as is; any
// other is looked up in the directories of PATH (an empty entry means the current directory).
//
// Thread-safety: reads the file system only; safe from any thread.
#ifndef CHORUS_LAUNCHER_PROCESS_EXECUTABLE_SEARCH_H_
#define CHORUS_LAUNCHER_PROCESS_EXECUTABLE_SEARCH_H_

#include <string>

#include "absl/status/statusor.h"

namespace chorus::launcher {

// The path of an executable regular file for `name`; NotFound naming `name` and PATH otherwise
// (a file that exists but is not executable is named as such).
absl::StatusOr<std::string> FindExecutable(const std::string& name, const std::string& path_var);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_PROCESS_EXECUTABLE_SEARCH_H_
