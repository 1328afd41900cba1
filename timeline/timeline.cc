#include "timeline/timeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace chorus::timeline {
namespace {

constexpr int kOpTypeCount = static_cast<int>(OpType::kRemoveProcessSet) + 1;

// Upper-case label of `type` with a prefix, interned.
const char* Label(const std::string& prefix, OpType type) {
  return InternName(absl::StrCat(prefix, absl::AsciiStrToUpper(OpTypeName(type))));
}

// Labels of every op type with `prefix`, computed once.
const char* CachedLabel(const char* const* labels, const std::string& prefix, OpType type) {
  const int i = static_cast<int>(type);
  return i >= 0 && i < kOpTypeCount ? labels[i] : Label(prefix, type);
}

const char* const* LabelTable(const std::string& prefix) {
  auto* labels = new const char*[kOpTypeCount];
  for (int i = 0; i < kOpTypeCount; ++i) labels[i] = Label(prefix, static_cast<OpType>(i));
  return labels;
}

}  // namespace

const char* Timeline::OpLabel(OpType type) {
  static const char* const* labels = LabelTable("");
  return CachedLabel(labels, "", type);
}

const char* Timeline::NegotiateLabel(OpType type) {
  static const char* const* labels = LabelTable("NEGOTIATE_");
  return CachedLabel(labels, "NEGOTIATE_", type);
}

const char* Timeline::CollectiveLabel(const std::string& backend, OpType type) {
  return Label(absl::StrCat(absl::AsciiStrToUpper(backend), "_"), type);
}

Timeline::Timeline(Settings settings) : settings_(std::move(settings)) {
  for (int32_t r = 0; r < settings_.size; ++r) rank_labels_.push_back(InternName(absl::StrCat(r)));
}

Timeline::~Timeline() { Finish(); }

std::string Timeline::PathFor(const std::string& path) const {
  const std::string rank = absl::StrCat(settings_.rank);
  if (path.find("{rank}") != std::string::npos) {
    return absl::StrReplaceAll(path, {{"{rank}", rank}});
  }
  if (!settings_.all_ranks) return settings_.rank == 0 ? path : std::string();
  // "<stem>.rank<r><ext>", the extension being the last ".xxx" of the file name.
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  if (!has_ext) return absl::StrCat(path, ".rank", rank);
  return absl::StrCat(path.substr(0, dot), ".rank", rank, path.substr(dot));
}

void Timeline::SetClockOffset(double offset_us) {
  MutexLock lock(&mu_);
  clock_offset_us_ = offset_us;
}

absl::StatusOr<std::unique_ptr<TraceWriter>> Timeline::OpenWriter(const std::string& path) {
  TraceWriter::Options options;
  options.path = path;
  options.rank = settings_.rank;
  options.size = settings_.size;
  options.hostname = settings_.hostname;
  options.start = absl::Now();
  options.max_bytes = settings_.max_bytes;
  options.queue_events = settings_.queue_events;
  {
    MutexLock lock(&mu_);
    options.clock_offset_us = clock_offset_us_;
  }
  return TraceWriter::Open(std::move(options));
}

absl::Status Timeline::StartOnLoopThread(const std::string& path, bool mark_cycles) {
  const std::string mine = PathFor(path);
  if (mine.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<TraceWriter>> writer = OpenWriter(mine);
  if (!writer.ok()) return writer.status();
  Switch(*std::move(writer), mark_cycles);
  return absl::OkStatus();
}

absl::Status Timeline::Start(const std::string& path, bool mark_cycles) {
  const std::string mine = PathFor(path);
  if (mine.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<TraceWriter>> writer = OpenWriter(mine);
  if (!writer.ok()) return writer.status();
  Post(*std::move(writer), mark_cycles);
  return absl::OkStatus();
}

void Timeline::Post(std::unique_ptr<TraceWriter> next, bool mark_cycles) {
  std::unique_ptr<TraceWriter> replaced;  // an unapplied command's file: closed unlocked
  MutexLock lock(&mu_);
  if (finished_) {
    replaced = std::move(next);  // the loop is gone: nothing will be recorded
    return;
  }
  replaced = std::move(next_);
  next_ = std::move(next);
  next_mark_cycles_ = mark_cycles;
  const int64_t mine = ++requested_;
  command_flag_.store(true, std::memory_order_release);
  lock.Wait(applied_cv_,
            [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ || applied_ >= mine; });
}

void Timeline::Stop() { Post(nullptr, false); }

void Timeline::BeginCycle(int64_t cycle, absl::Time now) {
  if (command_flag_.load(std::memory_order_acquire)) {
    std::unique_ptr<TraceWriter> next;
    bool mark_cycles = false;
    int64_t requested = 0;
    {
      MutexLock lock(&mu_);
      next = std::move(next_);
      mark_cycles = next_mark_cycles_;
      requested = requested_;
      command_flag_.store(false, std::memory_order_relaxed);
    }
    Switch(std::move(next), mark_cycles);
    {
      MutexLock lock(&mu_);
      applied_ = requested;
    }
    applied_cv_.notify_all();
  }
  if (writer_ != nullptr && settings_.stop_cycle > 0 && cycle >= settings_.stop_cycle) {
    Switch(nullptr, false);  // the window is over: complete the file
  }
  active_ = writer_ != nullptr && cycle >= settings_.start_cycle;
  if (active_ && mark_cycles_) {
    Event e;
    e.kind = Event::Kind::kProcessMark;
    e.name = "CYCLE_START";
    e.ts_ns = Ns(now);
    e.args = CycleArgs{cycle};
    events_.push_back(std::move(e));
  }
}

void Timeline::EndCycle() {
  if (writer_ != nullptr && !events_.empty()) writer_->Submit(&events_);
  events_.clear();
}

void Timeline::Finish() {
  {
    MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
  }
  applied_cv_.notify_all();
  EndCycle();
  Switch(nullptr, false);
  std::unique_ptr<TraceWriter> pending;
  {
    MutexLock lock(&mu_);
    pending = std::move(next_);
  }
}

void Timeline::Switch(std::unique_ptr<TraceWriter> next, bool mark_cycles) {
  events_.clear();
  if (writer_ != nullptr) writer_->Close();
  writer_ = std::move(next);
  mark_cycles_ = mark_cycles;
  active_ = false;
  rows_.clear();
  next_tid_ = 1;
  next_batch_id_ = 0;
  if (writer_ != nullptr) start_ = writer_->options().start;
}

int64_t Timeline::Ns(absl::Time t) const {
  return std::max<int64_t>(0, absl::ToInt64Nanoseconds(t - start_));
}

Timeline::TensorRow& Timeline::RowOf(const std::string& name) {
  auto [it, inserted] = rows_.try_emplace(name);
  if (inserted) {
    it->second.tid = next_tid_++;
    Event e;
    e.kind = Event::Kind::kThreadName;
    e.tid = it->second.tid;
    e.args = ThreadNameArgs{name};
    events_.push_back(std::move(e));
  }
  return it->second;
}

int32_t Timeline::Row(const std::string& name) { return RowOf(name).tid; }

void Timeline::RequestKnown(const std::string& name, int32_t rank, absl::Time at) {
  TensorRow& row = RowOf(name);
  row.first_seen = std::min(row.first_seen, at);
  Event e;
  e.kind = Event::Kind::kTensorMark;
  e.name = rank >= 0 && rank < settings_.size ? rank_labels_[rank] : InternName(absl::StrCat(rank));
  e.tid = row.tid;
  e.ts_ns = Ns(at);
  e.args = RankArgs{rank};
  events_.push_back(std::move(e));
}

void Timeline::Negotiated(const std::string& name, OpType type, absl::Time ready, bool cached) {
  TensorRow& row = RowOf(name);
  const absl::Time start = std::min(row.first_seen, ready);
  row.first_seen = absl::InfiniteFuture();
  Span(row.tid, NegotiateLabel(type), start, ready, NegotiateArgs{cached});
}

void Timeline::Span(int32_t row, const char* name, absl::Time start, absl::Time end,
                    EventArgs args) {
  Event e;
  e.kind = Event::Kind::kSpan;
  e.name = name;
  e.tid = row;
  e.ts_ns = Ns(start);
  e.dur_ns = std::max<int64_t>(0, Ns(end) - e.ts_ns);
  e.args = std::move(args);
  events_.push_back(std::move(e));
}

}  // namespace chorus::timeline
