#include "timeline/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

#include "timeline/json_format.h"

namespace chorus::timeline {
namespace {

// Room kept below the size cap for the TRACE_TRUNCATED mark and the trailer.
constexpr int64_t kTrailerReserve = 512;

}  // namespace

const char* InternName(const std::string& name) {
  static Mutex* mu = new Mutex();
  static auto* names = new std::set<std::string>();
  MutexLock lock(mu);
  return names->insert(name).first->c_str();
}

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(Options options) {
  options.queue_events = std::max<size_t>(options.queue_events, 1);
  const int fd = ::open(options.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create timeline file '", options.path, "': ", std::strerror(errno)));
  }
  std::unique_ptr<TraceWriter> writer(new TraceWriter(std::move(options), fd));
  writer->Append(FormatHeader(writer->options_));
  writer->thread_ = std::thread([w = writer.get()] { w->ThreadMain(); });
  return writer;
}

TraceWriter::TraceWriter(Options options, int fd) : options_(std::move(options)), fd_(fd) {}

TraceWriter::~TraceWriter() { Close(); }

void TraceWriter::Submit(std::vector<Event>* events) {
  if (events->empty()) return;
  {
    MutexLock lock(&mu_);
    if (!closing_) {
      const size_t room = options_.queue_events - std::min(options_.queue_events, queue_.size());
      const size_t take = std::min(room, events->size());
      if (queue_.empty() && take == events->size()) {
        queue_.swap(*events);  // the common case: no copy
      } else {
        queue_.insert(queue_.end(), std::make_move_iterator(events->begin()),
                      std::make_move_iterator(events->begin() + static_cast<ptrdiff_t>(take)));
        dropped_ += static_cast<int64_t>(events->size() - take);
      }
    }
  }
  events->clear();
  wake_.notify_one();
}

void TraceWriter::Close() {
  {
    MutexLock lock(&mu_);
    if (closing_) {
      lock.Wait(wake_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_; });
      return;
    }
    closing_ = true;
  }
  wake_.notify_all();
  thread_.join();
  MutexLock lock(&mu_);
  Append(FormatTrailer(options_.rank, written_events_, dropped_, truncated_));
  ::close(fd_);
  closed_ = true;
  wake_.notify_all();
}

int64_t TraceWriter::dropped_events() const {
  MutexLock lock(&mu_);
  return dropped_;
}

int64_t TraceWriter::written_events() const {
  MutexLock lock(&mu_);
  return written_events_;
}

void TraceWriter::ThreadMain() {
  std::vector<Event> batch;
  for (;;) {
    int64_t dropped = 0;
    bool closing = false;
    {
      MutexLock lock(&mu_);
      lock.Wait(wake_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closing_ || !queue_.empty() || dropped_ != dropped_reported_;
      });
      batch.swap(queue_);
      dropped = dropped_;
      closing = closing_;
    }
    if (!batch.empty() || dropped != dropped_reported_) {
      Append(Format(batch, dropped));
      MutexLock lock(&mu_);
      written_events_ = file_events_;
    }
    batch.clear();
    if (closing) {
      MutexLock lock(&mu_);
      if (queue_.empty()) return;
    }
  }
}

std::string TraceWriter::Format(const std::vector<Event>& events, int64_t dropped_total) {
  std::string out;
  if (truncated_) return out;
  const int64_t limit = options_.max_bytes > 0 ? options_.max_bytes - kTrailerReserve : -1;
  const int64_t now_ns = absl::ToInt64Nanoseconds(absl::Now() - options_.start);
  auto add = [&](const std::string& line) {
    if (limit >= 0 && file_bytes_ + static_cast<int64_t>(out.size() + line.size()) > limit) {
      out += FormatTruncatedMark(options_.rank, now_ns, options_.max_bytes);
      truncated_ = true;
      return false;
    }
    out += line;
    ++file_events_;
    return true;
  };
  std::string line;
  for (const Event& event : events) {
    line.clear();
    AppendEventLine(options_.rank, event, &line);
    if (!add(line)) return out;
  }
  if (dropped_total != dropped_reported_) {
    dropped_reported_ = dropped_total;
    if (!add(FormatDroppedMark(options_.rank, now_ns, dropped_total))) return out;
  }
  return out;
}

void TraceWriter::Append(const std::string& text) {
  if (io_failed_ || text.empty()) return;
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      io_failed_ = true;  // disk full or similar: the trace ends here
      return;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  file_bytes_ += static_cast<int64_t>(text.size());
}

}  // namespace chorus::timeline
