// File: base/logging.h
//
// Minimal leveled logging to stderr. Every line carries "[chorus rank/local_rank LEVEL]"
// (after the local time when SetShowTime(true)); WARNING and above add file:line. The level comes
// from Config (CHORUS_LOG_LEVEL) through SetLogLevel; a disabled level costs one branch.
//
//   CHORUS_LOG(INFO) << "fusion threshold " << bytes;
//
// Thread-safety: thread-safe; each line is written with a single write().
#ifndef CHORUS_BASE_LOGGING_H_
#define CHORUS_BASE_LOGGING_H_

#include <atomic>
#include <sstream>

namespace chorus::log {

enum class Level : int { kTrace = 0, kDebug = 1, kInfo = 2, kWarning = 3, kError = 4, kFatal = 5 };

void SetLevel(Level level);
Level GetLevel();
// Sets the "rank/local_rank" tag of every later line of this process.
void SetRankTag(int rank, int local_rank);
// Whether later lines start with the local time ("2026-12-04 14:30:01.123 [chorus ...]");
// Config's log_hide_time (CHORUS_LOG_HIDE_TIME). Default: no time.
void SetShowTime(bool show);
bool Enabled(Level level);

// Builds one line and writes it on destruction.
class LogMessage {
 public:
  LogMessage(Level level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  Level level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

}  // namespace chorus::log

#define CHORUS_LOG_LEVEL_TRACE ::chorus::log::Level::kTrace
#define CHORUS_LOG_LEVEL_DEBUG ::chorus::log::Level::kDebug
#define CHORUS_LOG_LEVEL_INFO ::chorus::log::Level::kInfo
#define CHORUS_LOG_LEVEL_WARNING ::chorus::log::Level::kWarning
#define CHORUS_LOG_LEVEL_ERROR ::chorus::log::Level::kError

#define CHORUS_LOG(severity)                                  \
  if (!::chorus::log::Enabled(CHORUS_LOG_LEVEL_##severity)) { \
  } else                                                      \
    ::chorus::log::LogMessage(CHORUS_LOG_LEVEL_##severity, __FILE__, __LINE__).stream()

#endif  // CHORUS_BASE_LOGGING_H_
