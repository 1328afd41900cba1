// File: launcher/process/worker_output.h
//
// Where the output of an MPI-less job's workers goes. The Supervisor
// (launcher/process/supervisor.h) reads each worker's stdout and stderr pipes and hands the bytes
// to an OutputSink:
//
// - TerminalSink prints each line on chorusrun's stdout or stderr, tagged as horovodrun does:
//   "[1]<stdout>:text", "[1]<stderr>:text"; with --prefix-output-with-timestamp a timestamp
//   in mpirun's --timestamp-output form comes first ("Tue Dec  1 06:35:27 2026[1]<stdout>:text").
//   An unterminated last piece is printed as a line at EOF; a line longer than kMaxLineBytes is
//   printed in pieces of that size.
// - FileSink writes the bytes unchanged to DIR/rank.<r>/stdout and DIR/rank.<r>/stderr
//   (horovodrun's --output-filename layout in gloo mode), nothing to the terminal. An elastic
//   job's generations share the files (FileSink::ForRanks): rank r's files gather the output of
//   whoever holds rank r, generation after generation. A worker joining an elastic job writes
//   to DIR/worker.<id>/ until it has a rank.
//
// Thread-safety: thread-compatible (the Supervisor calls a sink from one thread).
#ifndef CHORUS_LAUNCHER_PROCESS_WORKER_OUTPUT_H_
#define CHORUS_LAUNCHER_PROCESS_WORKER_OUTPUT_H_

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace chorus::launcher {

enum class OutputStream { kStdout, kStderr };

class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // Bytes worker `index` wrote on `stream`, in order.
  virtual void Write(int index, OutputStream stream, absl::string_view bytes) = 0;
  // That stream of worker `index` has ended (EOF, or the group stopped reading it).
  virtual void Close(int index, OutputStream stream) = 0;
};

inline constexpr size_t kMaxLineBytes = 64 * 1024;

// "[rank]<stdout>:line" (or <stderr>), after mpirun's timestamp form of `time` when given.
std::string FormatTaggedLine(int rank, OutputStream stream, absl::string_view line,
                             std::optional<absl::Time> time, absl::TimeZone zone);
// The same with any label in the brackets (a joining elastic worker's id: "[w5]<stderr>:...").
std::string FormatTaggedLine(absl::string_view label, OutputStream stream, absl::string_view line,
                             std::optional<absl::Time> time, absl::TimeZone zone);

// Splits a byte stream into lines (without their '\n'); see kMaxLineBytes.
class LineSplitter {
 public:
  // Calls `emit` for each complete line in what has arrived so far.
  template <typename Emit>
  void Append(absl::string_view bytes, Emit&& emit) {
    pending_.append(bytes.data(), bytes.size());
    size_t start = 0;
    while (start < pending_.size()) {
      const size_t nl = pending_.find('\n', start);
      if (nl == std::string::npos) {
        if (pending_.size() - start < kMaxLineBytes) break;
        emit(absl::string_view(pending_).substr(start, kMaxLineBytes));
        start += kMaxLineBytes;
        continue;
      }
      emit(absl::string_view(pending_).substr(start, nl - start));
      start = nl + 1;
    }
    pending_.erase(0, start);
  }

  // Calls `emit` with the unterminated rest, if any.
  template <typename Emit>
  void Finish(Emit&& emit) {
    if (!pending_.empty()) emit(absl::string_view(pending_));
    pending_.clear();
  }

 private:
  std::string pending_;
};

class TerminalSink : public OutputSink {
 public:
  // Lines of `stdout`-stream output go to `out`, the rest to `err` (both borrowed; flushed after
  // each line). `ranks[index]` is the rank printed in the tag of worker `index`.
  TerminalSink(std::vector<int> ranks, bool timestamp, FILE* out, FILE* err);
  // The same with `labels[index]` in the tag instead of a rank.
  TerminalSink(std::vector<std::string> labels, bool timestamp, FILE* out, FILE* err);

  void Write(int index, OutputStream stream, absl::string_view bytes) override;
  void Close(int index, OutputStream stream) override;

 private:
  void Print(int index, OutputStream stream, absl::string_view line);

  std::vector<std::string> labels_;
  bool timestamp_;
  FILE* out_;
  FILE* err_;
  absl::TimeZone zone_;
  std::map<std::pair<int, OutputStream>, LineSplitter> lines_;
};

class FileSink : public OutputSink {
 public:
  // Creates `dir` and dir/rank.<r> for each of `ranks` (index order) and truncates their stdout
  // and stderr files. Internal naming the path when one cannot be created.
  static absl::StatusOr<std::unique_ptr<FileSink>> Create(const std::string& dir,
                                                          const std::vector<int>& ranks);
  // A sink for `ranks` (index order) over the same directory and files: a rank this job has
  // not seen yet gets its files created (truncated), the others are written on.
  absl::StatusOr<std::unique_ptr<FileSink>> ForRanks(const std::vector<int>& ranks) const;
  // A sink for one elastic worker that has no rank yet (it is joining), over the same
  // directory: dir/worker.<id>/{stdout,stderr}.
  absl::StatusOr<std::unique_ptr<FileSink>> ForWorker(const std::string& id) const;

  void Write(int index, OutputStream stream, absl::string_view bytes) override;
  // Flushes; the files stay open while a sink over them lives (a later generation may write to
  // the same rank).
  void Close(int index, OutputStream stream) override;

 private:
  struct RankFiles;  // the directory and each rank's open files, closed with the last sink
  FileSink() = default;
  // `dirs`: the subdirectory of each index ("rank.3", "worker.w5").
  static absl::StatusOr<std::unique_ptr<FileSink>> Make(std::shared_ptr<RankFiles> files,
                                                        const std::vector<std::string>& dirs);
  FILE* File(int index, OutputStream stream) const;

  std::shared_ptr<RankFiles> files_;
  std::vector<std::string> dirs_;  // per index
};

}  // namespace chorus::launcher

#endif  // CHORUS_LAUNCHER_PROCESS_WORKER_OUTPUT_H_
