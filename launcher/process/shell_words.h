// File: launcher/process/shell_words.h
//
// Words as a POSIX shell reads and writes them: --mpi-args and --binding-args split into
// mpirun's arguments, and a command line shown (--verbose) or run by a remote shell (ssh).
//
// Thread-safety: stateless.
#ifndef CHORUS_LAUNCHER_PROCESS_SHELL_WORDS_H_
#define CHORUS_LAUNCHER_PROCESS_SHELL_WORDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace chorus::launcher {

// Splits `text` into words like a POSIX shell does (whitespace separates; single quotes, double
// quotes and backslashes quote); InvalidArgument on an unterminated quote.
absl::StatusOr<std::vector<std::string>> ShellSplit(const std::string& text);

// `argv` as one line a POSIX shell would read back into the same words (for --verbose).
std::string ShellJoin(const std::vector<std::string>& argv);

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_PROCESS_SHELL_WORDS_H_
