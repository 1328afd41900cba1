// File: runtime/loop/background_loop_flight.cc
//
// The background loop's flight recorder dump (Note [Flight recorder] in
// runtime/flight/flight_recorder.h): what this rank ran, what it holds that is not negotiated
// yet, and on rank 0 what the coordinator waits for, in one file per rank; and what asks for it
// (the watchdog, a SIGUSR2: Note [Flight dump on demand]).
#include <unistd.h>

#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "base/logging.h"
#include "runtime/flight/flight_recorder.h"
#include "runtime/loop/background_loop.h"
#include "runtime/progress/progress_watchdog.h"

namespace chorus::runtime {
namespace {

FlightPendingOp PendingOf(const TensorEntry& entry) {
  FlightPendingOp op;
  op.name = entry.request.name;
  op.type = entry.request.type;
  op.dtype = entry.request.dtype;
  op.shape = entry.request.shape;
  op.process_set_id = entry.request.process_set_id;
  op.device = entry.request.device;
  op.submitted = entry.enqueued_at;
  return op;
}

}  // namespace

void BackgroundLoop::DumpFlight(const std::string& reason, bool loud) const {
  if (!flight_.enabled()) return;
  const absl::Time now = absl::Now();
  FlightDump dump;
  dump.reason = reason;
  dump.job = flight_job_;
  dump.rank = topology_.rank;
  dump.size = topology_.size;
  if (static_cast<size_t>(topology_.rank) < host_names_.size()) {
    dump.host = host_names_[static_cast<size_t>(topology_.rank)];
  }
  dump.pid = ::getpid();
  dump.written = now;
  dump.cycles = counters_.cycles.load(std::memory_order_relaxed);
  dump.batches = batches_;
  for (const auto& [id, set] : process_sets_) dump.process_sets.emplace_back(id, set.ranks);
  dump.host_names = host_names_;
  dump.records = flight_.Records();
  ForEachHeldEntry([&](const TensorEntry& entry) { dump.pending.push_back(PendingOf(entry)); });
  if (coordinator_ != nullptr) {
    dump.has_coordinator = true;
    dump.coordinator = coordinator_->WaitingOps(now);
  }
  const std::string& dir = flight_dir_;
  const absl::Status written = WriteFlightDump(dir, dump);
  if (!written.ok()) {
    CHORUS_LOG(WARNING) << "flight recorder: no dump: " << written;
    return;
  }
  const std::string line =
      absl::StrCat("flight recorder: rank ", topology_.rank, "'s last ", dump.records.size(),
                   " collectives are in ", FlightDumpPath(dir, topology_.rank),
                   "; where the ranks part: chorus-timeline flight ", dir);
  if (loud) {
    CHORUS_LOG(WARNING) << line;
  } else {
    CHORUS_LOG(INFO) << line;
  }
}

void BackgroundLoop::StartWatching() {
  watchdog_ = controller_->progress_watchdog();
  if (watchdog_ == nullptr) return;
  std::function<void(const std::string&)> dump;
  ProgressWatchdog::WhileInside while_inside;
  if (flight_.enabled()) {
    dump = [this](const std::string& report) { DumpFlight(report, true); };
    // Note [Flight dump on demand]: a request the loop has not answered from a cycle while it has
    // been inside one call for a while; the loop still answers it (every rank) if the call ends.
    while_inside = [this](absl::string_view call, absl::Duration open_for) {
      const uint64_t requests = FlightDumpRequests();
      if (open_for < kStuckForDump || requests == watchdog_answered_ ||
          requests == dump_requests_seen_.load(std::memory_order_relaxed)) {
        return;
      }
      watchdog_answered_ = requests;
      DumpFlight(absl::StrCat("asked for (SIGUSR2) while this rank was inside ", call, " for ",
                              absl::FormatDuration(absl::Trunc(open_for, absl::Milliseconds(1))),
                              ", which had not completed"),
                 /*loud=*/true);
    };
  }
  watchdog_->Arm([this] { return DescribeWork(); }, std::move(dump), std::move(while_inside));
}

bool BackgroundLoop::TakeDumpRequest() {
  if (!flight_.enabled()) return false;
  const uint64_t requests = FlightDumpRequests();
  if (dump_requests_seen_.load(std::memory_order_relaxed) == requests) return false;
  dump_requests_seen_.store(requests, std::memory_order_relaxed);  // only this thread writes it
  return true;
}

}  // namespace chorus::runtime
