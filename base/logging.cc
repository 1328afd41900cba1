#include "base/logging.h"

#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace chorus::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kWarning)};
std::atomic<int> g_rank{-1};
std::atomic<int> g_local_rank{-1};
std::atomic<bool> g_show_time{false};

const char* LevelName(Level level) {
  switch (level) {
    case Level::kTrace:
      return "TRACE";
    case Level::kDebug:
      return "DEBUG";
    case Level::kInfo:
      return "INFO";
    case Level::kWarning:
      return "WARNING";
    case Level::kError:
      return "ERROR";
    case Level::kFatal:
      return "FATAL";
  }
  return "?";
}

}  // namespace

void SetLevel(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
Level GetLevel() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }
void SetRankTag(int rank, int local_rank) {
  g_rank.store(rank, std::memory_order_relaxed);
  g_local_rank.store(local_rank, std::memory_order_relaxed);
}
void SetShowTime(bool show) { g_show_time.store(show, std::memory_order_relaxed); }
bool Enabled(Level level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

LogMessage::LogMessage(Level level, const char* file, int line)
    : level_(level), file_(file), line_(line) {}

LogMessage::~LogMessage() {
  const int rank = g_rank.load(std::memory_order_relaxed);
  std::string tag =
      rank >= 0 ? absl::StrCat(rank, "/", g_local_rank.load(std::memory_order_relaxed), " ") : "";
  std::string where;
  if (level_ >= Level::kWarning) {
    const char* base = std::strrchr(file_, '/');
    where = absl::StrCat(" ", base != nullptr ? base + 1 : file_, ":", line_);
  }
  const std::string time =
      g_show_time.load(std::memory_order_relaxed)
          ? absl::FormatTime("%Y-%m-%d %H:%M:%E3S ", absl::Now(), absl::LocalTimeZone())
          : "";
  const std::string out =
      absl::StrCat(time, "[chorus ", tag, LevelName(level_), where, "] ", stream_.str(), "\n");
  // One write() per line so that lines of concurrent threads do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, out.data(), out.size());
  (void)ignored;
}

}  // namespace chorus::log
