#include "launcher/worker_group.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

#include "base/status_macros.h"

namespace chorus::launcher {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr int kChunksPerWakeup = 16;  // per pipe, so that one chatty worker cannot starve others
// poll() wakes at least this often even without events (a safety net; SIGCHLD wakes it).
constexpr absl::Duration kMaxPollWait = absl::Seconds(1);

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// The keeper: leads the process group, holds nothing, waits for SIGKILL.
[[noreturn]] void RunKeeper(pid_t parent) {
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(0);
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  }
  for (;;) ::pause();
}

}  // namespace

WorkerGroup::WorkerGroup(WorkerGroupOptions options, OutputSink* sink)
    : options_(std::move(options)), sink_(sink) {}

WorkerGroup::~WorkerGroup() {
  if (RunningCount() > 0 || keeper_ > 0) KillAll();
  for (Worker& w : workers_) {
    if (!w.running) continue;
    while (::waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    w.running = false;
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    CloseOutput(static_cast<int>(i), 0);
    CloseOutput(static_cast<int>(i), 1);
  }
  CloseStdins();
  signals_.Restore();
}

int WorkerGroup::RunningCount() const {
  return static_cast<int>(
      std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; }));
}

absl::Status WorkerGroup::Start(const std::vector<WorkerSpec>& specs) {
  EnsureStandardFds();
  CHORUS_RETURN_IF_ERROR(signals_.Install());

  const pid_t parent = ::getpid();
  sigset_t all, old_mask;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  keeper_ = ::fork();
  const int fork_errno = errno;
  if (keeper_ == 0) RunKeeper(parent);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (keeper_ < 0) {
    keeper_ = -1;
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(fork_errno)));
  }
  ::setpgid(keeper_, keeper_);  // also done by the keeper: whichever runs first

  const int dev_null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (dev_null < 0) {
    KillAll();
    return absl::InternalError(absl::StrCat("/dev/null: ", std::strerror(errno)));
  }
  workers_.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    if (absl::Status s = StartOne(static_cast<int>(i), specs[i], dev_null); !s.ok()) {
      ::close(dev_null);
      KillAll();
      return s;
    }
  }
  ::close(dev_null);
  return absl::OkStatus();
}

absl::Status WorkerGroup::StartOne(int index, const WorkerSpec& spec, int dev_null) {
  CHORUS_ASSIGN_OR_RETURN(SpawnedProcess p,
                          SpawnProcess(spec, keeper_, dev_null, signals_.inherited_actions()));
  Worker& w = workers_[static_cast<size_t>(index)];
  w.pid = p.pid;
  w.running = true;
  w.fds[0] = p.stdout_fd;
  w.fds[1] = p.stderr_fd;
  w.stdin_fd = p.stdin_fd;
  return absl::OkStatus();
}

void WorkerGroup::Reap(GroupResult* result) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    if (!w.running) continue;
    int status = 0;
    const pid_t done = ::waitpid(w.pid, &status, WNOHANG);
    if (done == 0 || (done < 0 && errno == EINTR)) continue;
    // done < 0 otherwise (ECHILD): someone else reaped it; count it as failed.
    const WorkerExit exit = done == w.pid ? FromWaitStatus(status) : WorkerExit{false, 1};
    w.running = false;
    if (result->exits.size() < workers_.size()) result->exits.resize(workers_.size());
    result->exits[i] = exit;
    if (!exit.ok() && !stopping_ && !result->first_failure) {
      result->first_failure = static_cast<int>(i);
      BeginStop(SIGTERM);
    }
  }
}

void WorkerGroup::CloseOutput(int index, int stream) {
  int& fd = workers_[static_cast<size_t>(index)].fds[stream];
  if (fd < 0) return;
  CloseFd(&fd);
  sink_->Close(index, stream == 0 ? OutputStream::kStdout : OutputStream::kStderr);
}

void WorkerGroup::ReadReady(const std::vector<struct pollfd>& polled,
                            const std::vector<int>& owners, bool* any_data) {
  char chunk[kReadChunk];
  for (size_t p = 1; p < polled.size(); ++p) {
    if ((polled[p].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const int index = owners[p] / 2;
    const int stream = owners[p] % 2;
    const int fd = workers_[static_cast<size_t>(index)].fds[stream];
    for (int k = 0; k < kChunksPerWakeup; ++k) {
      const ssize_t n = ::read(fd, chunk, sizeof(chunk));
      if (n > 0) {
        *any_data = true;
        sink_->Write(index, stream == 0 ? OutputStream::kStdout : OutputStream::kStderr,
                     absl::string_view(chunk, static_cast<size_t>(n)));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      CloseOutput(index, stream);  // EOF or a read error
      break;
    }
  }
}

void WorkerGroup::HandleSignals(GroupResult* result) {
  for (const int sig : signals_.Drain()) {
    if (sig != SIGINT && sig != SIGTERM) continue;  // SIGCHLD: Reap() runs next
    if (!result->stop_signal) result->stop_signal = sig;
    if (stopping_) {
      KillAll();
    } else {
      BeginStop(sig);
    }
  }
}

void WorkerGroup::BeginStop(int sig) {
  stopping_ = true;
  kill_at_ = absl::Now() + options_.grace;
  if (keeper_ > 0) ::killpg(keeper_, sig);  // the keeper blocks it
  for (const Worker& w : workers_) {
    if (w.running) ::kill(w.pid, sig);  // in case one left the group
  }
  CloseStdins();
}

void WorkerGroup::KillAll() {
  stopping_ = true;
  kill_at_.reset();
  for (const Worker& w : workers_) {
    if (w.running) ::kill(w.pid, SIGKILL);
  }
  KillKeeper();
  CloseStdins();
}

void WorkerGroup::KillKeeper() {
  if (keeper_ <= 0) return;
  ::killpg(keeper_, SIGKILL);  // the keeper and everything left in the group
  while (::waitpid(keeper_, nullptr, 0) < 0 && errno == EINTR) {
  }
  keeper_ = -1;
}

void WorkerGroup::CloseStdins() {
  for (Worker& w : workers_) CloseFd(&w.stdin_fd);
}

GroupResult WorkerGroup::Wait() {
  GroupResult result;
  result.exits.resize(workers_.size());
  std::optional<absl::Time> drain_until;
  while (true) {
    Reap(&result);
    const absl::Time now = absl::Now();
    if (RunningCount() == 0) {
      if (keeper_ > 0) KillKeeper();  // leftovers of finished workers
      if (!drain_until) drain_until = now + kDrainAfterExit;
    }
    std::vector<struct pollfd> polled = {{signals_.read_fd(), POLLIN, 0}};
    std::vector<int> owners = {-1};
    for (size_t i = 0; i < workers_.size(); ++i) {
      for (int s = 0; s < 2; ++s) {
        if (workers_[i].fds[s] < 0) continue;
        polled.push_back({workers_[i].fds[s], POLLIN, 0});
        owners.push_back(static_cast<int>(i) * 2 + s);
      }
    }
    if (drain_until && (polled.size() == 1 || now >= *drain_until)) break;

    absl::Time wake = now + kMaxPollWait;
    if (kill_at_) wake = std::min(wake, *kill_at_);
    if (options_.deadline && !stopping_) wake = std::min(wake, *options_.deadline);
    if (drain_until) wake = std::min(wake, *drain_until);
    const int timeout_ms = PollTimeoutMs(wake - now);
    const int ready = ::poll(polled.data(), polled.size(), timeout_ms);
    if (ready > 0) {
      if (polled[0].revents & POLLIN) HandleSignals(&result);
      bool any_data = false;
      ReadReady(polled, owners, &any_data);
      if (any_data && drain_until) drain_until = absl::Now() + kDrainAfterExit;
    }
    const absl::Time after = absl::Now();
    if (kill_at_ && after >= *kill_at_) KillAll();
    if (options_.deadline && !stopping_ && after >= *options_.deadline && RunningCount() > 0) {
      result.timed_out = true;
      BeginStop(SIGTERM);
    }
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    CloseOutput(static_cast<int>(i), 0);
    CloseOutput(static_cast<int>(i), 1);
  }
  CloseStdins();
  signals_.Restore();
  return result;
}

}  // namespace chorus::launcher
