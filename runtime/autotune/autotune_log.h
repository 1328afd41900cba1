// File: runtime/autotune/autotune_log.h
//
// The autotune log (CHORUS_AUTOTUNE_LOG, HOROVOD_AUTOTUNE_LOG): a CSV file that rank 0 appends
// one line to per sample, and one for the choice that ends each search. The format (documented
// in docs/autotune.md):
//
//   generation,sample,phase,fusion_threshold_bytes,pipeline_chunk_bytes,inplace_min_bytes,
//     cycle_time_ms,hierarchical_allreduce,score_bytes_per_second
//   0,1,warmup,134217728,4194304,262144,1,,2966215127
//   ...
//   0,14,sample,16777216,1048576,65536,0.37,,3411006561
//   0,1,confirm,134217728,4194304,262144,1,,2980113342
//   ...
//   0,6,confirm,8388608,1048576,131072,0.52,,3490012113
//   0,9,best,8388608,1048576,131072,0.52,,3502310003
//
// (one header line, then one line per record without line breaks). `phase` is warmup (a
// discarded sample), sample (a sample of the search), confirm (a sample of the start or the
// candidate, in turn: Note [Confirming the choice] in runtime/autotune/parameter_manager.h) or
// best (the choice: `sample` is the number of the search sample kept, `score` its score).
// hierarchical_allreduce is 0 or 1 where it is tuned, empty otherwise. A job that re-forms
// (elastic) appends its next world's search with the next generation number; whoever is rank 0 then
// writes it.
//
// Thread-safety: thread-compatible (rank 0's loop thread). Each line is one write(2) to a file
// opened with O_APPEND.
#ifndef CHORUS_RUNTIME_AUTOTUNE_AUTOTUNE_LOG_H_
#define CHORUS_RUNTIME_AUTOTUNE_AUTOTUNE_LOG_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "runtime/autotune/parameter_manager.h"

namespace chorus::runtime {

class AutotuneLog {
 public:
  // Opens `path` for appending, emptied first when `truncate`; writes the header line when the
  // file is empty. InvalidArgument naming the path and the reason when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<AutotuneLog>> Open(const std::string& path, bool truncate);
  ~AutotuneLog();
  AutotuneLog(const AutotuneLog&) = delete;
  AutotuneLog& operator=(const AutotuneLog&) = delete;

  // Appends the record's line. An error names the file and the reason.
  absl::Status Append(const AutotuneRecord& record);

  // The header line and a record's line (without the line break).
  static std::string Header();
  static std::string Line(const AutotuneRecord& record);

 private:
  AutotuneLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Write(const std::string& line);

  std::string path_;
  int fd_;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_AUTOTUNE_AUTOTUNE_LOG_H_
