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

namespace chorus::launcher {
namespace {

constexpr int kHandledSignals[4] = {SIGINT, SIGTERM, SIGCHLD, SIGPIPE};
constexpr size_t kReadChunk = 64 * 1024;
constexpr int kChunksPerWakeup = 16;  // per pipe, so that one chatty worker cannot starve others
// poll() wakes at least this often even without events (a safety net; SIGCHLD wakes it).
constexpr absl::Duration kMaxPollWait = absl::Seconds(1);

// The write end of the running group's self-pipe; -1 when none runs.
volatile sig_atomic_t g_signal_fd = -1;

void OnSignal(int sig) {
  const int saved = errno;
  const int fd = g_signal_fd;
  if (fd >= 0) {
    const char byte = static_cast<char>(sig);
    [[maybe_unused]] ssize_t ignored = ::write(fd, &byte, 1);
  }
  errno = saved;
}

// fds 0-2 open, so that pipes and /dev/null never take those numbers.
void EnsureStandardFds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) ::open("/dev/null", O_RDWR);
  }
}

WorkerExit FromWaitStatus(int status) {
  WorkerExit e;
  if (WIFSIGNALED(status)) {
    e.signaled = true;
    e.code = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    e.code = WEXITSTATUS(status);
  } else {
    e.code = 1;
  }
  return e;
}

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// The child side of fork(): async-signal-safe calls only.
[[noreturn]] void ExecChild(pid_t group, pid_t parent, int stdin_fd, int out_fd, int err_fd,
                            const char* program, char* const argv[], char* const envp[],
                            const char* exec_error, size_t exec_error_size, const sigset_t* mask,
                            const struct sigaction* launcher_actions) {
  ::setpgid(0, group);
  // As chorusrun itself was started: ignored stays ignored (nohup, a shell's background job),
  // anything else is the default.
  for (size_t i = 0; i < std::size(kHandledSignals); ++i) {
    struct sigaction action = {};
    action.sa_handler = launcher_actions[i].sa_handler == SIG_IGN ? SIG_IGN : SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(kHandledSignals[i], &action, nullptr);
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // chorusrun died before prctl
  ::dup2(stdin_fd, STDIN_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  ::sigprocmask(SIG_SETMASK, mask, nullptr);
  ::execve(program, argv, envp);
  const char* why = ::strerrordesc_np(errno);  // unlike strerror, no locale and no locks
  if (why == nullptr) why = "unknown error";
  [[maybe_unused]] ssize_t a = ::write(STDERR_FILENO, exec_error, exec_error_size);
  [[maybe_unused]] ssize_t b = ::write(STDERR_FILENO, why, std::strlen(why));
  [[maybe_unused]] ssize_t c = ::write(STDERR_FILENO, "\n", 1);
  ::_exit(127);
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

std::string SignalName(int sig) {
  const char* name = ::sigdescr_np(sig);
  return absl::StrCat(sig, " (", name != nullptr ? name : "unknown signal", ")");
}

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
  RestoreSignals();
}

int WorkerGroup::RunningCount() const {
  return static_cast<int>(
      std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; }));
}

absl::Status WorkerGroup::Start(const std::vector<WorkerSpec>& specs) {
  EnsureStandardFds();
  if (::pipe2(signal_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  g_signal_fd = signal_pipe_[1];
  for (size_t i = 0; i < std::size(kHandledSignals); ++i) {
    struct sigaction action = {};
    action.sa_handler = kHandledSignals[i] == SIGPIPE ? SIG_IGN : OnSignal;
    action.sa_flags = SA_RESTART | (kHandledSignals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
    sigemptyset(&action.sa_mask);
    ::sigaction(kHandledSignals[i], &action, &old_actions_[i]);
  }
  handlers_installed_ = true;

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
  Worker& w = workers_[static_cast<size_t>(index)];
  int out[2], err[2], in[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(e)));
  }
  if (spec.stdin_text && ::pipe2(in, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(e)));
  }

  // Everything the child needs is built before fork.
  std::vector<std::string> env_strings;
  env_strings.reserve(spec.environment.size());
  for (const auto& [name, value] : spec.environment) {
    env_strings.push_back(absl::StrCat(name, "=", value));
  }
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string exec_error = absl::StrCat("chorusrun: error: cannot run ", spec.program, ": ");

  sigset_t all, old_mask;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ExecChild(keeper_, parent, spec.stdin_text ? in[0] : dev_null, out[1], err[1],
              spec.program.c_str(), argv.data(), envp.data(), exec_error.data(), exec_error.size(),
              &old_mask, old_actions_);
  }
  const int fork_errno = errno;
  if (pid > 0) ::setpgid(pid, keeper_);  // EACCES once the child has exec'd: it did it itself
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::close(out[1]);
  ::close(err[1]);
  if (in[0] >= 0) ::close(in[0]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    if (in[1] >= 0) ::close(in[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(fork_errno)));
  }
  w.pid = pid;
  w.running = true;
  w.fds[0] = out[0];
  w.fds[1] = err[0];
  w.stdin_fd = in[1];
  ::fcntl(w.fds[0], F_SETFL, O_NONBLOCK);
  ::fcntl(w.fds[1], F_SETFL, O_NONBLOCK);
  if (spec.stdin_text) {
    // Small (a line): fits the pipe's buffer. A worker that already died gives EPIPE: ignored.
    const std::string& text = *spec.stdin_text;
    size_t written = 0;
    while (written < text.size()) {
      const ssize_t n = ::write(w.stdin_fd, text.data() + written, text.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      written += static_cast<size_t>(n);
    }
  }
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
  char bytes[64];
  while (true) {
    const ssize_t n = ::read(signal_pipe_[0], bytes, sizeof(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    for (ssize_t i = 0; i < n; ++i) {
      const int sig = bytes[i];
      if (sig != SIGINT && sig != SIGTERM) continue;  // SIGCHLD: Reap() runs next
      if (!result->stop_signal) result->stop_signal = sig;
      if (stopping_) {
        KillAll();
      } else {
        BeginStop(sig);
      }
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

void WorkerGroup::RestoreSignals() {
  if (!handlers_installed_) return;
  for (size_t i = 0; i < std::size(kHandledSignals); ++i) {
    ::sigaction(kHandledSignals[i], &old_actions_[i], nullptr);
  }
  handlers_installed_ = false;
  g_signal_fd = -1;
  CloseFd(&signal_pipe_[0]);
  CloseFd(&signal_pipe_[1]);
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
    std::vector<struct pollfd> polled = {{signal_pipe_[0], POLLIN, 0}};
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
    const int timeout_ms =
        static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(wake - now) + 1));
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
  RestoreSignals();
  return result;
}

}  // namespace chorus::launcher
