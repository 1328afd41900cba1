#include "launcher/process/spawn.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace chorus::launcher {
namespace {

// The write end of the innermost installed SignalPipe; -1 when none is.
volatile sig_atomic_t g_signal_fd = -1;
// The innermost installed SignalPipe (main thread only).
const SignalPipe* g_current = nullptr;

void OnSignal(int sig) {
  const int saved = errno;
  const int fd = g_signal_fd;
  if (fd >= 0) {
    const char byte = static_cast<char>(sig);
    [[maybe_unused]] ssize_t ignored = ::write(fd, &byte, 1);
  }
  errno = saved;
}

// The child side of vfork(): it shares chorusrun's memory until execve, so system calls only,
// on its own stack frames, and no handler of chorusrun's may run in it: every signal is blocked
// (by the parent, before vfork) until each caught one is back to its default.
[[noreturn]] void ExecChild(pid_t group, pid_t parent, int stdin_fd, int out_fd, int err_fd,
                            const char* program, char* const argv[], char* const envp[],
                            const char* exec_error, size_t exec_error_size, const sigset_t* mask,
                            const struct sigaction* inherited) {
  ::setpgid(0, group);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current = {};
    if (::sigaction(sig, nullptr, &current) != 0) continue;
    if (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN) continue;
    struct sigaction action = {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(sig, &action, nullptr);
  }
  // As chorusrun itself was started: ignored stays ignored (nohup, a shell's background job),
  // anything else is the default.
  for (size_t i = 0; i < std::size(SignalPipe::kSignals); ++i) {
    struct sigaction action = {};
    action.sa_handler = inherited[i].sa_handler == SIG_IGN ? SIG_IGN : SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(SignalPipe::kSignals[i], &action, nullptr);
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

absl::Status PipeError(int error) {
  return absl::InternalError(absl::StrCat("pipe: ", std::strerror(error)));
}

}  // namespace

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

void EnsureStandardFds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) ::open("/dev/null", O_RDWR);
  }
}

SignalPipe::~SignalPipe() { Restore(); }

absl::Status SignalPipe::Install() {
  if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) return PipeError(errno);
  previous_fd_ = g_signal_fd;
  outer_ = g_current;
  g_signal_fd = fds_[1];
  g_current = this;
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    struct sigaction action = {};
    action.sa_handler = kSignals[i] == SIGPIPE ? SIG_IGN : OnSignal;
    action.sa_flags = SA_RESTART | (kSignals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
    sigemptyset(&action.sa_mask);
    ::sigaction(kSignals[i], &action, &old_actions_[i]);
  }
  installed_ = true;
  return absl::OkStatus();
}

void SignalPipe::Restore() {
  if (!installed_) return;
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    ::sigaction(kSignals[i], &old_actions_[i], nullptr);
  }
  installed_ = false;
  g_signal_fd = previous_fd_;
  g_current = outer_;
  for (int& fd : fds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

const struct sigaction* SignalPipe::inherited_actions() const {
  return outer_ != nullptr ? outer_->inherited_actions() : old_actions_;
}

std::vector<int> SignalPipe::Drain() {
  std::vector<int> signals;
  char bytes[64];
  while (fds_[0] >= 0) {
    const ssize_t n = ::read(fds_[0], bytes, sizeof(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) signals.push_back(bytes[i]);
  }
  return signals;
}

absl::StatusOr<SpawnedProcess> SpawnProcess(const WorkerSpec& spec, pid_t group, int dev_null,
                                            const struct sigaction* inherited) {
  int out[2], err[2], in[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) return PipeError(errno);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    return PipeError(e);
  }
  if (spec.stdin_text && ::pipe2(in, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return PipeError(e);
  }

  // Everything the child needs is built before vfork.
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
  // vfork, not fork: chorusrun forks its discovery script every discovery interval and every
  // worker at each reset; fork copied its page tables and then took a copy-on-write fault for
  // every page it wrote while the child lived (most of an idle chorusrun's CPU). The calling
  // thread waits until the child has exec'd or exited.
  const pid_t pid = ::vfork();
  if (pid == 0) {
    ExecChild(group, parent, spec.stdin_text ? in[0] : dev_null, out[1], err[1],
              spec.program.c_str(), argv.data(), envp.data(), exec_error.data(), exec_error.size(),
              &old_mask, inherited);
  }
  const int fork_errno = errno;
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
  SpawnedProcess p;
  p.pid = pid;
  p.stdout_fd = out[0];
  p.stderr_fd = err[0];
  p.stdin_fd = in[1];
  ::fcntl(p.stdout_fd, F_SETFL, O_NONBLOCK);
  ::fcntl(p.stderr_fd, F_SETFL, O_NONBLOCK);
  if (spec.stdin_text) {
    // The text (a remote worker's variables) is written at once, so the pipe is grown to hold it
    // (Linux allows up to /proc/sys/fs/pipe-max-size, 1 MiB by default). A larger text blocks
    // until the child (ssh) reads it, which it does once connected, or it exits (bounded by its
    // ConnectTimeout). A worker that already died gives EPIPE: ignored.
    const std::string& text = *spec.stdin_text;
    if (const int capacity = ::fcntl(p.stdin_fd, F_GETPIPE_SZ);
        capacity >= 0 && text.size() > static_cast<size_t>(capacity)) {
      ::fcntl(p.stdin_fd, F_SETPIPE_SZ, static_cast<int>(std::min<size_t>(text.size(), 1 << 30)));
    }
    size_t written = 0;
    while (written < text.size()) {
      const ssize_t n = ::write(p.stdin_fd, text.data() + written, text.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      written += static_cast<size_t>(n);
    }
  }
  return p;
}

absl::StatusOr<std::string> CurrentDirectory() {
  std::vector<char> buffer(4096);
  while (::getcwd(buffer.data(), buffer.size()) == nullptr) {
    if (errno != ERANGE) {
      return absl::InternalError(absl::StrCat("getcwd: ", std::strerror(errno)));
    }
    buffer.resize(buffer.size() * 2);
  }
  return std::string(buffer.data());
}

int PollTimeoutMs(absl::Duration left) {
  const absl::Duration capped = std::clamp(left, absl::ZeroDuration(), absl::Hours(1));
  return static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(capped, absl::Milliseconds(1))));
}

}  // namespace chorus::launcher
