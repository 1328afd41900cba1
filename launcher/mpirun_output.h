// File: launcher/mpirun_output.h
//
// Reading what mpirun prints. mpirun's --tag-output prefixes each worker line with
// "[jobid,rank]<stdout>:"; chorusrun prints it in horovodrun's form "[rank]<stdout>:" (the same
// for <stderr> and <stddiag>; a --timestamp-output timestamp before the tag is kept). Lines
// without a tag are mpirun's own; FailureScanner reads them to name what ended a failed job.
//
// mpirun's stdout and stderr are read through one pipe (with two pipes Open MPI 4.1 drops its
// "mpirun noticed that process rank R ... exited on signal" report); the tag tells the streams
// apart, and mpirun's own untagged lines go to stderr.
//
// Thread-safety: RewriteRankTag is stateless; FailureScanner is thread-compatible.
#ifndef CHORUS_LAUNCHER_MPIRUN_OUTPUT_H_
#define CHORUS_LAUNCHER_MPIRUN_OUTPUT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace chorus::launcher {

struct TaggedLine {
  std::string text;  // the line with its tag in horovodrun's form
  int rank = 0;
  bool is_stdout = false;  // <stdout>; <stderr> and <stddiag> belong on stderr
};

// `line` with its first "[J,R]<stream>:" tag (within its first 64 characters) rewritten to
// "[R]<stream>:"; nullopt when the line has no such tag.
std::optional<TaggedLine> RewriteRankTag(absl::string_view line);

class FailureScanner {
 public:
  // Feeds one untagged line of mpirun's output (no trailing newline).
  void Feed(absl::string_view line);

  // One line naming what ended the job, e.g. "rank 1 exited with code 3" or "rank 1 on node vm
  // exited on signal 9 (Killed)", else the first paragraph of mpirun's first message, else what
  // its "Primary job terminated normally, but 1 process returned a non-zero exit code" notice
  // says ("1 process returned a non-zero exit code (mpirun did not name the rank)"), else
  // nullopt. Open MPI 4.1 does not always print the report naming the rank: whether it does
  // races with the other ranks' ends, so callers must accept either form.
  std::optional<std::string> Cause() const;

 private:
  std::optional<int> process_rank_;  // from "Process name: [[J,S],R]"
  std::optional<std::string> exit_code_;
  std::optional<std::string> signal_report_;
  // mpirun's first boxed message (other than "Primary job terminated normally..."): its lines
  // between "-----" rules up to the first blank line.
  std::vector<std::string> first_message_;
  std::string preamble_;  // the "Primary job terminated normally..." notice
  enum class Box { kNone, kInFirst, kDone } box_ = Box::kNone;
};

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_MPIRUN_OUTPUT_H_
