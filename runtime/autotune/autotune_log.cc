#include "runtime/autotune/autotune_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace chorus::runtime {

absl::StatusOr<std::unique_ptr<AutotuneLog>> AutotuneLog::Open(const std::string& path,
                                                               bool truncate) {
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open the autotune log '", path, "': ", std::strerror(errno)));
  }
  std::unique_ptr<AutotuneLog> log(new AutotuneLog(path, fd));
  struct stat st = {};
  if (::fstat(fd, &st) == 0 && st.st_size == 0) {
    if (absl::Status written = log->Write(Header()); !written.ok()) return written;
  }
  return log;
}

AutotuneLog::~AutotuneLog() { ::close(fd_); }

std::string AutotuneLog::Header() {
  return "generation,sample,phase,fusion_threshold_bytes,pipeline_chunk_bytes,inplace_min_bytes,"
         "cycle_time_ms,hierarchical_allreduce,score_bytes_per_second";
}

std::string AutotuneLog::Line(const AutotuneRecord& r) {
  const TunedParameters& p = r.parameters;
  return absl::StrCat(
      r.generation, ",", r.sample, ",", PhaseName(r.phase), ",", p.fusion_threshold_bytes, ",",
      p.pipeline_chunk_bytes, ",", p.inplace_min_bytes, ",",
      absl::ToDoubleMilliseconds(p.cycle_time), ",",
      p.hierarchical_allreduce.has_value() ? (*p.hierarchical_allreduce ? "1" : "0") : "", ",",
      static_cast<int64_t>(std::llround(r.score)));
}

absl::Status AutotuneLog::Append(const AutotuneRecord& record) { return Write(Line(record)); }

absl::Status AutotuneLog::Write(const std::string& line) {
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd_, text.data(), text.size());
  if (n == static_cast<ssize_t>(text.size())) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("cannot write the autotune log '", path_,
                                             "': ", n < 0 ? std::strerror(errno) : "short write"));
}

}  // namespace chorus::runtime
