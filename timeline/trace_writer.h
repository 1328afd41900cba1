// File: timeline/trace_writer.h
//
// Owns one timeline file and the thread that writes it. The background loop hands it whole
// batches of events (Submit never blocks on I/O); the writer thread formats them as Trace Event
// Format JSON lines and appends each batch with one write(2), so a crash leaves only whole
// events behind (the file then lacks its closing "]", which trace viewers accept).
//
// Bounds: at most `queue_events` events wait for the thread; beyond that Submit drops events and
// counts them (a DROPPED_EVENTS mark with the running count follows in the file). With
// `max_bytes` > 0 the file never grows past it: the event that would cross the cap is replaced
// by a TRACE_TRUNCATED mark and nothing else is written but the closing trailer.
//
// Thread-safety: thread-safe. Submit may be called from any thread (the runtime calls it from
// its background thread); Close from any thread, once or more.
#ifndef CHORUS_TIMELINE_TRACE_WRITER_H_
#define CHORUS_TIMELINE_TRACE_WRITER_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "base/mutex.h"
#include "timeline/trace_event.h"

namespace chorus::timeline {

class TraceWriter {
 public:
  struct Options {
    std::string path;
    int32_t rank = 0;
    int32_t size = 1;
    std::string hostname;
    absl::Time start;              // ts 0 of the file
    double clock_offset_us = 0;    // this rank's wall clock minus rank 0's
    int64_t max_bytes = 0;         // 0: no cap
    size_t queue_events = 262144;  // >= 1
  };

  // Creates (truncates) the file, writes the header and starts the writer thread. Fails with
  // the path and the OS error when the file cannot be created.
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Open(Options options);
  // Closes (see Close).
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  const Options& options() const { return options_; }

  // Takes the events of *events (left empty) that fit into the queue; drops and counts the rest.
  void Submit(std::vector<Event>* events);

  // Writes everything submitted so far, then the trailer and the closing "]", closes the file
  // and joins the thread. Later Submits are dropped silently. Idempotent.
  void Close();

  // Totals so far (for tests and logs).
  int64_t dropped_events() const;
  int64_t written_events() const;

 private:
  TraceWriter(Options options, int fd);
  void ThreadMain();
  // Formats `events` after the events already written and returns the bytes to append.
  std::string Format(const std::vector<Event>& events, int64_t dropped_total);
  // Appends `text`; logs (once) and stops writing on an I/O error.
  void Append(const std::string& text);

  const Options options_;
  const int fd_;
  std::thread thread_;

  mutable Mutex mu_;
  std::condition_variable wake_;
  std::vector<Event> queue_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t written_events_ ABSL_GUARDED_BY(mu_) = 0;

  // Writer-thread state (Close reads it after joining the thread).
  int64_t file_bytes_ = 0;
  int64_t file_events_ = 0;  // events written, marks included
  int64_t dropped_reported_ = 0;
  bool truncated_ = false;
  bool io_failed_ = false;
};

}  // namespace chorus::timeline

#endif  // CHORUS_TIMELINE_TRACE_WRITER_H_
