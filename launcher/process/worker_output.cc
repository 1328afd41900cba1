#include "launcher/process/worker_output.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chorus::launcher {
namespace {

absl::Status MakeDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0777) == 0 || errno == EEXIST) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("--output-filename: '", path, "' exists and is not a directory"));
  }
  return absl::InternalError(
      absl::StrCat("--output-filename: cannot create '", path, "': ", std::strerror(errno)));
}

// mkdir -p.
absl::Status MakeDirectories(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    if (absl::Status s = MakeDirectory(path.substr(0, slash)); !s.ok()) return s;
  }
  return MakeDirectory(path);
}

}  // namespace

std::vector<std::string> RankLabels(const std::vector<int>& ranks, absl::string_view prefix) {
  std::vector<std::string> labels;
  for (int rank : ranks) labels.push_back(absl::StrCat(prefix, rank));
  return labels;
}

std::string FormatTaggedLine(absl::string_view label, OutputStream stream, absl::string_view line,
                             std::optional<absl::Time> time, absl::TimeZone zone) {
  const char* tag = stream == OutputStream::kStdout ? "]<stdout>:" : "]<stderr>:";
  return absl::StrCat(time ? absl::FormatTime("%a %b %e %H:%M:%S %Y", *time, zone) : "", "[", label,
                      tag, line);
}

std::string FormatTaggedLine(int rank, OutputStream stream, absl::string_view line,
                             std::optional<absl::Time> time, absl::TimeZone zone) {
  return FormatTaggedLine(absl::StrCat(rank), stream, line, time, zone);
}

TerminalSink::TerminalSink(std::vector<int> ranks, bool timestamp, FILE* out, FILE* err)
    : TerminalSink(RankLabels(ranks, ""), timestamp, out, err) {}

TerminalSink::TerminalSink(std::vector<std::string> labels, bool timestamp, FILE* out, FILE* err)
    : labels_(std::move(labels)),
      timestamp_(timestamp),
      out_(out),
      err_(err),
      zone_(absl::LocalTimeZone()) {}

void TerminalSink::Write(int index, OutputStream stream, absl::string_view bytes) {
  lines_[{index, stream}].Append(bytes,
                                 [&](absl::string_view line) { Print(index, stream, line); });
}

void TerminalSink::Close(int index, OutputStream stream) {
  auto it = lines_.find({index, stream});
  if (it == lines_.end()) return;
  it->second.Finish([&](absl::string_view line) { Print(index, stream, line); });
  lines_.erase(it);
}

void TerminalSink::Print(int index, OutputStream stream, absl::string_view line) {
  const std::string text =
      FormatTaggedLine(labels_[static_cast<size_t>(index)], stream, line,
                       timestamp_ ? std::optional<absl::Time>(absl::Now()) : std::nullopt, zone_);
  FILE* f = stream == OutputStream::kStdout ? out_ : err_;
  // A closed terminal or pipe must not stop the job: write errors are ignored.
  std::fwrite(text.data(), 1, text.size(), f);
  std::fputc('\n', f);
  std::fflush(f);
}

struct FileSink::RankFiles {
  RankFiles() = default;
  RankFiles(const RankFiles&) = delete;
  RankFiles& operator=(const RankFiles&) = delete;
  ~RankFiles() {
    for (auto& [dir, files] : by_dir) {
      std::fclose(files.first);
      std::fclose(files.second);
    }
  }

  std::string dir;
  std::map<std::string, std::pair<FILE*, FILE*>> by_dir;  // (stdout, stderr); owned
};

absl::StatusOr<std::unique_ptr<FileSink>> FileSink::Create(const std::string& dir,
                                                           const std::vector<int>& ranks) {
  if (absl::Status s = MakeDirectories(dir); !s.ok()) return s;
  auto files = std::make_shared<RankFiles>();
  files->dir = dir;
  return Make(std::move(files), RankLabels(ranks, "rank."));
}

absl::StatusOr<std::unique_ptr<FileSink>> FileSink::ForRanks(const std::vector<int>& ranks) const {
  return Make(files_, RankLabels(ranks, "rank."));
}

absl::StatusOr<std::unique_ptr<FileSink>> FileSink::ForWorker(const std::string& id) const {
  return Make(files_, {absl::StrCat("worker.", id)});
}

absl::StatusOr<std::unique_ptr<FileSink>> FileSink::Make(std::shared_ptr<RankFiles> files,
                                                         const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    if (files->by_dir.contains(dir)) continue;
    const std::string rank_dir = absl::StrCat(files->dir, "/", dir);
    if (absl::Status s = MakeDirectory(rank_dir); !s.ok()) return s;
    std::pair<FILE*, FILE*> opened = {nullptr, nullptr};
    for (const char* name : {"stdout", "stderr"}) {
      const std::string path = absl::StrCat(rank_dir, "/", name);
      FILE* f = std::fopen(path.c_str(), "we");
      if (f == nullptr) {
        const std::string why = std::strerror(errno);
        if (opened.first != nullptr) std::fclose(opened.first);
        return absl::InternalError(
            absl::StrCat("--output-filename: cannot write '", path, "': ", why));
      }
      (opened.first == nullptr ? opened.first : opened.second) = f;
    }
    files->by_dir.emplace(dir, opened);
  }
  std::unique_ptr<FileSink> sink(new FileSink());
  sink->files_ = std::move(files);
  sink->dirs_ = dirs;
  return sink;
}

FILE* FileSink::File(int index, OutputStream stream) const {
  const auto& files = files_->by_dir.at(dirs_[static_cast<size_t>(index)]);
  return stream == OutputStream::kStdout ? files.first : files.second;
}

void FileSink::Write(int index, OutputStream stream, absl::string_view bytes) {
  FILE* f = File(index, stream);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fflush(f);
}

void FileSink::Close(int index, OutputStream stream) { std::fflush(File(index, stream)); }

}  // namespace chorus::launcher
