// File: launcher/mpi/mpirun_output.h
//
// Reading what mpirun prints. mpirun's --tag-output prefixes what a rank writes with
// "[jobid,rank]<stdout>:"; chorusrun prints each line in horovodrun's form "[rank]<stdout>:"
// (the same for <stderr> and <stddiag>; a --timestamp-output timestamp before the tag is kept).
// Lines without a tag are mpirun's own; FailureScanner reads them to name what ended a failed job.
//
// Note [mpirun's tagged records]: Open MPI 4.1 reads a rank's pipe in chunks (at most 4096 bytes
// each, as they come) and prints each chunk at once, split at its newlines into records: a tag,
// then the chunk's bytes up to and including a newline, or up to the chunk's end, unterminated.
// So a line a rank writes in two pieces (two writes, or one longer than 4096 bytes) is two
// records, and another rank's or stream's record may come between them, on the same line of
// mpirun's output:
//
//   [1,1]<stdout>:line 0 [1,0]<stdout>:line 0 [1,1]<stdout>:1\n
//   [1,0]<stdout>:0\n
//
// is rank 1's "line 0 1" and rank 0's "line 0 0". MpirunOutputParser puts the records of each
// (rank, stream) back together: a record ends at its newline, or where the next tag begins
// (with --timestamp-output, the timestamp before it). A rank's own text that looks exactly
// like a tag ("[1,0]<stdout>:", or one after a ctime-style timestamp) in the middle of a line is
// taken for one: Open MPI's format cannot tell them apart.
//
// mpirun's stdout and stderr are read through one pipe (with two pipes Open MPI 4.1 drops its
// "mpirun noticed that process rank R ... exited on signal" report); the tag tells the streams
// apart, and mpirun's own untagged lines go to stderr.
//
// Thread-safety: MpirunOutputParser and FailureScanner are thread-compatible.
#ifndef CHORUS_LAUNCHER_MPI_MPIRUN_OUTPUT_H_
#define CHORUS_LAUNCHER_MPI_MPIRUN_OUTPUT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace chorus::launcher {

// One line of mpirun's output as chorusrun prints it (without its newline).
struct OutputLine {
  // A rank's line: "[R]<stream>:text", after the timestamp of its first record when mpirun
  // printed one; mpirun's own line: as it printed it.
  std::string text;
  std::optional<int> rank;  // nullopt for mpirun's own lines
  bool is_stdout = false;   // a rank's <stdout>; the rest belongs on stderr
  size_t body = 0;          // where the rank's own text begins in `text` (after its tag)

  absl::string_view rank_text() const { return absl::string_view(text).substr(body); }
};

// Turns mpirun's --tag-output byte stream, in chunks of any size, into whole lines: each rank's
// line once its newline arrived, whatever came between its records (Note [mpirun's tagged
// records]); mpirun's own lines as they end. A line longer than kMaxLineBytes
// (launcher/process/worker_output.h) is emitted in pieces of that size, as in --gloo mode.
class MpirunOutputParser {
 public:
  using Emit = std::function<void(const OutputLine&)>;
  enum class Stream { kStdout, kStderr, kStddiag };

  explicit MpirunOutputParser(Emit emit);

  // The next bytes mpirun printed.
  void Feed(absl::string_view bytes);

  // mpirun's output has ended: emits what is left, every unterminated line (each rank's and
  // stream's, in the order they began, then mpirun's own) as a line.
  void Finish();

 private:
  using Key = std::pair<int, Stream>;  // rank, stream
  struct Partial {
    std::string timestamp;  // of the record that began the line
    std::string text;
    uint64_t order = 0;  // when the line began, for Finish
  };
  // Consumes what can be decided from pending_; at_end: nothing more will come.
  void Parse(bool at_end);
  // Adds to the line current_ is writing (emitting kMaxLineBytes pieces).
  void AppendToRecord(absl::string_view bytes);
  // Emits the line `key` has begun (an empty one if none) and forgets it.
  void EndLine(const Key& key);
  void EmitRankLine(const Key& key, absl::string_view timestamp, absl::string_view text);
  void AppendUntagged(absl::string_view bytes);
  void EmitUntagged();

  Emit emit_;
  // kRecordStart: a tag or one of mpirun's own lines begins here; kRecord: inside the record of
  // current_; kUntagged: inside one of mpirun's own lines.
  enum class State { kRecordStart, kRecord, kUntagged } state_ = State::kRecordStart;
  std::string pending_;  // bytes fed but not consumed (an unfinished tag, or not parsed yet)
  Key current_{0, Stream::kStdout};
  std::string current_timestamp_;
  std::map<Key, Partial> partial_;  // lines begun and not yet ended
  uint64_t next_order_ = 0;
  std::string untagged_;
};

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

#endif  // CHORUS_LAUNCHER_MPI_MPIRUN_OUTPUT_H_
