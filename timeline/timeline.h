// File: timeline/timeline.h
//
// The recording side of chorus timelines (docs/timeline.md): the background loop reports what
// happens to each tensor; Timeline turns it into trace events, buffers one cycle's worth and
// hands them to a TraceWriter at the end of the cycle (never waiting for the file).
//
// Control (Start, Stop) may come from any thread: a Start opens the file at once (so that a bad
// path fails the call), and both return once the loop has switched files at the start of its
// next cycle, so ops submitted after Start are recorded and ops submitted after Stop are not.
// After Finish (the loop has ended) they record nothing.
//
// Thread-safety: Start, Stop and recording() are thread-safe; everything else is for the
// background thread only.
#ifndef CHORUS_TIMELINE_TIMELINE_H_
#define CHORUS_TIMELINE_TIMELINE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

#include "base/mutex.h"
#include "chorus/types.h"
#include "timeline/trace_event.h"
#include "timeline/trace_writer.h"

namespace chorus::timeline {

class Timeline {
 public:
  struct Settings {
    int32_t rank = 0;
    int32_t size = 1;
    std::string hostname;
    bool all_ranks = false;        // every rank records (else rank 0 only, or `{rank}` paths)
    int64_t max_bytes = 0;         // per file; 0 = no cap
    size_t queue_events = 262144;  // writer queue bound
    int64_t start_cycle = 0;       // record cycles start_cycle <= c < stop_cycle
    int64_t stop_cycle = 0;        // 0 = no end
  };

  explicit Timeline(Settings settings);
  ~Timeline();  // closes any open file
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // The file this rank writes for `path`: `{rank}` replaced by the rank; with all_ranks and no
  // placeholder, "<stem>.rank<r><ext>"; empty when this rank does not record.
  std::string PathFor(const std::string& path) const;

  // Set once at init by the loop, before any Start takes effect (see docs/timeline.md).
  void SetClockOffset(double offset_us);

  // Records into `path` (PathFor applies) from the next cycle on, replacing any open file. OK
  // and nothing recorded when this rank does not record. Blocks until the loop's next cycle.
  absl::Status Start(const std::string& path, bool mark_cycles);
  // Ends the recording; returns after the file is complete. OK when nothing is recorded.
  void Stop();
  // Start, from the background thread itself (at init): switches at once.
  absl::Status StartOnLoopThread(const std::string& path, bool mark_cycles);

  // --- background thread ---
  // Applies Start/Stop, the cycle window, and marks the cycle.
  void BeginCycle(int64_t cycle, absl::Time now);
  // Hands the cycle's events to the writer.
  void EndCycle();
  // The loop has ended: closes the file; later Start/Stop act without it.
  void Finish();
  bool active() const { return active_; }

  // A rank's request for `name` is known here at `at` (a ready mark; the negotiation starts at
  // the earliest such time).
  void RequestKnown(const std::string& name, int32_t rank, absl::Time at);
  // `name` is ready everywhere at `ready`: writes its NEGOTIATE_<OP> span.
  void Negotiated(const std::string& name, OpType type, absl::Time ready, bool cached);
  // The row of `name` (announced on first use).
  int32_t Row(const std::string& name);
  int64_t NextBatchId() { return next_batch_id_++; }
  void Span(int32_t row, const char* name, absl::Time start, absl::Time end, EventArgs args = {});

  // "ALLREDUCE", "NEGOTIATE_ALLREDUCE", "MPI_ALLREDUCE" (interned).
  static const char* OpLabel(OpType type);
  static const char* NegotiateLabel(OpType type);
  static const char* CollectiveLabel(const std::string& backend, OpType type);

 private:
  struct TensorRow {
    int32_t tid = 0;
    absl::Time first_seen = absl::InfiniteFuture();  // of the negotiation in progress
  };
  TensorRow& RowOf(const std::string& name);
  absl::StatusOr<std::unique_ptr<TraceWriter>> OpenWriter(const std::string& path);
  // Hands `next` (null: stop) to the loop and waits until it is applied.
  void Post(std::unique_ptr<TraceWriter> next, bool mark_cycles);
  int64_t Ns(absl::Time t) const;  // since the file started, clamped at 0
  // Adopts `next` (may be null) as the file, closing the previous one.
  void Switch(std::unique_ptr<TraceWriter> next, bool mark_cycles);

  const Settings settings_;
  std::vector<const char*> rank_labels_;  // "0", "1", ... interned

  Mutex mu_;
  std::condition_variable applied_cv_;
  double clock_offset_us_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<TraceWriter> next_ ABSL_GUARDED_BY(mu_);  // null: a Stop
  bool next_mark_cycles_ ABSL_GUARDED_BY(mu_) = false;
  int64_t requested_ ABSL_GUARDED_BY(mu_) = 0;  // commands issued
  int64_t applied_ ABSL_GUARDED_BY(mu_) = 0;    // commands the loop has applied
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> command_flag_{false};  // requested_ > applied_: cheap check for BeginCycle

  // Background-thread state.
  std::unique_ptr<TraceWriter> writer_;
  bool mark_cycles_ = false;
  bool active_ = false;  // a file is open and this cycle is inside the window
  absl::Time start_;
  int32_t next_tid_ = 1;
  int64_t next_batch_id_ = 0;
  absl::flat_hash_map<std::string, TensorRow> rows_;
  std::vector<Event> events_;
};

}  // namespace chorus::timeline

#endif  // CHORUS_TIMELINE_TIMELINE_H_
