#include "runtime/progress/progress_watchdog.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace chorus::runtime {
namespace {

absl::Duration CheckEvery(const ProgressWatchdog::Options& options) {
  if (options.check_every > absl::ZeroDuration()) return options.check_every;
  return std::clamp(options.bound / 10, absl::Milliseconds(10), absl::Seconds(1));
}

}  // namespace

std::string DescribeNoProgress(const NoProgressReport& report) {
  std::string waited = absl::FormatDuration(report.bound);
  if (report.allowance > absl::ZeroDuration()) {
    absl::StrAppend(&waited, " (+", absl::FormatDuration(report.allowance),
                    " allowed for the work of process sets this rank is not in)");
  }
  std::string peers;
  if (report.peers.empty()) {
    peers = "it cannot tell which ranks it waits on";
  } else if (report.peers.size() == 1) {
    peers = absl::StrCat("it waits on rank ", report.peers[0]);
  } else {
    peers = absl::StrCat("it waits on ranks ", absl::StrJoin(report.peers, ", "),
                         " (the transport does not say which of them has not answered)");
  }
  return absl::StrCat(
      "rank ", report.rank, ": no progress for ", waited, ": ", report.call,
      " has not completed, running ", report.work, "; ", peers,
      ". A peer that stopped answering without closing its connections (its host lost, a link "
      "cut, the process stopped or stuck) looks like this. ",
      report.ends_job ? "Ending the job." : "Stopping chorus on this rank.",
      " If those ranks are only slow, raise CHORUS_NO_PROGRESS_TIMEOUT_SECONDS (0 disables this "
      "check).");
}

std::string DescribeResponseWork(const Response& response, size_t max_names) {
  const size_t n = response.names.size();
  std::vector<std::string> quoted;
  for (size_t i = 0; i < std::min(n, max_names); ++i) {
    quoted.push_back(absl::StrCat("'", response.names[i], "'"));
  }
  std::string names = absl::StrJoin(quoted, ", ");
  if (n > max_names) absl::StrAppend(&names, " and ", n - max_names, " more");
  return absl::StrCat(OpTypeName(response.type), " of tensor", n == 1 ? " " : "s ", names,
                      " (process set ", response.process_set_id, ")");
}

absl::Time NoProgressDeadline(absl::Time start, absl::Duration bound, int64_t foreign_calls) {
  // Duration arithmetic saturates: a huge allowance is an infinite one.
  return start + bound + bound * std::max<int64_t>(foreign_calls, 0);
}

ProgressWatchdog::ProgressWatchdog(Options options) : options_(std::move(options)) {}

ProgressWatchdog::~ProgressWatchdog() { Disarm(); }

void ProgressWatchdog::Arm(std::function<std::string()> describe_work,
                           std::function<void(const std::string& report)> before_terminate,
                           WhileInside while_inside) {
  {
    MutexLock lock(&mu_);
    describe_work_ = std::move(describe_work);
    before_terminate_ = std::move(before_terminate);
    while_inside_ = std::move(while_inside);
    stop_ = false;
  }
  foreign_calls_ = 0;
  armed_.store(true, std::memory_order_release);
  if (!thread_.joinable()) thread_ = std::thread([this] { ThreadMain(); });
}

void ProgressWatchdog::Disarm() {
  armed_.store(false, std::memory_order_release);
  {
    MutexLock lock(&mu_);
    stop_ = true;
    describe_work_ = nullptr;
    before_terminate_ = nullptr;
    while_inside_ = nullptr;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Time ProgressWatchdog::WaitDeadline() const {
  if (!armed_.load(std::memory_order_acquire)) return absl::InfiniteFuture();
  return NoProgressDeadline(absl::Now(), options_.bound, foreign_calls_);
}

void ProgressWatchdog::Progressed() { foreign_calls_ = 0; }

void ProgressWatchdog::AllowForeignCalls(int64_t calls) {
  foreign_calls_ = calls > INT64_MAX - foreign_calls_ ? INT64_MAX : foreign_calls_ + calls;
}

absl::Status ProgressWatchdog::GiveUp(absl::string_view call, absl::Span<const int32_t> peers) {
  MutexLock lock(&mu_);
  const std::string report = DescribeNoProgress(Report(call, peers, foreign_calls_));
  Trip(report);
  return absl::DeadlineExceededError(report);
}

NoProgressReport ProgressWatchdog::Report(absl::string_view call, absl::Span<const int32_t> peers,
                                          int64_t foreign_calls) const {
  NoProgressReport report;
  report.rank = options_.rank;
  report.bound = options_.bound;
  report.allowance = options_.bound * std::max<int64_t>(foreign_calls, 0);
  report.call = std::string(call);
  report.work = describe_work_ ? describe_work_() : "(the loop's work is unknown)";
  report.peers.assign(peers.begin(), peers.end());
  return report;
}

bool ProgressWatchdog::Trip(const std::string& report) {
  if (tripped_) return false;
  tripped_ = true;
  if (before_terminate_) {
    before_terminate_(report);
    // The other ranks blocked in the same call trip within about one check of this one (a second
    // at most, when the bound allows): ending the job at once (MPI_Abort) would kill them before
    // they leave their account too.
    absl::SleepFor(std::max(CheckEvery(options_), std::min(options_.bound, absl::Seconds(1))));
  }
  options_.terminate(report);
  return true;
}

void ProgressWatchdog::BeginBlocking(const char* call, absl::Span<const int32_t> peers,
                                     bool bounded) {
  MutexLock lock(&mu_);
  open_ = true;
  open_call_ = call;
  open_peers_ = peers;
  open_foreign_calls_ = foreign_calls_;
  open_since_ = absl::Now();
  open_deadline_ = bounded ? NoProgressDeadline(absl::Now(), options_.bound, foreign_calls_)
                           : absl::InfiniteFuture();
}

void ProgressWatchdog::EndBlocking(bool progressed) {
  {
    MutexLock lock(&mu_);
    open_ = false;
  }
  if (progressed) Progressed();
}

void ProgressWatchdog::ThreadMain() {
  const absl::Duration every = CheckEvery(options_);
  MutexLock lock(&mu_);
  absl::Time last = absl::Now();
  while (!stop_) {
    if (lock.WaitFor(wake_, every, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; })) {
      break;
    }
    const absl::Time now = absl::Now();
    // Frozen (Note [No-progress bound]): that time does not count.
    const absl::Duration frozen = now - last - every;
    if (frozen > options_.frozen_after && open_) open_deadline_ += frozen;
    if (!tripped_ && open_ && while_inside_) {
      while_inside_(open_call_, now - open_since_);
      last = absl::Now();  // its time (writing a dump) is not a freeze
    } else {
      last = now;
    }
    if (tripped_ || !open_ || now < open_deadline_) continue;
    Trip(DescribeNoProgress(Report(open_call_, open_peers_, open_foreign_calls_)));
  }
}

ProgressWatchdog::BlockingCall::BlockingCall(ProgressWatchdog* watchdog, const char* call,
                                             absl::Span<const int32_t> peers)
    : watchdog_(watchdog != nullptr && watchdog->armed_.load(std::memory_order_acquire) ? watchdog
                                                                                        : nullptr) {
  if (watchdog_ != nullptr) watchdog_->BeginBlocking(call, peers, /*bounded=*/true);
}

ProgressWatchdog::BlockingCall::~BlockingCall() {
  if (watchdog_ != nullptr) watchdog_->EndBlocking(/*progressed=*/true);
}

ProgressWatchdog::WaitingCall::WaitingCall(ProgressWatchdog* watchdog, const char* call)
    : watchdog_(watchdog != nullptr && watchdog->armed_.load(std::memory_order_acquire) ? watchdog
                                                                                        : nullptr) {
  if (watchdog_ != nullptr) watchdog_->BeginBlocking(call, {}, /*bounded=*/false);
}

ProgressWatchdog::WaitingCall::~WaitingCall() {
  // The wait's caller says whether it progressed (a wait past its deadline did not).
  if (watchdog_ != nullptr) watchdog_->EndBlocking(/*progressed=*/false);
}

}  // namespace chorus::runtime
